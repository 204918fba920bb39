"""The contract between the CDK app and the launcher: the cluster stack's output keys.

The infra package imports these names to declare its outputs; the launcher reads them back.
Nothing else in the repository spells an output key. Bump SCHEMA_VERSION when a key is
renamed or its meaning changes, so an old launcher refuses a new stack (and vice versa).
"""

from __future__ import annotations

from enum import Enum

SCHEMA_VERSION = "1"
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
}

NO_SCHEDULING_POLICY = "none"
