"""What a job reaches besides its image and EFS: S3 data buckets, the team's managed policies,
secrets, FSx for Lustre, and the nodes' container settings, against what AWS does with them.

Every rule holds on every variant: a setting that is off leaves nothing behind (no grant, no
endpoint, no file system, no mount), and one that is on grants exactly what it names.
"""

from __future__ import annotations

import email
import json
import re
from email.message import Message

from launcher.job.jobspec import FSX_NODE_PATH
from launcher.stack.buckets import DataBucket
from launcher.stack.outputs import NONE, OutputKey
from launcher.stack.secrets import Place, Store
from tests.rules.compute_rules import ecs_agent_settings
from tests.rules.copy_rules import DEFAULT_ENDPOINT_POLICY
from tests.rules.deployment import Deployment, Resource
from tests.rules.flows import Flow
from tests.rules.registry import CloudFormation, Model, Page, Schema, rule
from tests.rules.roles import action_matches, as_list, iam_glob, reachable_statements

# --- S3 -------------------------------------------------------------------------------------
S3_LIST_PREFIX = Page(
    "https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html",
    "you can grant s3:ListBucket permission with the s3:prefix condition that will allow the "
    "user to get a list of key names with those specific prefixes.",
)
S3_MULTIPART = Page(
    "https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html",
    "You must be allowed to perform the s3:PutObject action on an object to create multipart "
    "upload.",
)
S3_LIST_OBJECTS = Page(
    "https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html",
    "You must have permission to perform the s3:ListBucket action.",
)
LIST_PREFIX_IS_A_STRING_PREFIX = Model(
    "s3",
    "ListObjectsV2Request",
    "Prefix",
    "Limits the response to keys that begin with the specified prefix.",
)
IAM_STRING_LIKE = Page(
    "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html",
    "Case-sensitive matching. The values can include multi-character match wildcards (*) and "
    "single-character match wildcards (?) anywhere in the string.",
)
S3_HOME_FOLDERS = Page(
    "https://docs.aws.amazon.com/AmazonS3/latest/userguide/example-policies-s3.html",
    "home/${aws:username}/*",
)
# --- IAM ------------------------------------------------------------------------------------
MANAGED_POLICIES = CloudFormation(
    "aws_iam",
    "Role",
    "managed_policy_arns",
    "A list of Amazon Resource Names (ARNs) of the IAM managed policies that you want to attach "
    "to the role.",
)
MANAGED_POLICY_QUOTA = Page(
    "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html",
    "Managed policies attached to an IAM role",
)
# --- the nodes' own role ---------------------------------------------------------------------
SIMPLE_JOBS_HOST_NETWORK = Page(
    "https://docs.aws.amazon.com/batch/latest/userguide/networking-modes-jobs.html",
    "ECS-EC2 simple job",
)
SSM_CORE_READS_PARAMETERS = Page(
    "https://docs.aws.amazon.com/aws-managed-policy/latest/reference/"
    "AmazonSSMManagedInstanceCore.html",
    '"ssm:GetParameter"',
)
SESSION_MANAGER_ONLY = Page(
    "https://docs.aws.amazon.com/aws-managed-policy/latest/reference/"
    "AWSCloud9SSMInstanceProfile.html",
    '"ssmmessages:CreateControlChannel", "ssmmessages:CreateDataChannel", '
    '"ssmmessages:OpenControlChannel", "ssmmessages:OpenDataChannel", '
    '"ssm:UpdateInstanceInformation"',
)
ECS_INSTANCE_POLICY = Page(
    "https://docs.aws.amazon.com/aws-managed-policy/latest/reference/"
    "AmazonEC2ContainerServiceforEC2Role.html",
    "Policy version: v10 (default)",
)
# What reads data or secrets: no statement the instance role reaches may allow these on *.
READS_DATA_OR_SECRETS = (
    "ssm:GetParameter",
    "ssm:GetParameters",
    "ssm:GetParametersByPath",
    "ssm:GetParameterHistory",
    "secretsmanager:GetSecretValue",
    "secretsmanager:BatchGetSecretValue",
    "s3:GetObject",
    "s3:GetObjectVersion",
    "kms:Decrypt",
)
# --- secrets --------------------------------------------------------------------------------
SECRETS_PERMISSIONS = Page(
    "https://docs.aws.amazon.com/batch/latest/userguide/specifying-sensitive-data-secrets.html",
    "kms:Decrypt–Required only if your secret uses a custom KMS key and not the default key.",
)
PARAMETERS_PERMISSIONS = Page(
    "https://docs.aws.amazon.com/batch/latest/userguide/specifying-sensitive-data-parameters.html",
    "ssm:GetParameters—Required if you're referencing a Systems Manager Parameter Store "
    "parameter in a task definition.",
)
VIA_SERVICE = Page(
    "https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html",
    "The kms:ViaService condition key limits use of an AWS KMS key to requests from specified "
    "AWS services.",
)
SECRET_VALUE_FROM = Model(
    "batch",
    "Secret",
    "valueFrom",
    "If the parameter exists in a different Region, then the full ARN must be specified.",
)
SECRETS_MANAGER_ENDPOINT = Page(
    "https://docs.aws.amazon.com/batch/latest/userguide/specifying-sensitive-data-secrets.html",
    "if you're also using interface VPC endpoints, you must create the interface VPC endpoints "
    "for Secrets Manager",
)
ENDPOINT_PER_STORE = Page(
    "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/vpc-endpoints.html",
    "You only need to create the endpoints from the specific service your sensitive data is "
    "hosted in.",
)
# --- FSx for Lustre -------------------------------------------------------------------------
LUSTRE_VERSION = Model(
    "fsx",
    "CreateFileSystemRequest",
    "FileSystemTypeVersion",
    "2.15 is supported by all Lustre deployment types and is recommended for all new file systems.",
)
LUSTRE_ONE_SUBNET = Model(
    "fsx",
    "CreateFileSystemRequest",
    "SubnetIds",
    "For Windows SINGLE_AZ_1 and SINGLE_AZ_2 and all Lustre deployment types, provide exactly "
    "one subnet ID. The file server is launched in that subnet's Availability Zone.",
)
LUSTRE_CAPACITY = Model(
    "fsx",
    "CreateFileSystemRequest",
    "StorageCapacity",
    "For SCRATCH_2, PERSISTENT_2, and PERSISTENT_1 deployment types using SSD storage type, the "
    "valid values are 1200 GiB, 2400 GiB, and increments of 2400 GiB.",
)
LUSTRE_THROUGHPUT = Model(
    "fsx",
    "CreateFileSystemLustreConfiguration",
    "PerUnitStorageThroughput",
    "For PERSISTENT_2 SSD storage: 125, 250, 500, 1000 MB/s/TiB.",
)
LUSTRE_GROUPS = Model(
    "fsx",
    "CreateFileSystemRequest",
    "SecurityGroupIds",
    "A list of IDs specifying the security groups to apply to all network interfaces created "
    "for file system access.",
)
LUSTRE_PORTS = Page(
    "https://docs.aws.amazon.com/fsx/latest/LustreGuide/cannot-create-fs.html",
    "You must set up the security group to allow inbound traffic on ports 988 and 1018-1023",
)
LUSTRE_SUBNET_FIXED = Schema("AWS::FSx::FileSystem", "/properties/SubnetIds")
LUSTRE_DEPLOYMENT_FIXED = Schema(
    "AWS::FSx::FileSystem", "/properties/LustreConfiguration/DeploymentType"
)
LUSTRE_DELETED = Model(
    "fsx",
    "DeleteFileSystemRequest",
    "",
    "After deletion, the file system no longer exists, and its data is gone.",
)
LUSTRE_NO_FINAL_BACKUP = Model(
    "fsx",
    "DeleteFileSystemRequest",
    "",
    "By default, Amazon FSx will not take a final backup when the DeleteFileSystem operation is "
    "invoked.",
)
NO_DELETION_POLICY = Page(
    "https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.CfnDeletionPolicy.html",
    "If a resource has no DeletionPolicy attribute, AWS CloudFormation deletes the resource by "
    "default.",
)
DRA_VERSIONS = Model(
    "fsx",
    "CreateDataRepositoryAssociationRequest",
    "",
    "Data repository associations are supported on all FSx for Lustre 2.12 and 2.15 file "
    "systems, excluding scratch_1 deployment type.",
)
DRA_PATH = Model(
    "fsx",
    "CreateDataRepositoryAssociationRequest",
    "DataRepositoryPath",
    "The path can be an S3 bucket or prefix in the format s3://bucket-name/prefix/ (where prefix "
    "is optional).",
)
DRA_ROOT = Model(
    "fsx",
    "CreateDataRepositoryAssociationRequest",
    "FileSystemPath",
    "If you specify only a forward slash (/) as the file system path, you can link only one data "
    "repository to the file system.",
)
DRA_NO_OVERLAP = Model(
    "fsx",
    "CreateDataRepositoryAssociationRequest",
    "FileSystemPath",
    "Two data repository associations cannot have overlapping file system paths.",
)
DRA_ROOT_FIRST_ONLY = Model(
    "fsx",
    "CreateDataRepositoryAssociationRequest",
    "FileSystemPath",
    'You can only specify "/" as the file system path for the first data repository '
    "associated with a file system.",
)
DRA_IMPORT = Model(
    "fsx",
    "AutoImportPolicy",
    "Events",
    "DELETED - Amazon FSx automatically deletes files on the file system as corresponding files "
    "are deleted in the data repository.",
)
DRA_EXPORT = Model(
    "fsx",
    "AutoExportPolicy",
    "Events",
    "NEW - New files and directories are automatically exported to the data repository as they "
    "are added to the file system.",
)
DRA_FIRST_IMPORT = Model(
    "fsx",
    "CreateDataRepositoryAssociationRequest",
    "BatchImportMetaDataOnCreate",
    "Set to true to run an import data repository task to import metadata from the data "
    "repository to the file system after the data repository association is created.",
)
# --- the nodes' boot ------------------------------------------------------------------------
USER_DATA = Model(
    "ec2",
    "RequestLaunchTemplateData",
    "UserData",
    "If you are creating the launch template for use with Batch, the user data must be provided "
    "in the MIME multi-part archive format.",
)
USER_DATA_SIZE = Model(
    "ec2", "RequestLaunchTemplateData", "UserData", "User data is limited to 16 KB."
)
AGENT_AFTER_CLOUD_FINAL = Page(
    "https://github.com/aws/amazon-ecs-agent/blob/master/packaging/amazon-linux-ami-integrated/"
    "ecs.service",
    "After=cloud-final.service",
)
AGENT_PRIVILEGED = Page(
    "https://github.com/aws/amazon-ecs-agent/blob/master/README.md",
    "Whether launching privileged containers is disabled on the container instance.",
)
PRIVILEGED = Model(
    "batch",
    "ContainerProperties",
    "privileged",
    "When this parameter is true, the container is given elevated permissions on the host "
    "container instance (similar to the root user).",
)
LUSTRE_CLIENT = Page(
    "https://docs.aws.amazon.com/fsx/latest/LustreGuide/install-lustre-client.html",
    "sudo dnf install -y lustre-client",
)
LUSTRE_MOUNT = Page(
    "https://docs.aws.amazon.com/fsx/latest/LustreGuide/mounting-ec2-instance.html",
    "sudo mount -t lustre -o relatime,flock",
)
LUSTRE_MOUNT_NAME = Model(
    "fsx",
    "LustreFileSystemConfiguration",
    "MountName",
    "You use the MountName value when mounting the file system.",
)

USER_DATA_ONCE = Page(
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/user-data.html",
    "By default, user data scripts and cloud-init directives run only during the boot cycle "
    "when you first launch an instance.",
)
MOUNT_ON_REBOOT = Page(
    "https://docs.aws.amazon.com/fsx/latest/LustreGuide/mount-fs-auto-mount-onreboot.html",
    "mount your file system automatically",
)
REQUIRES_MOUNTS_FOR = Page(
    "https://www.freedesktop.org/software/systemd/man/latest/systemd.unit.html",
    "RequiresMountsFor=",
)
SHUTDOWN_TERMINATES = Model(
    "ec2",
    "RequestLaunchTemplateData",
    "InstanceInitiatedShutdownBehavior",
    "Indicates whether an instance stops or terminates when you initiate shutdown from the "
    "instance (using the operating system command for system shutdown).",
)
PCLUSTER_TERMINATES = Page(
    "https://github.com/aws/aws-parallelcluster/blob/develop/cli/src/pcluster/templates/"
    "queues_stack.py",
    'instance_initiated_shutdown_behavior="terminate"',
)

# What the stack reads and writes S3 with (the configuration's words, not the product's code).
READ = {"s3:GetObject"}
WRITE = {
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
}
LUSTRE_PORT_RANGES = ((988, 988), (1018, 1023))
DRA_EVENTS = {"NEW", "CHANGED", "DELETED"}


# --- helpers --------------------------------------------------------------------------------


def _role(d: Deployment, key: OutputKey) -> Resource | None:
    role = d.ref_target(d.config.stack_name, d.output(key.value))
    return role if role is not None and role.type == "AWS::IAM::Role" else None


Grant = tuple[str, str, str]  # (action, resource text, condition as JSON)


def role_grants(d: Deployment, role: Resource, service: str) -> set[Grant]:
    """Every (action, resource, condition) a role's Allow statements give for one service."""
    found = set()
    for st in d.role_statements(role):
        for action in as_list(st.get("Action", [])):
            if not action.startswith(f"{service}:"):
                continue
            for resource in as_list(st.get("Resource", [])):
                condition = json.dumps(st.get("Condition"), sort_keys=True)
                found.add(
                    (
                        st.get("Effect", "Allow") + " " + action,
                        d.text(role.stack, resource),
                        condition,
                    )
                )
    return found


def _allow(action: str, resource: str, condition: dict | None = None) -> Grant:
    return ("Allow " + action, resource, json.dumps(condition, sort_keys=True))


def bucket_grants(locations: tuple[DataBucket, ...]) -> set[Grant]:
    """What S3 documents a job needs for each location, and nothing more."""
    grants: set[Grant] = set()
    for b in locations:
        bucket = f"arn:aws:s3:::{b.bucket}"
        objects = f"{bucket}/{b.prefix}/*" if b.prefix else f"{bucket}/*"
        listing = (
            {"StringLike": {"s3:prefix": [f"{b.prefix}/", f"{b.prefix}/*"]}} if b.prefix else None
        )
        grants.add(_allow("s3:ListBucket", bucket, listing))
        actions = READ | (WRITE if b.writable else set())
        grants |= {_allow(a, objects) for a in actions}
    return grants


def function_bucket_arn(d: Deployment) -> str:
    """The function bucket's ARN as ``Deployment.text`` writes it (``<STACK/ID.Arn>``), or a
    string no resource starts with when the stacks have none."""
    bucket = d.ref_target(d.config.stack_name, d.output(OutputKey.FUNCTION_BUCKET.value))
    if bucket is None or bucket.type != "AWS::S3::Bucket":
        return "\0no function bucket"
    return f"<{bucket.stack}/{bucket.logical_id}.Arn>"


def string_like(pattern: str, value: str) -> bool:
    """IAM's StringLike condition operator, which is case-sensitive."""
    return iam_glob(pattern, value)


def literal_head(pattern: str) -> str:
    """What every value a StringLike pattern matches begins with (up to its first wildcard)."""
    return re.split(r"[*?]", pattern, maxsplit=1)[0]


def _place(d: Deployment) -> Place:
    return Place("aws", d.config.region, d.config.account)


def _lustre(d: Deployment) -> Resource | None:
    found = d.of_type("AWS::FSx::FileSystem")
    return found[0] if len(found) == 1 else None


def _user_data_parts(d: Deployment) -> tuple[list[Message], list[str]]:
    """The user data's MIME parts, parsed with the email package, or why it cannot be."""
    text = d.user_data
    if text is None:
        return [], ["no user data a node could read"]
    message = email.message_from_string(text)
    if not message.is_multipart() or message.get_content_type() != "multipart/mixed":
        return [], ["user data is not a MIME multi-part archive"]
    parts = message.get_payload()
    problems = [
        f"a user data part of type {p.get_content_type()}, not a shell script run in cloud-final"
        for p in parts
        if p.get_content_type() != "text/x-shellscript"
    ]
    return parts, problems


_HEREDOC = re.compile(r"^cat > (\S+) <<'(\w+)'\n(.*?)\n\2$", re.M | re.S)


def written_files(script: str) -> dict[str, str]:
    """The files a user data part writes with ``cat > PATH <<'END'`` (path -> text)."""
    return {m[1]: m[3] + "\n" for m in _HEREDOC.finditer(script)}


def unit_settings(text: str) -> dict[str, dict[str, list[str]]]:
    """A systemd unit file's settings: section -> key -> values in order (keys repeat)."""
    found: dict[str, dict[str, list[str]]] = {}
    section = ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        found.setdefault(section, {}).setdefault(key.strip(), []).append(value.strip())
    return found


# --- rules ----------------------------------------------------------------------------------


@rule(
    S3_LIST_PREFIX,
    S3_MULTIPART,
    S3_LIST_OBJECTS,
    DEFAULT_ENDPOINT_POLICY,
    covers=("AWS::IAM::Policy.PolicyDocument", "AWS::EC2::VPCEndpoint"),
)
def job_role_reaches_exactly_the_data_buckets(d: Deployment) -> list[str]:
    """The job role's S3 grants are exactly data_buckets (and the FSx link's location): list
    each location, read its objects, and write them only where it says :rw.

    Listing is s3:ListBucket on the bucket; for a prefix, "you can grant s3:ListBucket
    permission with the s3:prefix condition that will allow the user to get a list of key names
    with those specific prefixes" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/
    amazon-s3-policy-keys.html), so a prefix location lists [PREFIX, PREFIX/*] only and a whole
    bucket lists without a condition; `launcher check` lists with ListObjectsV2, for which "You
    must have permission to perform the s3:ListBucket action"
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html). Objects are
    BUCKET/PREFIX/*. Writing includes multipart uploads, which checkpoints use: "You must be
    allowed to perform the s3:PutObject action on an object to create multipart upload", and
    s3:AbortMultipartUpload and s3:ListMultipartUploadParts to stop one and list its parts
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html); listing a bucket's
    uploads in progress (s3:ListBucketMultipartUploads) is not needed to upload, and s3:prefix
    is not a documented condition of it, so it is not granted.
    A new VPC's S3 gateway endpoint carries no policy, so "we attach a default policy that
    allows full access to the service" (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
    API_CreateVpcEndpoint.html); a policy there would have to name every data bucket.
    """
    problems = []
    role = _role(d, OutputKey.JOB_ROLE_ARN)
    if role is None:
        return ["JobRoleArn names no role of the stacks"]
    locations = d.config.data_locations
    # The function bucket's grants are payload_rules.py's (function_payloads_reach_...).
    payloads = function_bucket_arn(d)
    granted = {g for g in role_grants(d, role, "s3") if not g[1].startswith(payloads)}
    wanted = bucket_grants(locations)
    problems += [
        f"job role: {a} on {r} (condition {c}) beyond data_buckets"
        for a, r, c in sorted(granted - wanted)
    ]
    problems += [
        f"job role: lacks {a} on {r} (condition {c})" for a, r, c in sorted(wanted - granted)
    ]
    for ep in d.of_type("AWS::EC2::VPCEndpoint"):
        policy = ep.props.get("PolicyDocument")
        if ep.props.get("VpcEndpointType") != "Gateway" or policy is None:
            continue
        text = json.dumps(policy)
        problems += [
            f"{ep.path}: its policy keeps data bucket {b.bucket} out"
            for b in locations
            if b.bucket not in text and '"*"' not in text
        ]
    return problems


@rule(LIST_PREFIX_IS_A_STRING_PREFIX, IAM_STRING_LIKE, S3_HOME_FOLDERS)
def bucket_listings_never_reach_a_sibling_prefix(d: Deployment) -> list[str]:
    """Every s3:prefix pattern a role may list with admits only prefixes inside its location's
    folder (PREFIX/...), never a sibling such as PREFIX-private/.

    ListObjectsV2's Prefix "Limits the response to keys that begin with the specified prefix"
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html): a plain string
    prefix, so a listing with Prefix=data returns data-private/ too. StringLike is
    "Case-sensitive matching. The values can include multi-character match wildcards (*) and
    single-character match wildcards (?) anywhere in the string" (https://docs.aws.amazon.com/
    IAM/latest/UserGuide/reference_policies_elements_condition_operators.html), so a pattern
    admits only what begins with its text before the first wildcard: that head must end at the
    folder's slash. The S3 user guide's per-user folders do the same: each user lists
    "home/${aws:username}/*", with the slash (https://docs.aws.amazon.com/AmazonS3/latest/
    userguide/example-policies-s3.html).
    The folder itself (PREFIX/) and what is under it (PREFIX/sub/) must still be listable.
    """
    problems = []
    folders: dict[str, set[str]] = {}
    for b in d.config.data_locations:
        folders.setdefault(b.bucket, set()).add(f"{b.prefix}/" if b.prefix else "")
    for role in d.of_type("AWS::IAM::Role"):
        listable: dict[str, list[str]] = {}
        for st in d.role_statements(role):
            if "s3:ListBucket" not in as_list(st.get("Action", [])):
                continue
            patterns = as_list(st.get("Condition", {}).get("StringLike", {}).get("s3:prefix", []))
            for resource in as_list(st.get("Resource", [])):
                bucket = d.text(role.stack, resource).removeprefix("arn:aws:s3:::")
                allowed = folders.get(bucket, set())
                if "" in allowed:
                    continue  # the whole bucket is a location
                if not patterns:
                    problems.append(f"{role.path}: lists all of {bucket}, not only {allowed}")
                problems += [
                    f"{role.path}: s3:prefix {p!r} also lists {literal_head(p)!r}..., outside "
                    f"{' '.join(sorted(allowed))}"
                    for p in patterns
                    if not any(literal_head(p).startswith(f) for f in allowed)
                ]
                listable.setdefault(bucket, []).extend(patterns)
        for bucket, patterns in listable.items():
            problems += [
                f"{role.path}: {bucket}/{wanted} cannot be listed"
                for folder in sorted(folders.get(bucket, set()) - {""})
                for wanted in (folder, f"{folder}sub/")
                if not any(string_like(p, wanted) for p in patterns)
            ]
    return problems


@rule(
    SIMPLE_JOBS_HOST_NETWORK, SSM_CORE_READS_PARAMETERS, SESSION_MANAGER_ONLY, ECS_INSTANCE_POLICY
)
def instance_role_reads_no_data_or_secrets(d: Deployment) -> list[str]:
    """No statement the nodes' instance role reaches, its managed policies' included, allows
    reading parameters, secrets, objects or decrypting on every resource.

    Single-node jobs are "ECS-EC2 simple job"s, which run in the host network mode
    (https://docs.aws.amazon.com/batch/latest/userguide/networking-modes-jobs.html): there
    neither ECS_AWSVPC_BLOCK_IMDS (awsvpc tasks only) nor the hop limit (a host process is no
    hop away) keeps a container from IMDS, so every single-node job, array child and Spot job
    holds the instance role. AmazonSSMManagedInstanceCore allows "ssm:GetParameter" and
    GetParameters on * (https://docs.aws.amazon.com/aws-managed-policy/latest/reference/
    AmazonSSMManagedInstanceCore.html): every Parameter Store value, SecureStrings under the
    aws/ssm key included, around job_secrets. Session Manager needs only the five actions of
    AWS's own instance-profile policy for it (https://docs.aws.amazon.com/aws-managed-policy/
    latest/reference/AWSCloud9SSMInstanceProfile.html). The ECS agent's policy, "Policy
    version: v10 (default)" (https://docs.aws.amazon.com/aws-managed-policy/latest/reference/
    AmazonEC2ContainerServiceforEC2Role.html), reads none of them; its documents come from
    moto's copy of AWS's managed policies, so a policy it does not carry is a finding.
    """
    problems = []
    for ce in d.of_type("AWS::Batch::ComputeEnvironment"):
        profile = d.ref_target(ce.stack, ce.props.get("ComputeResources", {}).get("InstanceRole"))
        if profile is None:
            continue
        for value in profile.props.get("Roles", []):
            role = d.ref_target(profile.stack, value)
            if role is None:
                problems.append(f"{profile.path}: a role outside the stacks")
                continue
            statements, unseen = reachable_statements(d, role)
            problems += [f"{role.path}: cannot see what {arn} allows" for arn in unseen]
            for st in statements:
                if st.get("Effect") != "Allow" or "*" not in as_list(st.get("Resource", [])):
                    continue
                problems += [
                    f"{role.path}: {pattern} on * reads {action}"
                    for pattern in as_list(st.get("Action", []))
                    for action in READS_DATA_OR_SECRETS
                    if action_matches(pattern, action)
                ]
    return sorted(set(problems))


@rule(MANAGED_POLICIES, MANAGED_POLICY_QUOTA, covers=("AWS::IAM::Role.ManagedPolicyArns",))
def job_role_carries_the_configured_managed_policies(d: Deployment) -> list[str]:
    """job_role_policies are attached to the job role, to no other role, and within IAM's quota.

    ManagedPolicyArns is "A list of Amazon Resource Names (ARNs) of the IAM managed policies
    that you want to attach to the role" (https://docs.aws.amazon.com/AWSCloudFormation/latest/
    TemplateReference/aws-resource-iam-role.html): the escape hatch for what else jobs need,
    AWS's own policies (arn:aws:iam::aws:policy/...) or the account's. "Managed policies attached
    to an IAM role" are 10 by default, at most 20 after a quota increase
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html): beyond the
    role's own, a deploy fails. The node and execution roles never get them: the team grants
    jobs, not the ECS agent.
    """
    problems = []
    role = _role(d, OutputKey.JOB_ROLE_ARN)
    if role is None:
        return ["JobRoleArn names no role of the stacks"]
    wanted = sorted(d.config.job_role_policies)
    attached = sorted(d.text(role.stack, a) for a in role.props.get("ManagedPolicyArns", []))
    if attached != wanted:
        problems.append(f"job role carries managed policies {attached}; configured {wanted}")
    if len(attached) > 20:
        problems.append(f"{len(attached)} managed policies: IAM attaches at most 20 to a role")
    for other in d.of_type("AWS::IAM::Role"):
        if other.logical_id == role.logical_id:
            continue
        texts = {d.text(other.stack, a) for a in other.props.get("ManagedPolicyArns", [])}
        problems += [
            f"{other.path} carries job_role_policies {a}" for a in sorted(texts & set(wanted))
        ]
    return problems


@rule(
    SECRETS_PERMISSIONS,
    PARAMETERS_PERMISSIONS,
    VIA_SERVICE,
    SECRET_VALUE_FROM,
    covers=("AWS::IAM::Policy.PolicyDocument",),
)
def execution_role_reads_only_the_granted_secrets(d: Deployment) -> list[str]:
    """The execution role reads exactly the secrets and parameters of job_secrets, decrypts
    only through those services, and the job role reads none of them.

    The ECS agent reads a job's secrets with the execution role before the container starts:
    secretsmanager:GetSecretValue for Secrets Manager, and "ssm:GetParameters—Required if
    you're referencing a Systems Manager Parameter Store parameter in a task definition"
    (https://docs.aws.amazon.com/batch/latest/userguide/specifying-sensitive-data-parameters.html),
    plus "kms:Decrypt–Required only if your secret uses a custom KMS key and not the default
    key" (https://docs.aws.amazon.com/batch/latest/userguide/specifying-sensitive-data-secrets.html).
    The stack cannot know the keys, so kms:Decrypt must carry kms:ViaService: "The kms:ViaService
    condition key limits use of an AWS KMS key to requests from specified AWS services"
    (https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html), the services
    of the secrets' own Regions (a parameter in another Region is named by its full ARN: "If the
    parameter exists in a different Region, then the full ARN must be specified",
    https://docs.aws.amazon.com/batch/latest/APIReference/API_Secret.html). A name prefix is
    NAME* in the stack's account and Region; an ARN is that one secret. The containers' own
    role never reads secrets: the value reaches the job through the agent alone.
    """
    problems = []
    role = _role(d, OutputKey.EXECUTION_ROLE_ARN)
    job_role = _role(d, OutputKey.JOB_ROLE_ARN)
    if role is None or job_role is None:
        return ["ExecutionRoleArn or JobRoleArn names no role of the stacks"]
    grants = d.config.secret_grants
    place = _place(d)
    wanted = {
        _allow(
            "secretsmanager:GetSecretValue"
            if g.store is Store.SECRETS_MANAGER
            else "ssm:GetParameters",
            g.iam_resource(place),
        )
        for g in grants
    }
    granted = role_grants(d, role, "secretsmanager") | role_grants(d, role, "ssm")
    problems += [
        f"execution role: {a} on {r} beyond job_secrets" for a, r, _ in sorted(granted - wanted)
    ]
    problems += [f"execution role: lacks {a} on {r}" for a, r, _ in sorted(wanted - granted)]
    problems += [
        f"execution role: {r} matches every secret"
        for _, r, _ in sorted(granted)
        if r == "*" or r.endswith((":secret:*", ":parameter/*"))
    ]
    services = sorted({f"{g.store.value}.{g.region(place)}.amazonaws.com" for g in grants})
    decrypt = role_grants(d, role, "kms")
    via = {"StringEquals": {"kms:ViaService": services}}
    expected = {_allow("kms:Decrypt", "*", via)} if grants else set()
    if decrypt != expected:
        problems.append(
            f"execution role: kms grants {sorted(decrypt)}; expected {sorted(expected)}"
        )
    leaked = role_grants(d, job_role, "secretsmanager") | {
        g for g in role_grants(d, job_role, "ssm") if g[0].startswith("Allow ssm:GetParameter")
    }
    problems += [
        f"job role: {a} on {r}: containers read secrets themselves" for a, r, _ in sorted(leaked)
    ]
    return problems


@rule(SECRETS_MANAGER_ENDPOINT, ENDPOINT_PER_STORE, covers=("AWS::EC2::VPCEndpoint",))
def nodes_reach_the_secret_stores(d: Deployment) -> list[str]:
    """Without NAT, an interface endpoint for each store job_secrets names, reached by the
    nodes, and none for a store nothing reads.

    "When using a job definition that references Secrets Manager secrets ... if you're also using
    interface VPC endpoints, you must create the interface VPC endpoints for Secrets Manager"
    (https://docs.aws.amazon.com/batch/latest/userguide/specifying-sensitive-data-secrets.html),
    and for parameters the one for Systems Manager: "You only need to create the endpoints from
    the specific service your sensitive data is hosted in"
    (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/vpc-endpoints.html). The ECS
    agent reads them from the node's own interface, so the nodes must reach those endpoints on
    443; an endpoint reaches its own Region only, so without NAT every grant is in the stack's.
    With NAT the route out carries them; an imported VPC brings its own endpoints.
    """
    config = d.config
    if config.imports_vpc or config.nat_gateway:
        return []
    problems = []
    place = _place(d)
    stores = {g.store for g in config.secret_grants}
    endpoints = d.interface_endpoints
    needed = {
        "secretsmanager": Store.SECRETS_MANAGER in stores or bool(config.registry_secrets),
        "ssm": Store.PARAMETER_STORE in stores,
    }
    for service, wanted in needed.items():
        if wanted and service not in endpoints:
            problems.append(f"job_secrets read from {service} without its endpoint (no NAT)")
        elif wanted:
            problems += d.network.admits(
                d.host_groups, endpoints[service], Flow(f"node to {service} endpoint", "tcp", 443)
            )
    if not needed["secretsmanager"] and "secretsmanager" in endpoints:
        problems.append("a Secrets Manager endpoint that nothing reads (an hourly cost)")
    problems += [
        f"{g}: in {g.region(place)}, which the VPC's endpoints do not reach (no NAT)"
        for g in config.secret_grants
        if g.region(place) != config.region
    ]
    return problems


@rule(
    LUSTRE_VERSION,
    LUSTRE_ONE_SUBNET,
    LUSTRE_CAPACITY,
    LUSTRE_THROUGHPUT,
    LUSTRE_SUBNET_FIXED,
    LUSTRE_DEPLOYMENT_FIXED,
    DRA_VERSIONS,
    covers=(
        "AWS::FSx::FileSystem.FileSystemType",
        "AWS::FSx::FileSystem.FileSystemTypeVersion",
        "AWS::FSx::FileSystem.SubnetIds",
        "AWS::FSx::FileSystem.StorageCapacity",
        "AWS::FSx::FileSystem.StorageType",
        "AWS::FSx::FileSystem.LustreConfiguration",
    ),
)
def lustre_file_system_is_2_15_in_the_nodes_subnet(d: Deployment) -> list[str]:
    """fsx_lustre is one Lustre 2.15 file system in the storage stack, in the nodes' one
    subnet, with the configured size, deployment and throughput; none when it is off.

    FileSystemTypeVersion: "2.15 is supported by all Lustre deployment types and is recommended
    for all new file systems" (the default is 2.10, or 2.12 for PERSISTENT_2;
    https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystem.html), and data
    repository associations "are supported on all FSx for Lustre 2.12 and 2.15 file systems,
    excluding scratch_1 deployment type" (https://docs.aws.amazon.com/fsx/latest/APIReference/
    API_CreateDataRepositoryAssociation.html). SubnetIds: "For ...
    all Lustre deployment types, provide exactly one subnet ID. The file server is launched in
    that subnet's Availability Zone": the nodes' subnet keeps Lustre traffic in the cluster's
    zone. Capacity: "the valid values are 1200 GiB, 2400 GiB, and increments of 2400 GiB";
    throughput "For PERSISTENT_2 SSD storage: 125, 250, 500, 1000 MB/s/TiB"
    (https://docs.aws.amazon.com/fsx/latest/APIReference/
    API_CreateFileSystemLustreConfiguration.html), none for SCRATCH_2. SubnetIds and the
    deployment type are fixed at creation (https://docs.aws.amazon.com/AWSCloudFormation/latest/
    TemplateReference/aws-resource-fsx-filesystem.html): a change replaces the file system, so
    it lives in the storage stack with the other data.
    """
    settings = d.config.fsx_lustre
    found = d.of_type("AWS::FSx::FileSystem")
    if settings is None:
        return [f"{fs.path}: a file system without fsx_lustre" for fs in found]
    if len(found) != 1:
        return [f"{len(found)} FSx file systems for one fsx_lustre"]
    (fs,) = found
    props = fs.props
    lustre = props.get("LustreConfiguration", {})
    problems = []
    if fs.stack != f"{d.config.stack_name}-Storage":
        problems.append(f"{fs.path}: outside the storage stack")
    kind = (props.get("FileSystemType"), props.get("FileSystemTypeVersion"))
    if kind != ("LUSTRE", "2.15"):
        problems.append(f"{fs.path}: {kind}, not Lustre 2.15")
    if (
        props.get("StorageType", "SSD") != "SSD"
        or props.get("StorageCapacity") != settings.storage_gib
    ):
        size = f"{props.get('StorageCapacity')} GiB {props.get('StorageType')}"
        problems.append(f"{fs.path}: {size}; configured {settings.storage_gib} GiB SSD")
    capacity = props.get("StorageCapacity", 0)
    if capacity not in (1200, 2400) and capacity % 2400:
        problems.append(f"{fs.path}: {capacity} GiB, which FSx refuses")
    if lustre.get("DeploymentType") != settings.deployment:
        deployment = lustre.get("DeploymentType")
        problems.append(f"{fs.path}: {deployment}; configured {settings.deployment}")
    throughput = lustre.get("PerUnitStorageThroughput")
    if settings.deployment == "PERSISTENT_2" and throughput not in (125, 250, 500, 1000):
        problems.append(f"{fs.path}: PERSISTENT_2 with throughput {throughput}")
    if settings.deployment == "SCRATCH_2" and throughput is not None:
        problems.append(f"{fs.path}: SCRATCH_2 takes no throughput, got {throughput}")
    if (
        settings.throughput_mibps_per_tib is not None
        and throughput != settings.throughput_mibps_per_tib
    ):
        problems.append(
            f"{fs.path}: throughput {throughput}; configured {settings.throughput_mibps_per_tib}"
        )
    subnets = [_target(d, fs.stack, s) for s in props.get("SubnetIds", [])]
    ce = d.compute_environment
    nodes = [_target(d, ce.stack, s) for s in ce.props["ComputeResources"]["Subnets"]]
    if len(subnets) != 1 or subnets != nodes:
        problems.append(f"{fs.path}: in subnets {subnets}; the nodes are in {nodes}")
    return problems


def _target(d: Deployment, stack: str, value) -> str:
    """A subnet as one name across stacks: its resource, or the literal id."""
    found = d.ref_target(stack, value)
    return found.path if found is not None else d.text(stack, value)


@rule(LUSTRE_PORTS, LUSTRE_GROUPS, covers=("AWS::FSx::FileSystem.SecurityGroupIds",))
def nodes_and_file_servers_reach_each_other_on_lustre_ports(d: Deployment) -> list[str]:
    """TCP 988 and 1018-1023 from the nodes to the file servers and back, and between the file
    servers; nothing else reaches the file servers.

    "You must set up the security group to allow inbound traffic on ports 988 and 1018-1023"
    from the clients and from the file system's own group
    (https://docs.aws.amazon.com/fsx/latest/LustreGuide/cannot-create-fs.html), the groups FSx
    puts on "all network interfaces created for file system access"
    (https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystem.html). The client
    is the node's kernel (jobs see the node's mount through a bind mount), so the node's
    primary interface, not the job's task interface, is the one that must get through; the file
    servers open connections back to their clients, so the nodes' group admits them too.
    """
    problems = []
    for groups in d.lustre_groups:
        for low, high in LUSTRE_PORT_RANGES:
            node = Flow("node to FSx for Lustre", "tcp", low, to_port=high)
            problems += d.network.both_ways(d.host_groups, groups, node)
            servers = Flow("FSx file server to file server", "tcp", low, to_port=high)
            problems += d.network.admits(groups, groups, servers)
        allowed = groups | d.host_groups
        for group in sorted(groups):
            for r in d.network.rules_of(group, "in"):
                in_range = r.protocol == "tcp" and any(
                    r.from_port is not None
                    and r.to_port is not None
                    and low <= r.from_port <= r.to_port <= high
                    for low, high in LUSTRE_PORT_RANGES
                )
                if r.group not in allowed or not in_range:
                    what = f"{r.protocol}/{r.from_port}-{r.to_port}"
                    problems.append(f"{r.origin}: lets {r.group or r.cidr} in on {what}")
    return problems


@rule(LUSTRE_DELETED, LUSTRE_NO_FINAL_BACKUP, NO_DELETION_POLICY, covers=())
def lustre_file_system_is_kept_unless_the_stack_is_disposable(d: Deployment) -> list[str]:
    """The file system is retained on stack deletion and on replacement unless
    removal_policy=destroy.

    Deleting a file system loses it for good: "After deletion, the file system no longer
    exists, and its data is gone", and "By default, Amazon FSx will not take a final backup
    when the DeleteFileSystem operation is invoked"
    (https://docs.aws.amazon.com/fsx/latest/APIReference/API_DeleteFileSystem.html). "If a
    resource has no DeletionPolicy attribute, AWS CloudFormation deletes the resource by
    default" (https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.CfnDeletionPolicy.html),
    so both DeletionPolicy and UpdateReplacePolicy say Retain unless the environment is
    disposable, as for EFS and the repository.
    """
    policy = "Retain" if d.config.removal_policy == "retain" else "Delete"
    problems = []
    for fs in d.of_type("AWS::FSx::FileSystem"):
        for attribute in ("DeletionPolicy", "UpdateReplacePolicy"):
            if fs.body.get(attribute) != policy:
                found = fs.body.get(attribute)
                problems.append(
                    f"{fs.path}: {attribute} {found}; {d.config.removal_policy} wants {policy}"
                )
    return problems


@rule(
    DRA_PATH,
    DRA_ROOT,
    DRA_NO_OVERLAP,
    DRA_ROOT_FIRST_ONLY,
    DRA_IMPORT,
    DRA_EXPORT,
    DRA_FIRST_IMPORT,
    covers=("AWS::FSx::DataRepositoryAssociation",),
)
def file_system_imports_and_exports_the_linked_location(d: Deployment) -> list[str]:
    """fsx_lustre.s3 is one data repository association at /BUCKET/PREFIX of the file system
    (or the link_path set), importing and exporting new, changed and deleted files; the job
    role may use the location directly.

    DataRepositoryPath "can be an S3 bucket or prefix in the format s3://bucket-name/prefix/"
    and "If you specify only a forward slash (/) as the file system path, you can link only one
    data repository to the file system" (https://docs.aws.amazon.com/fsx/latest/APIReference/
    API_CreateDataRepositoryAssociation.html). Its paths are create-only, so a new s3 replaces
    the association, and CloudFormation creates the new one while the old one exists: "Two
    data repository associations cannot have overlapping file system paths", and "You can only
    specify "/" as the file system path for the first data repository associated with a file
    system". A link named for its location (not "/" unless link_path says so) lets a new
    location land beside the old one in one deploy (infra/update_plan.py refuses the rest).
    Import events: NEW, CHANGED and "DELETED -
    Amazon FSx automatically deletes files on the file system as corresponding files are deleted
    in the data repository" (https://docs.aws.amazon.com/fsx/latest/APIReference/
    API_AutoImportPolicy.html); export events likewise, "NEW - New files and directories are
    automatically exported to the data repository as they are added to the file system"
    (https://docs.aws.amazon.com/fsx/latest/APIReference/API_AutoExportPolicy.html): checkpoints
    written to /fsx reach S3 without a step of the job's own. BatchImportMetaDataOnCreate: "Set
    to true to run an import data repository task to import metadata from the data repository
    to the file system after the data repository association is created", so the existing data
    set is listed from the first mount.
    """
    settings = d.config.fsx_lustre
    links = d.of_type("AWS::FSx::DataRepositoryAssociation")
    linked = settings.repository if settings is not None else None
    if linked is None:
        return [f"{a.path}: a data repository association without fsx_lustre.s3" for a in links]
    if len(links) != 1:
        return [f"{len(links)} data repository associations for one fsx_lustre.s3"]
    (link,) = links
    props = link.props
    problems = []
    target = d.ref_target(link.stack, props.get("FileSystemId"))
    if target is None or target.type != "AWS::FSx::FileSystem":
        problems.append(f"{link.path}: not on the stack's file system")
    wanted = settings.link_path or f"/{linked.bucket}" + (
        f"/{linked.prefix}" if linked.prefix else ""
    )
    if props.get("FileSystemPath") != wanted:
        problems.append(f"{link.path}: at {props.get('FileSystemPath')}, not {wanted}")
    if props.get("DataRepositoryPath") != linked.uri:
        problems.append(f"{link.path}: links {props.get('DataRepositoryPath')}, not {linked.uri}")
    s3 = props.get("S3", {})
    for policy in ("AutoImportPolicy", "AutoExportPolicy"):
        events = set(s3.get(policy, {}).get("Events", []))
        if events != DRA_EVENTS:
            problems.append(
                f"{link.path}: {policy} events {sorted(events)}; wanted {sorted(DRA_EVENTS)}"
            )
    if props.get("BatchImportMetaDataOnCreate") is not True:
        problems.append(f"{link.path}: the linked data is not listed until files change")
    if not any(b.covers(linked) for b in d.config.data_locations):
        problems.append(f"{linked}: the job role cannot read and write the linked location")
    return problems


@rule(
    USER_DATA,
    USER_DATA_SIZE,
    AGENT_AFTER_CLOUD_FINAL,
    AGENT_PRIVILEGED,
    PRIVILEGED,
    LUSTRE_CLIENT,
    LUSTRE_MOUNT,
    LUSTRE_MOUNT_NAME,
    covers=(),
)
def nodes_mount_lustre_and_refuse_privileged_before_the_agent_starts(
    d: Deployment,
) -> list[str]:
    """The user data is a MIME multi-part archive of shell parts that finish before the ECS
    agent starts: it turns privileged containers off unless allow_privileged, and mounts the
    FSx file system at /fsx with the options the FSx guide gives, or nothing.

    "If you are creating the launch template for use with Batch, the user data must be provided
    in the MIME multi-part archive format", and "User data is limited to 16 KB"
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RequestLaunchTemplateData.html).
    Shell parts run in cloud-final, and the agent's unit starts
    "After=cloud-final.service" (https://github.com/aws/amazon-ecs-agent/blob/master/packaging/
    amazon-linux-ami-integrated/ecs.service): a part that starts the agent itself would run jobs
    before /fsx exists. ECS_DISABLE_PRIVILEGED says "Whether launching privileged containers is
    disabled on the container instance" (https://github.com/aws/amazon-ecs-agent/blob/master/
    README.md), default false; a privileged container "is given elevated permissions on the
    host container instance (similar to the root user)"
    (https://docs.aws.amazon.com/batch/latest/APIReference/API_ContainerProperties.html), so it
    is true unless the stack allows them. The client comes from the AMI's repository, "sudo dnf
    install -y lustre-client" (https://docs.aws.amazon.com/fsx/latest/LustreGuide/
    install-lustre-client.html), and mounts with "sudo mount -t lustre -o relatime,flock"
    DNS_NAME@tcp:/MOUNT_NAME (https://docs.aws.amazon.com/fsx/latest/LustreGuide/
    mounting-ec2-instance.html); "You use the MountName value when mounting the file system"
    (https://docs.aws.amazon.com/fsx/latest/APIReference/API_LustreFileSystemConfiguration.html):
    the file system's own DNSName and LustreMountName, never a literal. A node that cannot mount
    powers off rather than serve jobs an empty directory.
    """
    parts, problems = _user_data_parts(d)
    if not parts:
        return problems
    text = d.user_data or ""
    if len(text.encode()) > 16 * 1024:
        problems.append(f"user data of {len(text.encode())} bytes: EC2 takes 16 KB")
    scripts = [p.get_payload() for p in parts]
    for script in scripts:
        if re.search(r"systemctl\s+(start|restart|enable\s+--now)\s+(--no-block\s+)?ecs\b", script):
            problems.append("a user data part starts the ECS agent before cloud-final ends")
    settings, _ = ecs_agent_settings(text)
    disabled = settings.get("ECS_DISABLE_PRIVILEGED")
    if d.config.allow_privileged and disabled not in (None, "false"):
        problems.append("allow_privileged, but the agent refuses privileged containers")
    if not d.config.allow_privileged and disabled != "true":
        problems.append("privileged containers run: ECS_DISABLE_PRIVILEGED is not true")
    mounts = [s for s in scripts if "mount -t lustre" in s]
    fs = _lustre(d)
    if fs is None:
        return problems + (["user data mounts Lustre without fsx_lustre"] if mounts else [])
    if len(mounts) != 1:
        return [*problems, f"{len(mounts)} user data parts mount Lustre; one should"]
    (script,) = mounts
    source = (
        f"<{fs.stack}/{fs.logical_id}.DNSName>@tcp:/<{fs.stack}/{fs.logical_id}.LustreMountName>"
    )
    expected = f"mount -t lustre -o relatime,flock {source} {FSX_NODE_PATH}"
    lines = [line.strip() for line in script.splitlines()]
    mount_at = [i for i, line in enumerate(lines) if line.startswith("mount -t lustre")]
    install_at = [
        i for i, line in enumerate(lines) if line.startswith("dnf install -y lustre-client")
    ]
    if not mount_at or not any(lines[i].startswith(expected) for i in mount_at):
        problems.append(f"the mount is not {expected!r}: {[lines[i] for i in mount_at]}")
    if not install_at or (mount_at and install_at[0] > mount_at[0]):
        problems.append("the Lustre client is not installed before the mount")
    mounter = "\n".join(
        text for text in written_files(script).values() if "mount -t lustre" in text
    )
    if not re.search(
        rf"if ! mountpoint -q {re.escape(FSX_NODE_PATH)}; then\n(.*\n)*?\s*poweroff\n", mounter
    ):
        problems.append("a node that failed to mount goes on to run jobs on an empty /fsx")
    return problems


@rule(
    USER_DATA_ONCE,
    MOUNT_ON_REBOOT,
    REQUIRES_MOUNTS_FOR,
    AGENT_AFTER_CLOUD_FINAL,
    SHUTDOWN_TERMINATES,
    PCLUSTER_TERMINATES,
    covers=("AWS::EC2::LaunchTemplate.LaunchTemplateData.InstanceInitiatedShutdownBehavior",),
)
def lustre_comes_back_after_a_reboot_before_the_agent(d: Deployment) -> list[str]:
    """The FSx mount is a systemd unit enabled for every boot, the ECS agent needs it and /fsx
    mounted before it starts, and a node that shuts itself down is terminated.

    "By default, user data scripts and cloud-init directives run only during the boot cycle
    when you first launch an instance" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/
    user-data.html): a mount made only by user data is gone after a maintenance reboot, while
    the agent comes back and jobs bind the root volume's empty /fsx. The FSx guide has the
    client "mount your file system automatically" at boot (https://docs.aws.amazon.com/fsx/
    latest/LustreGuide/mount-fs-auto-mount-onreboot.html); here a unit wanted by
    multi-user.target mounts (with retries) and is ordered before ecs.service, whose drop-in
    Requires= and After= it, adds RequiresMountsFor=/fsx (https://www.freedesktop.org/software/
    systemd/man/latest/systemd.unit.html) and checks the mount point before each start. The
    unit must not wait for cloud-final: the first boot starts it from cloud-final, and the agent
    starts "After=cloud-final.service" (https://github.com/aws/amazon-ecs-agent/blob/master/
    packaging/amazon-linux-ami-integrated/ecs.service). InstanceInitiatedShutdownBehavior
    "Indicates whether an instance stops or terminates when you initiate shutdown from the
    instance (using the operating system command for system shutdown)", default stop
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RequestLaunchTemplateData.html):
    terminate, as ParallelCluster's compute nodes, instance_initiated_shutdown_behavior=
    "terminate" (https://github.com/aws/aws-parallelcluster/blob/develop/cli/src/pcluster/
    templates/queues_stack.py), so a node that cannot mount does not linger stopped (a cluster
    without FSx never powers a node off, and keeps EC2's default).
    """
    problems = []
    behaviour = d.launch_template.props["LaunchTemplateData"].get(
        "InstanceInitiatedShutdownBehavior"
    )
    if _lustre(d) is not None and behaviour != "terminate":
        problems.append(f"a node that powers off is {behaviour or 'stopped'}, not terminated")
    parts, _ = _user_data_parts(d)
    mounts = [p.get_payload() for p in parts if "mount -t lustre" in p.get_payload()]
    if _lustre(d) is None or len(mounts) != 1:
        return problems
    (script,) = mounts
    files = written_files(script)
    units = {
        path.rsplit("/", 1)[1]: unit_settings(text)
        for path, text in files.items()
        if path.startswith("/etc/systemd/system/") and path.endswith(".service")
    }
    mounting = [
        name
        for name, unit in units.items()
        if any(
            "mount -t lustre" in files.get(cmd.split()[0], "")
            for cmd in unit.get("Service", {}).get("ExecStart", [])
        )
    ]
    if len(mounting) != 1:
        return [*problems, f"{len(mounting)} systemd units run the mount at boot; one should"]
    (name,) = mounting
    unit = units[name]
    if "multi-user.target" not in unit.get("Install", {}).get("WantedBy", []):
        problems.append(f"{name} is not wanted by multi-user.target: no mount after a reboot")
    if not re.search(rf"^systemctl enable --now {re.escape(name)}$", script, re.M):
        problems.append(f"{name} is not enabled (and started) by the user data")
    ordering = unit.get("Unit", {})
    if "ecs.service" not in ordering.get("Before", []):
        problems.append(f"{name} is not ordered before the ECS agent")
    if any("cloud-final" in v for v in ordering.get("After", []) + ordering.get("Requires", [])):
        problems.append(f"{name} waits for cloud-final, which starts it: a deadlock")
    drop_ins = [
        unit_settings(text)
        for path, text in files.items()
        if path.startswith("/etc/systemd/system/ecs.service.d/") and path.endswith(".conf")
    ]
    agent: dict[str, list[str]] = {}
    for drop_in in drop_ins:
        for section in drop_in.values():
            for key, values in section.items():
                agent.setdefault(key, []).extend(values)
    for key in ("Requires", "After"):
        if name not in agent.get(key, []):
            problems.append(f"the ECS agent's unit lacks {key}={name}")
    if FSX_NODE_PATH not in agent.get("RequiresMountsFor", []):
        problems.append(f"the ECS agent's unit lacks RequiresMountsFor={FSX_NODE_PATH}")
    if f"/usr/bin/mountpoint -q {FSX_NODE_PATH}" not in agent.get("ExecStartPre", []):
        problems.append(f"the ECS agent starts without checking that {FSX_NODE_PATH} is mounted")
    return problems


@rule(AGENT_PRIVILEGED, SECRET_VALUE_FROM, covers=())
def outputs_carry_the_data_settings(d: Deployment) -> list[str]:
    """DataBuckets, JobSecrets, FsxFileSystemId and AllowPrivileged say what the stack grants,
    so the launcher refuses what the cluster would not run before anything is submitted.

    A privileged job on nodes whose agent refuses them ("Whether launching privileged containers
    is disabled on the container instance", https://github.com/aws/amazon-ecs-agent/blob/master/
    README.md) is never placed; a secret outside the execution role's grants fails the job at
    start, and the launcher writes each grant's valueFrom as the ARN Batch wants ("If the
    parameter exists in a different Region, then the full ARN must be specified",
    https://docs.aws.amazon.com/batch/latest/APIReference/API_Secret.html).
    """
    config = d.config
    problems = []
    expected = {
        OutputKey.DATA_BUCKETS: OutputKey.DATA_BUCKETS.render(config.data_locations),
        OutputKey.JOB_SECRETS: OutputKey.JOB_SECRETS.render(config.secret_grants),
        OutputKey.ALLOW_PRIVILEGED: OutputKey.ALLOW_PRIVILEGED.render(config.allow_privileged),
    }
    for key, value in expected.items():
        if d.output(key.value) != value:
            problems.append(f"{key.value} is {d.output(key.value)!r}; the stack grants {value!r}")
    # What the launcher reads back (launcher.stack.outputs) is what the stack granted.
    if OutputKey.JOB_SECRETS.parse(d.output(OutputKey.JOB_SECRETS.value)) != config.secret_grants:
        problems.append("JobSecrets does not parse back into the grants")
    if (
        OutputKey.DATA_BUCKETS.parse(d.output(OutputKey.DATA_BUCKETS.value))
        != config.data_locations
    ):
        problems.append("DataBuckets does not parse back into the locations")
    fs = _lustre(d)
    value = d.output(OutputKey.FSX_FILE_SYSTEM_ID.value)
    if fs is None and value != NONE:
        problems.append(f"FsxFileSystemId is {value!r} without a file system")
    if fs is not None and d.resolve(config.stack_name, value) != (fs.stack, {"Ref": fs.logical_id}):
        problems.append(f"FsxFileSystemId is {value!r}, not the file system's id")
    return problems
