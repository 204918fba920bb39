"""Copy jobs: the Fargate pool, its network, its two roles, the copier image, the workspace
repository's encryption and the ECR pull-through cache rules, against what AWS does with them."""

from __future__ import annotations

import json
from pathlib import Path

from infra import pull_through
from launcher.stack.outputs import OutputKey, format_pairs
from tests.rules.deployment import Deployment, Resource
from tests.rules.flows import Flow
from tests.rules.registry import CloudFormation, Model, Page, rule
from tests.rules.roles import CONFUSED_DEPUTY, EXECUTION_ROLE_TRUST, ecs_trust_problems
from tests.rules.roles import as_list as _as_list
from tests.rules.roles import template_text as _text
from tests.rules.roles import trusts as _trusts

ROOT = Path(__file__).resolve().parents[2]

# --- Batch on Fargate -----------------------------------------------------------------------
FARGATE_GROUPS = Model(
    "batch",
    "ComputeResource",
    "securityGroupIds",
    "This parameter is required for jobs that are running on Fargate resources and must contain "
    "at least one security group. Fargate doesn't support launch templates.",
)
FARGATE_SUBNETS = Model(
    "batch",
    "ComputeResource",
    "subnets",
    "This parameter is required for compute environments using EC2, SPOT, FARGATE, or "
    "FARGATE_SPOT compute resources.",
)
FARGATE_NO_MINVCPUS = Model(
    "batch",
    "ComputeResource",
    "minvCpus",
    "This parameter isn't applicable to jobs that are running on Fargate resources. Don't "
    "specify it.",
)
FARGATE_CE_PAGE = Page(
    "https://docs.aws.amazon.com/batch/latest/userguide/fargate-compute-environments.html",
    "These aren't applicable for Fargate compute environments and can't be provided.",
)
MAXVCPUS = Model(
    "batch",
    "ComputeResource",
    "maxvCpus",
    "The maximum number of vCPUs that a compute environment can support.",
)
SERVICE_LINKED_ROLE = Model(
    "batch",
    "CreateComputeEnvironmentRequest",
    "serviceRole",
    "If your account already created the Batch service-linked role, that role is used by "
    "default for your compute environment unless you specify a different role here.",
)
QUEUE_NO_MIX = Model(
    "batch",
    "CreateJobQueueRequest",
    "computeEnvironmentOrder",
    "All of the compute environments must be either EC2 (EC2 or SPOT) or Fargate (FARGATE or "
    "FARGATE_SPOT); EC2 and Fargate compute environments can't be mixed.",
)
QUEUE_STATE = Model(
    "batch",
    "JobQueueDetail",
    "state",
    "If the job queue state is ENABLED, it can accept jobs.",
)
# --- the task's network -----------------------------------------------------------------------
PRIVATE_SUBNET_NAT = Model(
    "batch",
    "NetworkConfiguration",
    "assignPublicIp",
    "For a job that's running on Fargate resources in a private subnet to send outbound traffic "
    "to the internet (for example, to pull container images), the private subnet requires a NAT "
    "gateway be attached to route requests to the internet.",
)
FARGATE_TASK_ENI = Page(
    "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/platform-version-migration.html",
    "Starting with platform version 1.4.0, all Amazon ECS on Fargate tasks receive a single "
    "elastic network interface (referred to as the task ENI) and all network traffic flows "
    "through that ENI within your VPC.",
)
ECR_ENDPOINTS_FARGATE = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html",
    "Amazon ECS tasks using the Fargate launch type and platform version 1.4.0 or later require "
    "both the com.amazonaws.region.ecr.dkr and com.amazonaws.region.ecr.api Amazon ECR VPC "
    "endpoints",
)
LOGS_ENDPOINT_FARGATE = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html",
    "Amazon ECS tasks using the Fargate launch type that use a VPC without an internet gateway "
    "that also use the awslogs log driver to send log information to CloudWatch Logs require "
    "that you create the com.amazonaws.region.logs interface VPC endpoint for CloudWatch Logs.",
)
ENDPOINT_ADMITS_443 = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html",
    "The security group attached to the VPC endpoint must allow incoming connections on port 443 "
    "from the private subnet of the VPC.",
)
LAYER_BUCKET = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html",
    "arn:aws:s3:::prod-region-starport-layer-bucket/*",
)
SECRETS_ENDPOINT = Page(
    "https://docs.aws.amazon.com/batch/latest/userguide/specifying-sensitive-data-secrets.html",
    "if you're also using interface VPC endpoints, you must create the interface VPC endpoints "
    "for Secrets Manager",
)
DEFAULT_ENDPOINT_POLICY = Model(
    "ec2",
    "CreateVpcEndpointRequest",
    "PolicyDocument",
    "If this parameter is not specified, we attach a default policy that allows full access to "
    "the service.",
)
# --- roles --------------------------------------------------------------------------------------
FARGATE_EXECUTION_ROLE = Model(
    "batch",
    "ContainerProperties",
    "executionRoleArn",
    "For jobs that run on Fargate resources, you must provide an execution role.",
)
PTC_IMPORT = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache-iam.html",
    "Grants permission to retrieve the external image and import it to your private registry.",
)
PTC_CREATE_REPOSITORY = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache-iam.html",
    "This permission is required if the repository storing the cached images doesn't already "
    "exist.",
)
MOUNT_NEEDS_DOWNLOAD = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/blob-mounting.html",
    "Users need ecr:GetDownloadUrlForLayer IAM permission on a repository to mount layers from it.",
)
# --- secrets ------------------------------------------------------------------------------------
SECRETS_JSON_KEY = Page(
    "https://docs.aws.amazon.com/batch/latest/userguide/specifying-sensitive-data-secrets.html",
    "When you inject a secret as an environment variable, you can specify a JSON key or version "
    "of a secret to inject.",
)
SECRETS_EXECUTION_ROLE = Page(
    "https://docs.aws.amazon.com/batch/latest/userguide/private-auth-iam.html",
    "To provide access to the secrets that you create, add the following permissions as an "
    "inline policy to the execution role.",
)
SECRETS_FARGATE_PLATFORM = Page(
    "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/secrets-envvar-secrets-manager.html",
    "To inject the full content of a secret as an environment variable or in a log "
    "configuration, you must use platform version 1.3.0 or later.",
)
SECRETS_ENDPOINT = Page(
    "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/platform-version-migration.html",
    "When your task definition references Secrets Manager secrets to retrieve sensitive data for "
    "your containers, you must create the interface VPC endpoints for Secrets Manager.",
)
# --- encryption and blob mounting --------------------------------------------------------------
MOUNT_SAME_ENCRYPTION = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/blob-mounting.html",
    "Repositories must use identical encryption type and keys.",
)
MOUNT_SAME_REGISTRY = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/blob-mounting.html",
    "Blob mounting only works within the same registry (same account and region).",
)
MOUNT_NOT_FROM_CACHE = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/blob-mounting.html",
    "Blob mounting is not supported for images created via pull through cache.",
)
AES256 = Model(
    "ecr",
    "EncryptionConfiguration",
    "encryptionType",
    "If you use the AES256 encryption type, Amazon ECR uses server-side encryption with Amazon "
    "S3-managed encryption keys which encrypts the images in the repository using an AES256 "
    "encryption algorithm.",
)
KMS_DEFAULT_KEY = Model(
    "ecr",
    "EncryptionConfiguration",
    "kmsKey",
    "If no key is specified, the default Amazon Web Services managed KMS key for Amazon ECR will "
    "be used.",
)
KMS_MANAGED_KEY_NEEDS_NOTHING = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/encryption-at-rest.html",
    "any principal that has permission to create a repository can also enable AWS KMS "
    "encryption on the repository",
)
KMS_GRANT = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/encryption-at-rest.html",
    "with the Amazon ECR repository as the grantee principal",
)
# --- pull-through cache -------------------------------------------------------------------------
UPSTREAM_URL = Model(
    "ecr",
    "CreatePullThroughCacheRuleRequest",
    "upstreamRegistryUrl",
    "The following is the syntax to use for each supported upstream registry.",
)
PREFIX_SLASH = Model(
    "ecr",
    "CreatePullThroughCacheRuleRequest",
    "ecrRepositoryPrefix",
    "If you specify ecr-public as the prefix, Amazon ECR treats that as ecr-public/.",
)
CREDENTIAL = Model(
    "ecr",
    "CreatePullThroughCacheRuleRequest",
    "credentialArn",
    "The Amazon Resource Name (ARN) of the Amazon Web Services Secrets Manager secret that "
    "identifies the credentials to authenticate to the upstream registry.",
)
CUSTOM_ROLE = Model(
    "ecr",
    "CreatePullThroughCacheRuleRequest",
    "customRoleArn",
    "Amazon Resource Name (ARN) of the IAM role to be assumed by Amazon ECR to authenticate to "
    "the ECR upstream registry. This role must be in the same account as the registry that you "
    "are configuring.",
)
AUTHENTICATED_UPSTREAMS = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache.html",
    "Docker Hub, Microsoft Azure Container Registry, GitHub Container Registry, GitLab "
    "Container Registry and Chainguard Registry",
)
PTC_ROLE_TRUST = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache-private.html",
    "The following example shows a trust policy that identifies Amazon ECR pull through cache "
    "as the AWS service principal that can assume the role.",
)
PTC_UPSTREAM_GRANT = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache-private.html",
    "The upstream Amazon ECR registry owner must also add a registry policy or a repository "
    "policy to grant the downstream registry owner the required permissions to perform the "
    "following actions.",
)
PTC_FIRST_PULL_NAT = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html",
    "you need to create a public subnet in the same VPC, with a NAT gateway, and then route all "
    "outbound traffic to the internet from their private subnet to the NAT gateway in order for "
    "the pull to work.",
)
DLC_REGIONS = Page(
    "https://github.com/aws/deep-learning-containers/blob/master/docs/reference/"
    "region_availability.md",
    "| US East (N. Virginia) | us-east-1 | 763104351884 |",
)
# --- repository creation templates -------------------------------------------------------------
TEMPLATE_PREFIX = Model(
    "ecr",
    "CreateRepositoryCreationTemplateRequest",
    "prefix",
    "When using a pull through cache rule, the repository prefix you specify during rule "
    "creation is what you should specify as your repository creation template prefix as well.",
)
TEMPLATE_APPLIED_FOR = Model(
    "ecr",
    "CreateRepositoryCreationTemplateRequest",
    "appliedFor",
    "The supported scenarios are PULL_THROUGH_CACHE, REPLICATION, and CREATE_ON_PUSH",
)
TEMPLATE_SERVICE_LINKED_ROLE = Model(
    "ecr",
    "CreateRepositoryCreationTemplateRequest",
    "customRoleArn",
    "When this field isn't specified, Amazon ECR will use the service-linked role for the "
    "repository creation template.",
)
TEMPLATE_ROLE_FOR_KMS = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/repository-creation-templates-create-iam.html",
    "a repository creation template that is using repository tags or KMS in a template",
)
TEMPLATE_LIFECYCLE = Model(
    "ecr",
    "CreateRepositoryCreationTemplateRequest",
    "lifecyclePolicy",
    "The lifecycle policy to use for repositories created using the template.",
)
TEMPLATE_MUTABLE_DEFAULT = CloudFormation(
    "aws_ecr",
    "RepositoryCreationTemplate",
    "image_tag_mutability",
    "If this parameter is omitted, the default setting of MUTABLE will be used which will allow "
    "image tags to be overwritten.",
)
CACHED_TAGS_MOVE = Page(
    "https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache.html",
    "If you manually enable tag immutability on the repository, Amazon ECR may not be able to "
    "update the cached images.",
)
# --- the copier image ---------------------------------------------------------------------------
COMMAND_IS_CMD = Model(
    "batch",
    "ContainerProperties",
    "command",
    "This parameter maps to Cmd in the Create a container section of the Docker Remote API and "
    "the COMMAND parameter to docker run.",
)

PULL = {"ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"}
PUSH = {"ecr:InitiateLayerUpload", "ecr:UploadLayerPart", "ecr:CompleteLayerUpload", "ecr:PutImage"}
PULL_THROUGH = {"ecr:BatchImportUpstreamImage", "ecr:CreateRepository"}
# Instance settings a Fargate compute environment cannot take (fargate-compute-environments.html).
NOT_FOR_FARGATE = (
    "AllocationStrategy",
    "BidPercentage",
    "DesiredvCpus",
    "ImageId",
    "InstanceTypes",
    "Ec2Configuration",
    "Ec2KeyPair",
    "InstanceRole",
    "LaunchTemplate",
    "MinvCpus",
    "PlacementGroup",
    "SpotIamFleetRole",
    "Tags",
)


# --- helpers ------------------------------------------------------------------------------------


def _output(d: Deployment, key: OutputKey):
    return d.templates[d.config.stack_name].get("Outputs", {}).get(key.value, {}).get("Value")


def _output_target(d: Deployment, key: OutputKey) -> Resource | None:
    return d.ref_target(d.config.stack_name, _output(d, key))


def _statements(d: Deployment, role: Resource) -> list[dict]:
    found = []
    for policy in d.of_type("AWS::IAM::Policy"):
        if policy.stack == role.stack and {"Ref": role.logical_id} in policy.props.get("Roles", []):
            document = policy.props["PolicyDocument"]
            found += _as_list(document.get("Statement", []))
    for inline in role.props.get("Policies", []):
        found += _as_list(inline["PolicyDocument"].get("Statement", []))
    return found


def _rules(d: Deployment) -> dict[str, Resource]:
    return {
        r.props.get("EcrRepositoryPrefix"): r for r in d.of_type("AWS::ECR::PullThroughCacheRule")
    }


def _prefix_arn(d: Deployment, prefix: str) -> str:
    return f"arn:aws:ecr:{d.config.region}:{d.config.account}:repository/{prefix}/*"


# --- rules ----------------------------------------------------------------------------------------


@rule(
    FARGATE_GROUPS,
    FARGATE_SUBNETS,
    FARGATE_NO_MINVCPUS,
    FARGATE_CE_PAGE,
    MAXVCPUS,
    SERVICE_LINKED_ROLE,
    covers=(
        "AWS::Batch::ComputeEnvironment.Type",
        "AWS::Batch::ComputeEnvironment.State",
        "AWS::Batch::ComputeEnvironment.ComputeResources.Type",
        "AWS::Batch::ComputeEnvironment.ComputeResources.MaxvCpus",
        "AWS::Batch::ComputeEnvironment.ComputeResources.Subnets",
        "AWS::Batch::ComputeEnvironment.ComputeResources.SecurityGroupIds",
    ),
)
def copy_compute_environment_is_a_fargate_pool_in_the_cluster_subnet(d: Deployment) -> list[str]:
    """A MANAGED Fargate compute environment in the cluster's subnet, in the copy group, with
    copy_max_vcpus of capacity and no instance settings.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_ComputeResource.html:
    securityGroupIds "This parameter is required for jobs that are running on Fargate resources
    and must contain at least one security group. Fargate doesn't support launch templates.";
    subnets "This parameter is required for compute environments using EC2, SPOT, FARGATE, or
    FARGATE_SPOT compute resources."; minvCpus (and the other instance settings) "This
    parameter isn't applicable to jobs that are running on Fargate resources. Don't specify
    it."; maxvCpus is "The maximum number of vCPUs that a compute environment can support" (a
    copy job takes one). The Batch user guide lists the instance settings
    (https://docs.aws.amazon.com/batch/latest/userguide/fargate-compute-environments.html):
    "These aren't applicable for Fargate compute environments and can't be provided." Without
    a serviceRole, "that role is used by default" (the service-linked role,
    https://docs.aws.amazon.com/batch/latest/APIReference/API_CreateComputeEnvironment.html).
    """
    ce = d.copy_compute_environment
    props, resources = ce.props, ce.props["ComputeResources"]
    problems = []
    if (props.get("Type"), props.get("State"), resources.get("Type")) != (
        "MANAGED",
        "ENABLED",
        "FARGATE",
    ):
        problems.append("not a MANAGED, ENABLED Fargate compute environment")
    if "ServiceRole" in props:
        problems.append("a service role instead of Batch's service-linked role")
    problems += [f"{key} is not for Fargate" for key in NOT_FOR_FARGATE if key in resources]
    if resources.get("MaxvCpus") != d.config.copy_max_vcpus or d.config.copy_max_vcpus < 1:
        problems.append(f"MaxvCpus {resources.get('MaxvCpus')} != copy_max_vcpus")
    cluster = d.compute_environment
    subnets = [_text(d, s) for s in resources.get("Subnets", [])]
    cluster_subnets = [_text(d, s) for s in cluster.props["ComputeResources"]["Subnets"]]
    if len(subnets) != 1 or subnets != cluster_subnets:
        problems.append(f"subnets {subnets}; expected the cluster's {cluster_subnets}")
    groups = d.copy_groups
    if not groups:
        problems.append("no security group: Fargate requires one")
    elif groups & (d.host_groups | d.task_groups | frozenset().union(*d.efa_groups)):
        problems.append("copy jobs share a group with the nodes or the training tasks")
    return problems


@rule(
    QUEUE_NO_MIX,
    QUEUE_STATE,
    covers=(
        "AWS::Batch::JobQueue.State",
        "AWS::Batch::JobQueue.Priority",
        "AWS::Batch::JobQueue.ComputeEnvironmentOrder",
    ),
)
def copy_queue_feeds_the_fargate_pool_only(d: Deployment) -> list[str]:
    """The copy queue is enabled and feeds the Fargate pool alone; the training queue never
    reaches it.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_CreateJobQueue.html
    (computeEnvironmentOrder): "All of the compute environments must be either EC2 (EC2 or
    SPOT) or Fargate (FARGATE or FARGATE_SPOT); EC2 and Fargate compute environments can't be
    mixed." https://docs.aws.amazon.com/batch/latest/APIReference/API_JobQueueDetail.html:
    "If the job queue state is ENABLED, it can accept jobs."
    """
    problems = []
    copy, jobs = d.copy_job_queue, d.job_queue
    if copy.props.get("State") != "ENABLED":
        problems.append("copy queue not ENABLED")

    def order(queue: Resource) -> list[str | None]:
        targets = [
            d.ref_target(queue.stack, o["ComputeEnvironment"])
            for o in queue.props.get("ComputeEnvironmentOrder", [])
        ]
        return [t.logical_id if t else None for t in targets]

    if order(copy) != [d.copy_compute_environment.logical_id]:
        problems.append("the copy queue does not feed exactly the Fargate compute environment")
    if d.copy_compute_environment.logical_id in order(jobs):
        problems.append("the training queue mixes the Fargate pool with EC2")
    return problems


@rule(
    PRIVATE_SUBNET_NAT,
    FARGATE_TASK_ENI,
    ECR_ENDPOINTS_FARGATE,
    LOGS_ENDPOINT_FARGATE,
    ENDPOINT_ADMITS_443,
    LAYER_BUCKET,
    DEFAULT_ENDPOINT_POLICY,
    SECRETS_ENDPOINT,
    covers=(
        "AWS::EC2::SecurityGroup.SecurityGroupEgress",
        "AWS::EC2::SecurityGroupIngress",
        "AWS::EC2::VPCEndpoint",
    ),
)
def copy_tasks_reach_the_image_the_layers_and_the_logs(d: Deployment) -> list[str]:
    """A copy task in the private subnet (assignPublicIp DISABLED) pulls the copier image,
    reads layers and ships logs through the VPC's endpoints, or its NAT gateway; it sends
    HTTPS and nothing else.

    https://docs.aws.amazon.com/batch/latest/APIReference/API_NetworkConfiguration.html: "For a
    job that's running on Fargate resources in a private subnet to send outbound traffic to the
    internet (for example, to pull container images), the private subnet requires a NAT gateway
    be attached to route requests to the internet." Without NAT, the endpoints carry it: since
    platform version 1.4.0 "all Amazon ECS on Fargate tasks receive a single elastic network
    interface (referred to as the task ENI) and all network traffic flows through that ENI
    within your VPC" (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/
    platform-version-migration.html), so image pulls and logs leave in the task's group, and
    https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html: such tasks
    "require both the com.amazonaws.region.ecr.dkr and com.amazonaws.region.ecr.api Amazon ECR
    VPC endpoints" and the S3 gateway, whose layer bucket is
    "arn:aws:s3:::prod-region-starport-layer-bucket/*"; with awslogs they "require that you
    create the com.amazonaws.region.logs interface VPC endpoint for CloudWatch Logs"; "The
    security group attached to the VPC endpoint must allow incoming connections on port 443
    from the private subnet of the VPC". The S3 gateway carries no policy, so "we attach a
    default policy that allows full access to the service"
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateVpcEndpoint.html):
    another account's layers (Deep Learning Containers) pass too. With registry secrets, ECS
    reads them before the job starts, and "if you're also using interface VPC endpoints, you
    must create the interface VPC endpoints for Secrets Manager"
    (https://docs.aws.amazon.com/batch/latest/userguide/specifying-sensitive-data-secrets.html).
    An imported VPC brings its own endpoints or NAT; only the group's own rule is checked there.
    """
    problems = []
    groups = d.copy_groups
    out = [r for g in groups for r in d.network.groups[g].rules if r.direction == "out"]
    https_anywhere = [
        r for r in out if r.protocol == "tcp" and (r.from_port, r.to_port) == (443, 443)
    ]
    if not any(r.cidr == "0.0.0.0/0" for r in https_anywhere):
        problems.append("no HTTPS egress to 0.0.0.0/0 (S3 through the gateway, NAT)")
    if [r for r in out if r not in https_anywhere]:
        problems.append("copy jobs may send more than HTTPS")
    if [r for g in groups for r in d.network.groups[g].rules if r.direction == "in"]:
        problems.append("something may connect to copy jobs")
    if d.config.imports_vpc:
        return problems
    endpoints = d.interface_endpoints
    needed = ["ecr.api", "ecr.dkr", "logs"]
    if d.config.registry_secrets:
        needed.append("secretsmanager")
    for service in needed:
        if service not in endpoints:
            problems.append(f"no {service} endpoint")
            continue
        problems += d.network.admits(
            groups, endpoints[service], Flow(f"copy job to {service}", "tcp", 443)
        )
    for ep in d.of_type("AWS::EC2::VPCEndpoint"):
        if ep.props.get("VpcEndpointType") != "Gateway" or ".s3" not in json.dumps(
            ep.props["ServiceName"]
        ):
            continue
        policy = ep.props.get("PolicyDocument")
        layers = f"arn:aws:s3:::prod-{d.config.region}-starport-layer-bucket/"
        if (
            policy is not None
            and layers not in json.dumps(policy)
            and '"*"' not in json.dumps(policy)
        ):
            problems.append(f"{ep.path}: its policy keeps ECR's layer bucket out")
    return problems


@rule(
    FARGATE_EXECUTION_ROLE,
    CONFUSED_DEPUTY,
    PTC_IMPORT,
    PTC_CREATE_REPOSITORY,
    MOUNT_NEEDS_DOWNLOAD,
    KMS_MANAGED_KEY_NEEDS_NOTHING,
    covers=("AWS::IAM::Role.AssumeRolePolicyDocument", "AWS::IAM::Policy.PolicyDocument"),
)
def copy_job_role_pushes_only_to_the_workspace_repository(d: Deployment) -> list[str]:
    """The copy job role reads ECR images of the region, pushes to the workspace repository
    alone, and imports through the configured pull-through prefixes alone; ECS tasks of this
    account and region may assume it.

    https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache-iam.html:
    ecr:BatchImportUpstreamImage "Grants permission to retrieve the external image and import
    it to your private registry", ecr:CreateRepository "is required if the repository storing
    the cached images doesn't already exist"; both are granted on repository/PREFIX/* only.
    Mounting needs the source's download permission: "Users need ecr:GetDownloadUrlForLayer IAM
    permission on a repository to mount layers from it"
    (https://docs.aws.amazon.com/AmazonECR/latest/userguide/blob-mounting.html). With the AWS
    managed key aws/ecr, "any principal that has permission to create a repository can also
    enable AWS KMS encryption on the repository"
    (https://docs.aws.amazon.com/AmazonECR/latest/userguide/encryption-at-rest.html): no KMS
    action is needed for kms either. Trust: "It is recommended that you use the
    aws:SourceAccount or aws:SourceArn condition keys to scope the permissions further to
    prevent the confused deputy security issue"
    (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-iam-roles.html); the
    execution role is required on Fargate ("For jobs that run on Fargate resources, you must
    provide an execution role",
    https://docs.aws.amazon.com/batch/latest/APIReference/API_ContainerProperties.html).
    """
    role = _output_target(d, OutputKey.COPY_JOB_ROLE_ARN)
    problems = ecs_trust_problems(d, role, "copy job role", task_role=True)
    if problems:
        return problems
    workspace = d.one("AWS::ECR::Repository")
    any_account = f"arn:aws:ecr:{d.config.region}:*:repository/*"
    prefixes = {_prefix_arn(d, r.prefix) for r in d.config.pull_through_rules}
    known = PULL | PUSH | PULL_THROUGH | {"ecr:GetAuthorizationToken"}
    for st in _statements(d, role):
        if st.get("Effect") != "Allow":
            continue
        actions = set(_as_list(st["Action"]))
        targets = [d.ref_target(role.stack, r) for r in _as_list(st["Resource"])]
        texts = {_text(d, r) for r in _as_list(st["Resource"])}
        if actions - known:
            problems.append(f"copy job role: unexpected actions {sorted(actions - known)}")
        if "*" in texts and actions != {"ecr:GetAuthorizationToken"}:
            problems.append(f"copy job role: {sorted(actions)} on *")
        if actions & PUSH and (
            not targets or any(t is None or t.logical_id != workspace.logical_id for t in targets)
        ):
            problems.append(f"copy job role pushes beyond the workspace repository: {texts}")
        if actions & PULL_THROUGH and not texts <= prefixes:
            problems.append(f"copy job role imports beyond the pull-through prefixes: {texts}")
        to_workspace = all(t is not None and t.logical_id == workspace.logical_id for t in targets)
        if actions & PULL and not (texts <= {any_account} or to_workspace):
            problems.append(f"copy job role reads outside this region's ECR: {texts}")
    granted = {
        (a, _text(d, r))
        for st in _statements(d, role)
        for a in _as_list(st["Action"])
        for r in _as_list(st["Resource"])
    }
    if not any(a == "ecr:PutImage" for a, _ in granted):
        problems.append("copy job role cannot push the workspace repository")
    if ("ecr:GetDownloadUrlForLayer", any_account) not in granted:
        problems.append("copy job role cannot read (or mount from) other repositories")
    for prefix in prefixes:
        for action in PULL_THROUGH:
            if (action, prefix) not in granted:
                problems.append(f"copy job role lacks {action} on {prefix}")
    return problems


@rule(
    FARGATE_EXECUTION_ROLE,
    SECRETS_JSON_KEY,
    SECRETS_EXECUTION_ROLE,
    SECRETS_FARGATE_PLATFORM,
    SECRETS_ENDPOINT,
    PRIVATE_SUBNET_NAT,
    EXECUTION_ROLE_TRUST,
    covers=("AWS::IAM::Policy.Roles",),
)
def copy_execution_role_reads_the_image_and_the_configured_secrets_only(
    d: Deployment,
) -> list[str]:
    """ECS pulls the copier image, ships logs to the job log group and reads the registry
    secrets named in registry_secrets, and nothing else, with the copy execution role.

    Copy jobs take registry credentials from Secrets Manager as JSON keys ("When you inject a
    secret as an environment variable, you can specify a JSON key or version of a secret to
    inject", https://docs.aws.amazon.com/batch/latest/userguide/
    specifying-sensitive-data-secrets.html); ECS reads them with the execution role: "To
    provide access to the secrets that you create, add the following permissions as an inline
    policy to the execution role" (secretsmanager:GetSecretValue,
    https://docs.aws.amazon.com/batch/latest/userguide/private-auth-iam.html). On Fargate, "To
    inject the full content of a secret as an environment variable or in a log configuration,
    you must use platform version 1.3.0 or later" (JSON keys: 1.4.0;
    https://docs.aws.amazon.com/AmazonECS/latest/developerguide/secrets-envvar-secrets-manager.html);
    copy jobs ask for LATEST. Secrets Manager is reached through NAT (registry_secrets needs a
    route out anyway: "the private subnet requires a NAT gateway",
    https://docs.aws.amazon.com/batch/latest/APIReference/API_NetworkConfiguration.html) or,
    in an imported VPC without NAT, through its endpoint: "you must create the interface VPC
    endpoints for Secrets Manager" (https://docs.aws.amazon.com/AmazonECS/latest/
    developerguide/platform-version-migration.html). Execution is required on Fargate: "For
    jobs that run on Fargate resources, you must provide an execution role"
    (https://docs.aws.amazon.com/batch/latest/APIReference/API_ContainerProperties.html). "The
    task execution role grants the Amazon ECS container and Fargate agents permission to make
    AWS API calls on your behalf" (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/
    task_execution_IAM_role.html): the trust policy that page and Batch's own give has no
    condition, and neither documents that ECS sends aws:SourceArn when it assumes one, so a
    condition there could stop every copy job before it starts (the confused-deputy
    conditions are the task role's, above).
    """
    role = _output_target(d, OutputKey.COPY_EXECUTION_ROLE_ARN)
    problems = ecs_trust_problems(d, role, "copy execution role", task_role=False)
    if problems:
        return problems
    secrets = sorted(d.config.registry_secrets.values())
    if secrets and d.config.internet_egress == "none":
        problems.append("registry secrets without a route to the registries (no NAT)")
    granted_secrets: list[str] = []
    image_pull = log_write = False
    for st in _statements(d, role):
        actions = set(_as_list(st["Action"]))
        texts = [_text(d, r) for r in _as_list(st["Resource"])]
        if actions == {"secretsmanager:GetSecretValue"}:
            granted_secrets += texts
        elif actions == {"ecr:GetAuthorizationToken"} and texts == ["*"]:
            pass
        elif actions == PULL and all("container-assets" in t for t in texts):
            image_pull = True
        elif actions == {"logs:CreateLogStream", "logs:PutLogEvents"}:
            target = d.ref_target(role.stack, _as_list(st["Resource"])[0])
            log_write = target is not None and target.type == "AWS::Logs::LogGroup"
        else:
            problems.append(f"copy execution role: unexpected grant {sorted(actions)} on {texts}")
    if sorted(granted_secrets) != secrets:
        problems.append(f"copy execution role reads secrets {granted_secrets}; expected {secrets}")
    if not image_pull:
        problems.append("copy execution role cannot pull the copier image")
    if not log_write:
        problems.append("copy execution role cannot write the job log group")
    return problems


@rule(
    MOUNT_SAME_ENCRYPTION,
    MOUNT_SAME_REGISTRY,
    AES256,
    KMS_DEFAULT_KEY,
    KMS_GRANT,
    covers=("AWS::ECR::Repository.EncryptionConfiguration",),
)
def workspace_repository_encryption_lets_bases_mount(d: Deployment) -> list[str]:
    """The workspace repository uses ECR's default AES256, like ordinary repositories, so bases
    in other repositories of the registry mount; or KMS with the AWS managed key when asked.

    https://docs.aws.amazon.com/AmazonECR/latest/userguide/blob-mounting.html: "Blob mounting
    only works within the same registry (same account and region)" and "Repositories must use
    identical encryption type and keys." With AES256 "Amazon ECR uses server-side encryption
    with Amazon S3-managed encryption keys" (ECR's default;
    https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_EncryptionConfiguration.html);
    with KMS and no key, "the default Amazon Web Services managed KMS key for Amazon ECR will be
    used", for which ECR holds a grant "with the Amazon ECR repository as the grantee
    principal" (https://docs.aws.amazon.com/AmazonECR/latest/userguide/encryption-at-rest.html),
    so pushing and pulling need no KMS permission.
    """
    repo = d.one("AWS::ECR::Repository")
    encryption = repo.props.get("EncryptionConfiguration", {})
    kind = encryption.get("EncryptionType", "AES256")
    wanted = "KMS" if d.config.repository_encryption == "kms" else "AES256"
    problems = []
    if kind != wanted:
        problems.append(f"repository encryption {kind}; repository_encryption asks for {wanted}")
    if "KmsKey" in encryption:
        problems.append("a customer key: only repositories on that same key could be mounted")
    return problems


@rule(
    UPSTREAM_URL,
    PREFIX_SLASH,
    CREDENTIAL,
    CUSTOM_ROLE,
    AUTHENTICATED_UPSTREAMS,
    PTC_ROLE_TRUST,
    PTC_UPSTREAM_GRANT,
    MOUNT_NOT_FROM_CACHE,
    DLC_REGIONS,
    covers=("AWS::ECR::PullThroughCacheRule",),
)
def pull_through_cache_rules_match_their_upstreams(d: Deployment) -> list[str]:
    """One rule per configured upstream: its prefix is its name, its URL the syntax ECR
    documents for that upstream, credentials exactly where the upstream needs them, and for an
    ECR upstream a role of ours that pullthroughcache.ecr.amazonaws.com may assume.

    https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_CreatePullThroughCacheRule.html:
    upstreamRegistryUrl: "The following is the syntax to use for each supported upstream
    registry" (public.ecr.aws, quay.io, registry.k8s.io, registry-1.docker.io, ghcr.io,
    registry.gitlab.com, ACCOUNT.dkr.ecr.REGION.amazonaws.com); the prefix: "If you specify
    ecr-public as the prefix, Amazon ECR treats that as ecr-public/."; credentialArn is "The
    Amazon Resource Name (ARN) of the Amazon Web Services Secrets Manager secret that
    identifies the credentials to authenticate to the upstream registry" (its name starts
    ecr-pullthroughcache/, botocore's pattern), needed for "Docker Hub, Microsoft Azure
    Container Registry, GitHub Container Registry, GitLab Container Registry and Chainguard
    Registry" (https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache.html);
    customRoleArn is "the IAM role to be assumed by Amazon ECR to authenticate to the ECR
    upstream registry. This role must be in the same account as the registry that you are
    configuring." Its trust "identifies Amazon ECR pull through cache as the AWS service
    principal that can assume the role", and for another account's registry "The upstream
    Amazon ECR registry owner must also add a registry policy or a repository policy to grant
    the downstream registry owner the required permissions to perform the following actions"
    (https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache-private.html);
    that is why dlc is opt-in. Account 763104351884 serves the DLC images of some regions only
    (https://github.com/aws/deep-learning-containers/blob/master/docs/reference/
    region_availability.md: "| US East (N. Virginia) | us-east-1 | 763104351884 |" and 15
    more). Cached images cannot be a mount source ("Blob mounting is not supported for images
    created via pull through cache", https://docs.aws.amazon.com/AmazonECR/latest/userguide/
    blob-mounting.html): copy jobs copy them.
    """
    problems = []
    expected = {r.prefix: r for r in d.config.pull_through_rules}
    found = _rules(d)
    if set(found) != set(expected):
        problems.append(f"rules for {sorted(found)}; configured {sorted(expected)}")
    for prefix, res in found.items():
        props = res.props
        want = expected.get(prefix)
        if not pull_through.prefix_pattern().match(prefix or ""):
            problems.append(f"{prefix}: not a prefix ECR accepts")
        if props.get("UpstreamRegistry") not in pull_through.upstream_registries():
            problems.append(f"{prefix}: unknown upstream registry {props.get('UpstreamRegistry')}")
        if want is None:
            continue
        upstream = want.upstream
        if props.get("UpstreamRegistry") != upstream.upstream_registry:
            problems.append(f"{prefix}: upstream {props.get('UpstreamRegistry')}")
        if props.get("UpstreamRegistryUrl") != upstream.url_in(d.config.region):
            problems.append(f"{prefix}: URL {props.get('UpstreamRegistryUrl')}")
        credential = props.get("CredentialArn")
        if upstream.credential != bool(credential):
            problems.append(f"{prefix}: credentials given where none are needed, or missing")
        if credential and not pull_through.credential_pattern().match(credential):
            problems.append(f"{prefix}: {credential} is not an ecr-pullthroughcache/ secret")
        role = d.ref_target(res.stack, props.get("CustomRoleArn"))
        if upstream.custom_role:
            if d.config.region not in pull_through.DLC_REGIONS:
                problems.append(f"{prefix}: {pull_through.DLC_ACCOUNT} serves no {d.config.region}")
            if role is None or not _trusts(role, "pullthroughcache.ecr.amazonaws.com"):
                problems.append(f"{prefix}: no role of ours that ECR pull-through cache assumes")
            else:
                upstream_arn = f":{pull_through.DLC_ACCOUNT}:repository/*"
                reads = [
                    st
                    for st in _statements(d, role)
                    if "ecr:BatchImportUpstreamImage" in _as_list(st["Action"])
                    and any(upstream_arn in _text(d, r) for r in _as_list(st["Resource"]))
                ]
                if not reads:
                    problems.append(f"{prefix}: the role may not import from the upstream")
        elif "CustomRoleArn" in props:
            problems.append(f"{prefix}: a custom role for a non-ECR upstream")
    return problems


@rule(
    TEMPLATE_PREFIX,
    TEMPLATE_APPLIED_FOR,
    TEMPLATE_SERVICE_LINKED_ROLE,
    TEMPLATE_ROLE_FOR_KMS,
    TEMPLATE_LIFECYCLE,
    TEMPLATE_MUTABLE_DEFAULT,
    CACHED_TAGS_MOVE,
    covers=("AWS::ECR::RepositoryCreationTemplate",),
)
def repository_creation_templates_cover_the_pull_through_prefixes(d: Deployment) -> list[str]:
    """Each pull-through prefix has a template (pull-through cache only) that encrypts like the
    workspace repository, keeps tags mutable and expires old images; a KMS template names a
    role ECR may assume.

    https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_CreateRepositoryCreationTemplate.html:
    "When using a pull through cache rule, the repository prefix you specify during rule
    creation is what you should specify as your repository creation template prefix as well";
    appliedFor: "The supported scenarios are PULL_THROUGH_CACHE, REPLICATION, and
    CREATE_ON_PUSH"; lifecyclePolicy is "The lifecycle policy to use for repositories created
    using the template"; without customRoleArn "Amazon ECR will use the service-linked role for
    the repository creation template", which serves templates without KMS or tags only: the
    role is needed for "a repository creation template that is using repository tags or KMS in
    a template" (https://docs.aws.amazon.com/AmazonECR/latest/userguide/
    repository-creation-templates-create-iam.html). Tags stay mutable ("If this parameter is
    omitted, the default setting of MUTABLE will be used which will allow image tags to be
    overwritten", https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/
    aws-resource-ecr-repositorycreationtemplate.html): ECR moves a cached tag when upstream
    does, and "If you manually enable tag immutability on the repository, Amazon ECR may not
    be able to update the cached images" (https://docs.aws.amazon.com/AmazonECR/latest/
    userguide/pull-through-cache.html). Templates carry no scanning setting: scan on push for
    cached repositories is the registry's scanning configuration, an account-wide setting the
    stack leaves alone.
    """
    problems = []
    templates = {
        t.props.get("Prefix"): t for t in d.of_type("AWS::ECR::RepositoryCreationTemplate")
    }
    prefixes = {r.prefix for r in d.config.pull_through_rules}
    if set(templates) != prefixes:
        problems.append(
            f"templates for {sorted(templates)}; pull-through prefixes {sorted(prefixes)}"
        )
    repo = d.one("AWS::ECR::Repository")
    kind = repo.props.get("EncryptionConfiguration", {}).get("EncryptionType", "AES256")
    for prefix, template in templates.items():
        props = template.props
        if props.get("AppliedFor") != ["PULL_THROUGH_CACHE"]:
            problems.append(f"{prefix}: applied for {props.get('AppliedFor')}")
        if props.get("ImageTagMutability", "MUTABLE") != "MUTABLE":
            problems.append(f"{prefix}: immutable tags stop ECR updating cached images")
        encryption = props.get("EncryptionConfiguration", {}).get("EncryptionType", "AES256")
        if encryption != kind:
            problems.append(f"{prefix}: encrypted {encryption}, the workspace repository {kind}")
        rules = json.loads(props.get("LifecyclePolicy") or "{}").get("rules")
        if not rules:
            problems.append(f"{prefix}: no lifecycle rule: cached images pile up")
        needs_role = encryption != "AES256" or bool(props.get("ResourceTags"))
        role = d.ref_target(template.stack, props.get("CustomRoleArn"))
        if needs_role and (role is None or not _trusts(role, "ecr.amazonaws.com")):
            problems.append(f"{prefix}: KMS or tags without a role ECR may assume")
        if role is not None:
            actions = {a for st in _statements(d, role) for a in _as_list(st["Action"])}
            wanted = {"ecr:CreateRepository"}
            if encryption != "AES256":
                wanted |= {"kms:CreateGrant", "kms:RetireGrant", "kms:DescribeKey"}
            if not wanted <= actions:
                problems.append(f"{prefix}: the template role lacks {sorted(wanted - actions)}")
    return problems


@rule(
    PTC_FIRST_PULL_NAT,
    PRIVATE_SUBNET_NAT,
    covers=(),
)
def copy_outputs_tell_the_launcher_what_the_cluster_reaches(d: Deployment) -> list[str]:
    """The outputs name the copy queue and roles, the rules (PREFIX=UPSTREAM), the registry
    secrets and how tasks get out: the launcher decides from them where a copy job can read.

    Without NAT a Fargate task reaches nothing outside AWS ("the private subnet requires a NAT
    gateway be attached to route requests to the internet",
    https://docs.aws.amazon.com/batch/latest/APIReference/API_NetworkConfiguration.html), and
    a pull-through cache rule serves a first pull through the ECR endpoints only if the VPC
    also routes to the internet: "you need to create a public subnet in the same VPC, with a
    NAT gateway, and then route all outbound traffic to the internet from their private subnet
    to the NAT gateway in order for the pull to work" (subsequent pulls of a cached image do
    not need it; https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html).
    So InternetEgress must say the truth: nat, imported (unknown) or none.
    """
    problems = []
    config = d.config
    if _output(d, OutputKey.INTERNET_EGRESS) != config.internet_egress:
        problems.append(f"InternetEgress {_output(d, OutputKey.INTERNET_EGRESS)}")
    pairs = {r.prefix: r.upstream.url_in(config.region) for r in config.pull_through_rules}
    if _output(d, OutputKey.PULL_THROUGH_CACHE) != format_pairs(pairs):
        problems.append(f"PullThroughCache {_output(d, OutputKey.PULL_THROUGH_CACHE)}")
    if _output(d, OutputKey.REGISTRY_SECRETS) != format_pairs(dict(config.registry_secrets)):
        problems.append(f"RegistrySecrets {_output(d, OutputKey.REGISTRY_SECRETS)}")
    queue = _output_target(d, OutputKey.COPY_QUEUE_ARN)
    if queue is None or queue.logical_id != d.copy_job_queue.logical_id:
        problems.append("CopyQueueArn is not the copy queue")
    for key in (OutputKey.COPY_JOB_ROLE_ARN, OutputKey.COPY_EXECUTION_ROLE_ARN):
        target = _output_target(d, key)
        if target is None or target.type != "AWS::IAM::Role":
            problems.append(f"{key.value} is not a role of the stack")
    return problems


@rule(COMMAND_IS_CMD, covers=())
def copy_jobs_run_the_stack_copier_image(d: Deployment) -> list[str]:
    """CopyImage is the stack's copier asset, built from a Dockerfile with a CMD, no
    ENTRYPOINT and a non-root user.

    A Batch job's command "maps to Cmd in the Create a container section of the Docker Remote
    API and the COMMAND parameter to docker run"
    (https://docs.aws.amazon.com/batch/latest/APIReference/API_ContainerProperties.html), and
    container properties have no entry point: an ENTRYPOINT in the image would run in front of
    every copy job's command and could not be replaced.
    """
    problems = []
    image = _text(d, _output(d, OutputKey.COPY_IMAGE))
    registry = f"{d.config.account}.dkr.ecr.{d.config.region}.amazonaws.com/"
    if not image.startswith(registry) or "container-assets" not in image:
        problems.append(f"CopyImage {image} is not the stack's image asset")
    dockerfile = (ROOT / "infra" / "copier" / "Dockerfile").read_text()
    instructions = [
        line.split(None, 1)
        for line in dockerfile.splitlines()
        if line.strip() and not line.lstrip().startswith("#") and not line.startswith(" ")
    ]
    keywords = [i[0].upper() for i in instructions]
    if "ENTRYPOINT" in keywords:
        problems.append("the copier image has an ENTRYPOINT: Batch commands cannot replace it")
    if "CMD" not in keywords:
        problems.append("the copier image has no CMD")
    users = [i[1].strip() for i in instructions if i[0].upper() == "USER"]
    if not users or users[-1] in ("root", "0"):
        problems.append("the copier runs as root")
    return problems
