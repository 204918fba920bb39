"""The contract between the CDK app and the launcher: the cluster stack's output keys.

The infra package imports these names to declare its outputs; the launcher reads them back.
Nothing else in the repository spells an output key. Bump SCHEMA_VERSION when a key is
renamed or its meaning changes, so an old launcher refuses a new stack (and vice versa).
"""

from __future__ import annotations

from enum import Enum

# 2: the copy queue, image and roles; egress; pull-through cache. 3: the task security group.
SCHEMA_VERSION = "3"
DEFAULT_STACK_NAME = "EfaBatch"


class OutputKey(str, Enum):
    SCHEMA_VERSION = "SchemaVersion"
    REGION = "Region"
    JOB_QUEUE_NAME = "JobQueueName"
    JOB_QUEUE_ARN = "JobQueueArn"
    REPOSITORY_URI = "RepositoryUri"
    FILE_SYSTEM_ID = "FileSystemId"
    ACCESS_POINT_ID = "AccessPointId"
    JOB_ROLE_ARN = "JobRoleArn"
    EXECUTION_ROLE_ARN = "ExecutionRoleArn"
    LOG_GROUP_NAME = "LogGroupName"
    INSTANCE_TYPE = "InstanceType"
    MAX_NODES = "MaxNodes"
    EFA_INTERFACES = "EfaInterfacesPerNode"
    GPUS_PER_NODE = "GpusPerNode"
    VCPUS_PER_NODE = "VcpusPerNode"
    MEMORY_MIB_PER_NODE = "MemoryMiBPerNode"
    # "none" when the queue has no fair-share scheduling policy.
    SCHEDULING_POLICY_ARN = "SchedulingPolicyArn"
    # Copying base images inside AWS (launcher.image.copy): a Fargate queue, the copier's image
    # and the roles its jobs run with.
    COPY_QUEUE_ARN = "CopyQueueArn"
    COPY_IMAGE = "CopyImage"
    COPY_JOB_ROLE_ARN = "CopyJobRoleArn"
    COPY_EXECUTION_ROLE_ARN = "CopyExecutionRoleArn"
    # How tasks reach registries outside AWS: "nat", "none" (VPC endpoints only) or
    # "imported" (an imported VPC: the stack cannot tell).
    INTERNET_EGRESS = "InternetEgress"
    # ECR pull-through cache rules, "PREFIX=UPSTREAM_HOST,..." or "none".
    PULL_THROUGH_CACHE = "PullThroughCache"
    # Secrets Manager secrets the copy job may read registry credentials from,
    # "HOST=SECRET_ARN,..." or "none".
    REGISTRY_SECRETS = "RegistrySecrets"
    # The security group of the jobs' own (awsvpc) interfaces: the VPC's default group.
    TASK_SECURITY_GROUP_ID = "TaskSecurityGroupId"

    def describe(self) -> str:
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    OutputKey.SCHEMA_VERSION: "Version of this output contract (launcher.outputs.SCHEMA_VERSION)",
    OutputKey.REGION: "Region of the cluster",
    OutputKey.JOB_QUEUE_NAME: "Batch job queue for multi-node jobs",
    OutputKey.JOB_QUEUE_ARN: "ARN of the Batch job queue",
    OutputKey.REPOSITORY_URI: "ECR repository for patched workspace images",
    OutputKey.FILE_SYSTEM_ID: "Shared EFS file system",
    OutputKey.ACCESS_POINT_ID: "EFS access point jobs mount through",
    OutputKey.JOB_ROLE_ARN: "IAM role the job's containers run as",
    OutputKey.EXECUTION_ROLE_ARN: "IAM role ECS uses to pull images and write logs",
    OutputKey.LOG_GROUP_NAME: "CloudWatch log group for job logs",
    OutputKey.INSTANCE_TYPE: "Instance type of every node",
    OutputKey.MAX_NODES: "Most nodes one job can use (compute environment capacity)",
    OutputKey.EFA_INTERFACES: "EFA interfaces per node (0 when EFA is off)",
    OutputKey.GPUS_PER_NODE: "GPUs per node",
    OutputKey.VCPUS_PER_NODE: "vCPUs per node",
    OutputKey.MEMORY_MIB_PER_NODE: "Memory (MiB) a job can request per node",
    OutputKey.SCHEDULING_POLICY_ARN: "Fair-share scheduling policy of the queue, or none",
    OutputKey.COPY_QUEUE_ARN: "Fargate job queue for copying base images inside AWS",
    OutputKey.COPY_IMAGE: "Image of the copy jobs (the launcher's registry copier)",
    OutputKey.COPY_JOB_ROLE_ARN: "IAM role copy jobs run as (pull sources, push the repository)",
    OutputKey.COPY_EXECUTION_ROLE_ARN: "IAM role ECS uses for copy jobs (image, logs, secrets)",
    OutputKey.INTERNET_EGRESS: "How tasks reach registries outside AWS: nat, none or imported",
    OutputKey.PULL_THROUGH_CACHE: "ECR pull-through cache rules (PREFIX=UPSTREAM,...) or none",
    OutputKey.REGISTRY_SECRETS: "Registry credentials for copy jobs (HOST=SECRET_ARN,...) or none",
    OutputKey.TASK_SECURITY_GROUP_ID: "Security group of the jobs' task interfaces (the VPC's "
    "default group)",
}

NONE = "none"  # an empty list or an absent value in an output
EGRESS_VALUES = ("nat", "none", "imported")


def format_pairs(pairs: dict[str, str]) -> str:
    """A mapping as one output value: ``K=V,K=V`` (``none`` when empty)."""
    return ",".join(f"{k}={v}" for k, v in sorted(pairs.items())) or NONE


def parse_pairs(value: str) -> dict[str, str]:
    if value == NONE:
        return {}
    return dict(item.split("=", 1) for item in value.split(",") if "=" in item)


NO_SCHEDULING_POLICY = "none"
