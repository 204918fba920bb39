"""EFS, ECR, log groups, endpoints and IAM roles, against what each service does with them."""

from __future__ import annotations

import json

from launcher.stack.image_tags import BASE_PREFIX, WORKSPACE_PREFIX
from tests.rules.deployment import Deployment, Resource
from tests.rules.registry import Model, Page, rule
from tests.rules.roles import CONFUSED_DEPUTY, EXECUTION_ROLE_TRUST, ecs_trust_problems

EFS_DEFAULT_POLICY = Page(
    "https://docs.aws.amazon.com/efs/latest/ug/iam-access-control-nfs-efs.html",
    "grants full access to any anonymous client that can connect to the file system using a "
    "mount target",
)
EFS_ALLOW_EITHER = Page(
    "https://docs.aws.amazon.com/efs/latest/ug/iam-access-control-nfs-efs.html",
    'An "allow" permission on an action in either an IAM identity policy or a file system '
    "resource policy allows access for that action.",
)
EFS_ENCRYPTED = Model(
    "efs",
    "CreateFileSystemRequest",
    "Encrypted",
    "If you don't specify a KMS key, then the default KMS key for Amazon EFS, "
    "/aws/elasticfilesystem, is used to protect the encrypted file system.",
)
EFS_PERFORMANCE = Model(
    "efs",
    "CreateFileSystemRequest",
    "PerformanceMode",
    "We recommend generalPurpose performance mode for all file systems.",
)
EFS_THROUGHPUT = Model(
    "efs",
    "CreateFileSystemRequest",
    "ThroughputMode",
    "The mode can be bursting, provisioned, or elastic.",
)
ACCESS_POINT_ROOT = Model(
    "efs",
    "CreateAccessPointRequest",
    "RootDirectory",
    "If the root directory does not exist, attempts to mount using the access point will fail.",
)
ACCESS_POINT_USER = Model(
    "efs",
    "CreateAccessPointRequest",
    "PosixUser",
    "The operating system user and group applied to all file system requests made using the "
    "access point.",
)
LOGS_KEY_POLICY = Page(
    "https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html",
    "kms:EncryptionContext:aws:logs:arn",
)
RETENTION = Model(
    "logs",
    "PutRetentionPolicyRequest",
    "retentionInDays",
    "Possible values are: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, "
    "1827, 2192, 2557, 2922, 3288, and 3653.",
)
FLOW_LOG_ROLE = Model(
    "ec2",
    "CreateFlowLogsRequest",
    "DeliverLogsPermissionArn",
    "The ARN of the IAM role that allows Amazon EC2 to publish flow logs to the log destination.",
)
PRIVATE_DNS = Model(
    "ec2",
    "CreateVpcEndpointRequest",
    "PrivateDnsEnabled",
    "To use a private hosted zone, you must set the following VPC attributes to true: "
    "enableDnsHostnames and enableDnsSupport.",
)
ECS_ENDPOINTS = Page(
    "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/vpc-endpoints.html",
    "com.amazonaws.region.ecs-agent",
)
SSM_ENDPOINTS = Page(
    "https://docs.aws.amazon.com/systems-manager/latest/userguide/setup-create-vpc.html",
    "com.amazonaws.region.ssmmessages",
)
ECR_ENDPOINTS = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html",
    "com.amazonaws.region.ecr.dkr",
)
LIFECYCLE_AGE = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/LifecyclePolicies.html",
    "With countType = sinceImagePushed, all images whose pushed_at_time is older than the "
    "specified number of days based on countNumber are expired.",
)
LIFECYCLE_ONE_RULE_PER_IMAGE = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/LifecyclePolicies.html",
    "An image that matches the tagging requirements of a rule cannot be expired by a rule with "
    "a lower priority.",
)
LIFECYCLE_ANY_LAST = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/lifecycle_policy_parameters.html",
    "A rule with a tagStatus value of any must have the highest value for rulePriority and be "
    "evaluated last.",
)
TAG_IMMUTABLE = Model(
    "ecr",
    "CreateRepositoryRequest",
    "imageTagMutability",
    "If IMMUTABLE is specified, all image tags within the repository will be immutable which "
    "will prevent them from being overwritten.",
)
EFS_IAM_NEEDS_TLS = Model(
    "batch",
    "EFSAuthorizationConfig",
    "iam",
    "EFS IAM authorization requires that TransitEncryption be ENABLED and that a JobRoleArn is "
    "specified.",
)
EXECUTION_ROLE = Model(
    "batch",
    "ContainerProperties",
    "executionRoleArn",
    "The Amazon Resource Name (ARN) of the execution role that Batch can assume.",
)


def _statements(document: dict) -> list[dict]:
    statements = document.get("Statement", [])
    return statements if isinstance(statements, list) else [statements]


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


@rule(
    EFS_DEFAULT_POLICY,
    EFS_ALLOW_EITHER,
    covers=("AWS::EFS::FileSystem.FileSystemPolicy",),
)
def file_system_policy_closes_anonymous_access(d: Deployment) -> list[str]:
    """A file system policy exists, denies plain NFS, mounts that bypass an access point, root.

    https://docs.aws.amazon.com/efs/latest/ug/iam-access-control-nfs-efs.html: without a
    policy, the default one applies, which "grants full access to any anonymous client that
    can connect to the file system using a mount target". With a policy, 'An "allow"
    permission on an action in either an IAM identity policy or a file system resource policy
    allows access for that action', so the policy holds denials only and the job role's own
    policy does the granting.
    """
    problems = []
    for fs in d.of_type("AWS::EFS::FileSystem"):
        statements = _statements(fs.props.get("FileSystemPolicy", {}))
        if not statements:
            problems.append(f"{fs.path}: no file system policy: anonymous clients get full access")
            continue
        allows = [s for s in statements if s.get("Effect") == "Allow"]
        if any(
            s.get("Principal") in ("*", {"AWS": "*"}) and not s.get("Condition") for s in allows
        ):
            problems.append(f"{fs.path}: an unconditional Allow for everyone")
        denies = [s for s in statements if s.get("Effect") == "Deny"]
        conditions = json.dumps([s.get("Condition", {}) for s in denies])
        if '"aws:SecureTransport": "false"' not in conditions:
            problems.append(f"{fs.path}: connections without TLS are not denied")
        if '"elasticfilesystem:AccessPointArn": "true"' not in conditions:
            problems.append(f"{fs.path}: mounts without an access point are not denied")
        if not any(
            "elasticfilesystem:ClientRootAccess" in _as_list(s.get("Action")) for s in denies
        ):
            problems.append(f"{fs.path}: root access is not denied")
    return problems


@rule(
    EFS_ENCRYPTED,
    EFS_PERFORMANCE,
    EFS_THROUGHPUT,
    ACCESS_POINT_ROOT,
    ACCESS_POINT_USER,
    EFS_IAM_NEEDS_TLS,
    covers=(
        "AWS::EFS::FileSystem.Encrypted",
        "AWS::EFS::FileSystem.PerformanceMode",
        "AWS::EFS::FileSystem.ThroughputMode",
        "AWS::EFS::FileSystem.BackupPolicy",
        "AWS::EFS::MountTarget.FileSystemId",
        "AWS::EFS::MountTarget.SubnetId",
        "AWS::EFS::AccessPoint",
        "AWS::IAM::Policy.PolicyDocument",
    ),
)
def jobs_mount_the_file_system_through_its_access_point(d: Deployment) -> list[str]:
    """Encrypted, general purpose, elastic; a mount target in the cluster subnet; an access
    point that creates its root and maps every client; the job role may mount only through it.

    https://docs.aws.amazon.com/efs/latest/APIReference/API_CreateAccessPoint.html: "If the
    root directory does not exist, attempts to mount using the access point will fail", and
    the POSIX user is "applied to all file system requests made using the access point".
    https://docs.aws.amazon.com/efs/latest/APIReference/API_CreateFileSystem.html: "We
    recommend generalPurpose performance mode for all file systems", throughput "can be
    bursting, provisioned, or elastic" (elastic follows bursty checkpoint writes), and
    without a key "the default KMS key for Amazon EFS, /aws/elasticfilesystem, is used".
    https://docs.aws.amazon.com/batch/latest/APIReference/API_EFSAuthorizationConfig.html:
    "EFS IAM authorization requires that TransitEncryption be ENABLED and that a JobRoleArn is
    specified" (the job side is a job rule).
    """
    problems = []
    (fs,) = d.of_type("AWS::EFS::FileSystem")
    props = fs.props
    if props.get("Encrypted") is not True:
        problems.append("file system not encrypted at rest")
    if props.get("PerformanceMode", "generalPurpose") != "generalPurpose":
        problems.append("performance mode is not generalPurpose")
    if props.get("ThroughputMode") != "elastic":
        problems.append("throughput mode is not elastic")
    if props.get("BackupPolicy", {}).get("Status") != "ENABLED":
        problems.append("automatic backups off")
    ce_subnets = d.compute_environment.props["ComputeResources"]["Subnets"]
    for mt in d.of_type("AWS::EFS::MountTarget"):
        if _resolved(d, mt.stack, mt.props["SubnetId"]) not in [
            _resolved(d, d.compute_environment.stack, s) for s in ce_subnets
        ]:
            problems.append(f"{mt.path}: not in the cluster subnet")
    (ap,) = d.of_type("AWS::EFS::AccessPoint")
    root = ap.props.get("RootDirectory", {})
    if not root.get("Path", "/").strip("/") or not root.get("CreationInfo"):
        problems.append("access point exposes the root, or cannot create its directory")
    if not ap.props.get("PosixUser"):
        problems.append("access point maps no POSIX user: clients choose their own uid")
    job_policies = [
        p for p in d.of_type("AWS::IAM::Policy") if "JobRole" in json.dumps(p.props.get("Roles"))
    ]
    grants = [
        s
        for p in job_policies
        for s in _statements(p.props["PolicyDocument"])
        if any(a.startswith("elasticfilesystem:Client") for a in _as_list(s["Action"]))
    ]
    if not grants or not all(
        "elasticfilesystem:AccessPointArn" in json.dumps(s.get("Condition")) for s in grants
    ):
        problems.append(
            "the job role may mount the file system other than through the access point"
        )
    return problems


def _resolved(d: Deployment, stack: str, value) -> str:
    target = d.ref_target(stack, value)
    return target.path if target else json.dumps(value)


@rule(
    LOGS_KEY_POLICY,
    RETENTION,
    FLOW_LOG_ROLE,
    covers=(
        "AWS::Logs::LogGroup",
        "AWS::KMS::Key",
        "AWS::EC2::FlowLog",
        "AWS::IAM::Role.AssumeRolePolicyDocument",
    ),
)
def log_groups_are_encrypted_with_a_key_logs_may_use(d: Deployment) -> list[str]:
    """Each log group names a rotating customer managed key whose policy lets CloudWatch Logs
    use it for exactly that group; retention is a value Logs accepts; flow logs can deliver.

    https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html: the
    key policy must allow the regional logs service principal, scoped with the
    kms:EncryptionContext:aws:logs:arn condition; a group whose key the service may not use
    cannot be created or written. Retention "Possible values are: 1, 3, 5, 7, 14, 30, 60, 90,
    120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, and 3653."
    (https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/
    API_PutRetentionPolicy.html). A flow log to CloudWatch Logs needs "the IAM role
    that allows Amazon EC2 to publish flow logs to the log destination"
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateFlowLogs.html).
    """
    problems = []
    allowed_retention = {1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096}
    allowed_retention |= {1827, 2192, 2557, 2922, 3288, 3653}
    for group in d.of_type("AWS::Logs::LogGroup"):
        props = group.props
        name = props.get("LogGroupName")
        if props.get("RetentionInDays") not in allowed_retention:
            problems.append(f"{group.path}: retention {props.get('RetentionInDays')} not accepted")
        key = d.ref_target(group.stack, props.get("KmsKeyId"))
        if key is None or key.type != "AWS::KMS::Key":
            problems.append(f"{group.path}: not encrypted with a key of the stacks")
            continue
        if key.props.get("EnableKeyRotation") is not True:
            problems.append(f"{key.path}: rotation off")
        logs = [
            s
            for s in _statements(key.props.get("KeyPolicy", {}))
            if "logs." in json.dumps(s.get("Principal")) and s.get("Effect") == "Allow"
        ]
        scoped = json.dumps([s.get("Condition", {}) for s in logs])
        if not logs or "kms:EncryptionContext:aws:logs:arn" not in scoped:
            problems.append(f"{key.path}: CloudWatch Logs may not use it, or not scoped to groups")
        elif f":log-group:{name}" not in scoped:
            problems.append(f"{key.path}: its policy does not name log group {name}")
    for flow in d.of_type("AWS::EC2::FlowLog"):
        role = d.ref_target(flow.stack, flow.props.get("DeliverLogsPermissionArn"))
        trust = json.dumps(role.props.get("AssumeRolePolicyDocument")) if role else ""
        if "vpc-flow-logs.amazonaws.com" not in trust:
            problems.append(f"{flow.path}: no role that vpc-flow-logs may assume")
        if flow.props.get("TrafficType") != "ALL":
            problems.append(f"{flow.path}: not all traffic (rejected EFA/NCCL flows are the clue)")
    return problems


@rule(
    PRIVATE_DNS,
    ECS_ENDPOINTS,
    ECR_ENDPOINTS,
    SSM_ENDPOINTS,
    covers=(
        "AWS::EC2::VPCEndpoint",
        "AWS::EC2::VPC.EnableDnsHostnames",
        "AWS::EC2::VPC.EnableDnsSupport",
        "AWS::EC2::Subnet",
        "AWS::EC2::Route",
        "AWS::EC2::RouteTable",
        "AWS::EC2::SubnetRouteTableAssociation",
        "AWS::EC2::NatGateway",
        "AWS::EC2::EIP",
        "AWS::EC2::InternetGateway",
        "AWS::EC2::VPCGatewayAttachment",
    ),
)
def nodes_reach_every_service_they_need(d: Deployment) -> list[str]:
    """In a new VPC without NAT, an endpoint for every service a node or job calls, with DNS.

    A node registers with ECS and pulls images; a job writes logs; an operator opens a
    session: without NAT each needs its endpoint in the cluster subnet (ECS:
    https://docs.aws.amazon.com/AmazonECS/latest/developerguide/vpc-endpoints.html names
    com.amazonaws.region.ecs-agent among them; ECR:
    https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html,
    com.amazonaws.region.ecr.dkr and the S3 gateway for layers; Session Manager:
    https://docs.aws.amazon.com/systems-manager/latest/userguide/setup-create-vpc.html,
    com.amazonaws.region.ssmmessages). Private DNS makes the usual host names resolve to them,
    and "To use a private hosted zone, you must set the following VPC attributes to true:
    enableDnsHostnames and enableDnsSupport"
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateVpcEndpoint.html).
    With NAT, the NAT route carries what has no endpoint. Imported VPCs bring their own.
    """
    if d.config.imports_vpc:
        return []
    problems = []
    (vpc,) = d.of_type("AWS::EC2::VPC")
    if not (vpc.props.get("EnableDnsHostnames") and vpc.props.get("EnableDnsSupport")):
        problems.append("VPC without DNS support and hostnames: private DNS does not resolve")
    needed = {"ecr.api", "ecr.dkr", "ecs", "ecs-agent", "ecs-telemetry", "logs"}
    if not d.config.nat_gateway:
        needed |= {"ssm", "ssmmessages", "ec2messages"}
    present = set(d.interface_endpoints)
    problems += [f"no interface endpoint for {s}" for s in sorted(needed - present)]
    for ep in d.of_type("AWS::EC2::VPCEndpoint"):
        if (
            ep.props.get("VpcEndpointType") == "Interface"
            and ep.props.get("PrivateDnsEnabled") is not True
        ):
            problems.append(f"{ep.path}: private DNS off")
    gateways = [
        ep
        for ep in d.of_type("AWS::EC2::VPCEndpoint")
        if ep.props.get("VpcEndpointType") == "Gateway"
        and ".s3" in json.dumps(ep.props["ServiceName"])
    ]
    if not gateways:
        problems.append("no S3 gateway endpoint: ECR layers come from S3")
    nat_routes = [r for r in d.of_type("AWS::EC2::Route") if "NatGatewayId" in r.props]
    if d.config.nat_gateway != bool(nat_routes):
        problems.append("NAT route present without nat_gateway, or missing with it")
    for subnet in d.of_type("AWS::EC2::Subnet"):
        if subnet.props.get("AvailabilityZone") != d.config.availability_zone:
            problems.append(f"{subnet.path}: outside the cluster's zone")
    return problems


@rule(
    TAG_IMMUTABLE,
    LIFECYCLE_ONE_RULE_PER_IMAGE,
    LIFECYCLE_AGE,
    LIFECYCLE_ANY_LAST,
    covers=("AWS::ECR::Repository",),
)
def images_a_job_may_still_pull_stay(d: Deployment) -> list[str]:
    """Workspace image tags are content hashes the repository never moves, and each kind of
    image expires by its age, never because others were pushed after it.

    https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_CreateRepository.html: "If
    IMMUTABLE is specified, all image tags within the repository will be immutable which will
    prevent them from being overwritten." A lookup by tag then always finds the image the
    content key names. A count of the newest images let a busy day expire the image of a job
    still queued, a Batch retry or a resubmission: workspace (ws-) and copied base (base-)
    images go "With countType = sinceImagePushed, all images whose pushed_at_time is older than
    the specified number of days" (https://docs.aws.amazon.com/AmazonECR/latest/userguide/
    LifecyclePolicies.html), each kind in a rule of its own that no count rule can overrule:
    "An image that matches the tagging requirements of a rule cannot be expired by a rule with
    a lower priority"; the one rule of tag status any "must have the highest value for
    rulePriority and be evaluated last" (https://docs.aws.amazon.com/AmazonECR/latest/
    userguide/lifecycle_policy_parameters.html). Scanning runs on push.
    """
    (repo,) = d.of_type("AWS::ECR::Repository")
    props = repo.props
    problems = []
    if props.get("ImageTagMutability") != "IMMUTABLE":
        problems.append("tags are mutable")
    if not props.get("ImageScanningConfiguration", {}).get("ScanOnPush"):
        problems.append("no scan on push")
    policy = json.loads(props.get("LifecyclePolicy", {}).get("LifecyclePolicyText", "{}"))
    rules = sorted(policy.get("rules", []), key=lambda r: r["rulePriority"])
    if not rules:
        return [*problems, "no lifecycle rule: the repository grows without bound"]
    ages = {
        WORKSPACE_PREFIX: d.config.workspace_image_days,
        BASE_PREFIX: d.config.base_image_days,
    }
    for prefix, days in ages.items():
        owners = [
            r
            for r in rules
            if r["selection"].get("tagStatus") == "any"
            or prefix in r["selection"].get("tagPrefixList", [])
        ]
        first = owners[0]["selection"] if owners else {}
        if (first.get("tagPrefixList"), first.get("countType"), first.get("countNumber")) != (
            [prefix],
            "sinceImagePushed",
            days,
        ):
            problems.append(f"{prefix} images do not expire by age ({days} days) first: {first}")
    if rules[-1]["selection"].get("tagStatus") != "any" or [
        r for r in rules[:-1] if r["selection"].get("tagStatus") == "any"
    ]:
        problems.append("the rule of tag status any is not the one evaluated last")
    return problems


@rule(
    EXECUTION_ROLE,
    CONFUSED_DEPUTY,
    EXECUTION_ROLE_TRUST,
    covers=("AWS::IAM::Role.ManagedPolicyArns", "AWS::IAM::Policy.Roles"),
)
def roles_are_assumable_by_the_services_that_use_them(d: Deployment) -> list[str]:
    """The instance role by EC2 with the ECS agent's policy; execution and job roles by ECS tasks.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_ContainerProperties.html:
    executionRoleArn is "The Amazon Resource Name (ARN) of the execution role that Batch can
    assume", and the job role is assumed by the task; both trust ecs-tasks.amazonaws.com. The
    job role, a task role, only for tasks of this account and region: "It is recommended that
    you use the aws:SourceAccount or aws:SourceArn condition keys to scope the permissions
    further to prevent the confused deputy security issue"
    (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-iam-roles.html); the
    execution role with the unconditioned trust the execution role's page gives
    (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task_execution_IAM_role.html).
    The instance role must carry the ECS agent's permissions or nodes never join the cluster.
    """
    problems = []
    roles = {r.logical_id: r for r in d.of_type("AWS::IAM::Role")}

    def trust(role: Resource) -> str:
        return json.dumps(role.props.get("AssumeRolePolicyDocument", {}))

    for prefix, principal in (
        ("InstanceRole", "ec2.amazonaws.com"),
        ("ExecutionRole", "ecs-tasks.amazonaws.com"),
        ("JobRole", "ecs-tasks.amazonaws.com"),
    ):
        found = [r for k, r in roles.items() if k.startswith(prefix)]
        if len(found) != 1 or principal not in trust(found[0]):
            problems.append(f"{prefix}: not exactly one role trusted by {principal}")
    for prefix, task_role in (("ExecutionRole", False), ("JobRole", True)):
        for role in [r for k, r in roles.items() if k.startswith(prefix)]:
            problems += ecs_trust_problems(d, role, prefix, task_role=task_role)
    instance = [r for k, r in roles.items() if k.startswith("InstanceRole")]
    if instance and "AmazonEC2ContainerServiceforEC2Role" not in json.dumps(
        instance[0].props.get("ManagedPolicyArns")
    ):
        problems.append("InstanceRole lacks the ECS agent's policy")
    return problems
