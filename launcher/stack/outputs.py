"""The contract between the CDK app and the launcher: the cluster stack's outputs.

One declaration per output (``OutputKey``): its key, the ``ClusterInfo`` field it fills, its
description, how its text is parsed and rendered, and an example value. The stack's outputs
(``infra/cluster.py``), ``ClusterInfo.from_stack`` (``launcher/stack/cluster.py``) and the tests'
fixture cluster derive from it: a new output is one member here and its value in the stack.
Bump SCHEMA_VERSION when a key is renamed or its meaning changes, so an old launcher refuses
a new stack (and vice versa).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

from launcher.stack.buckets import BucketError, DataBucket
from launcher.stack.secrets import SecretError, SecretGrant
from launcher.stack.teams import TeamsError, parse_teams, render_teams

# 2: the copy queue, image and roles; egress; pull-through cache. 3: the task security group.
# 4: data buckets, job secrets, FSx for Lustre, privileged containers. 5: compute pools (the
# queue and sizes outputs describe the default pool; Pools describes every pool), fair-share
# identifiers.
SCHEMA_VERSION = "5"
DEFAULT_STACK_NAME = "EfaBatch"
STACK_ENV = "LAUNCHER_STACK"  # the stack a launcher reads unless told another
NONE = "none"  # an output's spelling of an empty list or an absent value


class Egress(str, enum.Enum):
    """How tasks reach registries outside AWS."""

    NAT = "nat"
    NONE = "none"  # VPC endpoints only
    IMPORTED = "imported"  # an imported VPC: the stack cannot tell

    def __str__(self) -> str:
        return self.value


def format_pairs(pairs: dict[str, str]) -> str:
    """A mapping as one output value: ``K=V,K=V`` (``none`` when empty)."""
    return ",".join(f"{k}={v}" for k, v in sorted(pairs.items())) or NONE


def parse_pairs(value: str) -> dict[str, str]:
    if value == NONE:
        return {}
    return dict(item.split("=", 1) for item in value.split(",") if "=" in item)


def _optional(value: str) -> str | None:
    return None if value == NONE else value


def _render_optional(value: str | None) -> str:
    return NONE if value is None else value


def _integer(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError("is not an integer") from None


def _words(items: Any) -> str:
    """Values that never contain a space (bucket locations, secret grants), space-separated."""
    return " ".join(str(i) for i in items) or NONE


def _buckets(value: str) -> tuple[DataBucket, ...]:
    try:
        return () if value == NONE else tuple(DataBucket.parse(w) for w in value.split())
    except BucketError as exc:
        raise ValueError(f"is malformed: {exc}") from None


def _grants(value: str) -> tuple[SecretGrant, ...]:
    try:
        return () if value == NONE else tuple(SecretGrant.parse(w) for w in value.split())
    except SecretError as exc:
        raise ValueError(f"is malformed: {exc}") from None


def _teams(value: str) -> Any:
    try:
        return parse_teams(value)
    except TeamsError as exc:
        raise ValueError(str(exc)) from None


def _boolean(value: str) -> bool:
    if value not in ("true", "false"):
        raise ValueError(f"is {value!r}; expected true or false")
    return value == "true"


def _render_boolean(value: bool) -> str:
    return "true" if value else "false"


def _egress(value: str) -> Egress:
    try:
        return Egress(value)
    except ValueError:
        known = ", ".join(e.value for e in Egress)
        raise ValueError(f"is {value!r}; this launcher knows {known}") from None


@dataclass(frozen=True)
class PoolInfo:
    """One compute pool of the stack: its queue and what one of its nodes offers."""

    name: str
    queue_name: str
    queue_arn: str
    instance_type: str
    max_nodes: int
    gpus_per_node: int
    vcpus_per_node: int
    memory_mib_per_node: int
    efa_interfaces: int
    spot: bool  # single-node jobs only: Batch runs no multi-node parallel job on Spot
    fallback: str | None  # the pool whose compute environment follows this one's in the queue
    # The Capacity Block the pool launches into (its cr- id, or a group's ARN); stacks older
    # than this field leave it out of the Pools output.
    capacity_block_id: str | None = None
    # The name of the pool's compute environment, which Batch gives a job's containers as
    # AWS_BATCH_CE_NAME (the prelude's checkpoint timer arms only in a block's own); stacks
    # older than this field leave it out.
    compute_environment_name: str | None = None


# Fields an older stack's Pools output may lack, with the value they mean there. CDK's JSON of
# the stack also leaves null values out (Stack.to_json_string).
_OPTIONAL_POOL_FIELDS: dict[str, Any] = {
    "fallback": None,
    "capacity_block_id": None,
    "compute_environment_name": None,
}
_POOL_TYPES = {"max_nodes", "gpus_per_node", "vcpus_per_node", "memory_mib_per_node"}


def _pools(value: str) -> tuple[PoolInfo, ...]:
    try:
        items = json.loads(value)
    except ValueError:
        raise ValueError("is not JSON") from None
    names = [f.name for f in fields(PoolInfo)]
    if isinstance(items, list):
        items = [{**_OPTIONAL_POOL_FIELDS, **i} if isinstance(i, dict) else i for i in items]
    if not isinstance(items, list) or not all(
        isinstance(i, dict) and sorted(i) == sorted(names) for i in items
    ):
        raise ValueError(f"is malformed: expected a list of objects with keys {', '.join(names)}")
    found = []
    for item in items:
        ints = [item[k] for k in (*_POOL_TYPES, "efa_interfaces")]
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in ints):
            raise ValueError(f"is malformed: pool {item.get('name')!r} has a non-integer size")
        found.append(PoolInfo(**item))
    if not found:
        raise ValueError("names no pool")
    return tuple(found)


def _render_pools(value: Any) -> str:
    """The stack renders its own JSON (with the queues' ARNs as references); the launcher's
    fixtures render PoolInfo values."""
    if isinstance(value, str):
        return value
    return json.dumps([asdict(p) for p in value], separators=(",", ":"))


def _identifiers(value: str) -> tuple[str, ...]:
    return () if value == NONE else tuple(value.split())


EXAMPLE_POOLS = json.dumps(
    [
        {
            "name": "default",
            "queue_name": "EfaBatch-jobs",
            "queue_arn": "arn:aws:batch:us-east-1:123456789012:job-queue/EfaBatch-jobs",
            "instance_type": "p4d.24xlarge",
            "max_nodes": 4,
            "gpus_per_node": 8,
            "vcpus_per_node": 96,
            "memory_mib_per_node": 1120665,
            "efa_interfaces": 4,
            "spot": False,
            "fallback": None,
            "capacity_block_id": None,
            "compute_environment_name": "ComputeEnvironment-0a1b2c3d4e5f6a7b",
        },
        {
            "name": "cpu",
            "queue_name": "EfaBatch-cpu",
            "queue_arn": "arn:aws:batch:us-east-1:123456789012:job-queue/EfaBatch-cpu",
            "instance_type": "c7i.4xlarge",
            "max_nodes": 8,
            "gpus_per_node": 0,
            "vcpus_per_node": 16,
            "memory_mib_per_node": 30720,
            "efa_interfaces": 0,
            "spot": True,
            "fallback": None,
            "capacity_block_id": None,
            "compute_environment_name": "cpuComputeEnvironment-1b2c3d4e5f6a7b8c",
        },
    ],
    separators=(",", ":"),
)


class OutputKey(str, enum.Enum):
    """Each output: ``OutputKey.X`` is its key (a ``str``), with its declaration attached."""

    field: str | None  # the ClusterInfo field it fills (None: read by from_stack itself)
    description: str
    example: str  # a value the tests' fixture cluster uses, as the stack renders it
    parse: Callable[[str], Any]
    render: Callable[[Any], str]
    # What a stack without this output means (None: the output is required). A key added
    # within a schema version has one, so stacks deployed before it stay readable.
    absent: str | None

    def __new__(
        cls,
        key: str,
        field: str | None,
        description: str,
        example: str,
        parse: Callable[[str], Any] = str,
        render: Callable[[Any], str] = str,
        absent: str | None = None,
    ) -> OutputKey:
        member = str.__new__(cls, key)
        member._value_ = key
        member.field, member.description, member.example = field, description, example
        member.parse, member.render, member.absent = parse, render, absent
        return member

    def describe(self) -> str:
        return self.description

    SCHEMA_VERSION = (
        "SchemaVersion",
        None,
        "Version of this output contract (launcher.stack.outputs.SCHEMA_VERSION)",
        SCHEMA_VERSION,
    )
    REGION = ("Region", "region", "Region of the cluster", "us-east-1")
    JOB_QUEUE_NAME = (
        "JobQueueName",
        "job_queue_name",
        "Batch job queue for multi-node jobs",
        "EfaBatch-jobs",
    )
    JOB_QUEUE_ARN = (
        "JobQueueArn",
        "job_queue_arn",
        "ARN of the Batch job queue",
        "arn:aws:batch:us-east-1:123456789012:job-queue/EfaBatch-jobs",
    )
    REPOSITORY_URI = (
        "RepositoryUri",
        "repository_uri",
        "ECR repository for patched workspace images",
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/workspace",
    )
    FILE_SYSTEM_ID = (
        "FileSystemId",
        "file_system_id",
        "Shared EFS file system",
        "fs-0123456789abcdef0",
    )
    ACCESS_POINT_ID = (
        "AccessPointId",
        "access_point_id",
        "EFS access point jobs mount through",
        "fsap-0123456789abcdef0",
    )
    JOB_ROLE_ARN = (
        "JobRoleArn",
        "job_role_arn",
        "IAM role the job's containers run as",
        "arn:aws:iam::123456789012:role/job",
    )
    EXECUTION_ROLE_ARN = (
        "ExecutionRoleArn",
        "execution_role_arn",
        "IAM role ECS uses to pull images and write logs",
        "arn:aws:iam::123456789012:role/execution",
    )
    LOG_GROUP_NAME = (
        "LogGroupName",
        "log_group_name",
        "CloudWatch log group for job logs",
        "/aws/batch/EfaBatch/jobs",
    )
    INSTANCE_TYPE = ("InstanceType", "instance_type", "Instance type of every node", "p4d.24xlarge")
    MAX_NODES = (
        "MaxNodes",
        "max_nodes",
        "Most nodes one job can use (compute environment capacity)",
        "4",
        _integer,
    )
    EFA_INTERFACES = (
        "EfaInterfacesPerNode",
        "efa_interfaces",
        "EFA interfaces per node (0 when EFA is off)",
        "4",
        _integer,
    )
    GPUS_PER_NODE = ("GpusPerNode", "gpus_per_node", "GPUs per node", "8", _integer)
    VCPUS_PER_NODE = ("VcpusPerNode", "vcpus_per_node", "vCPUs per node", "96", _integer)
    MEMORY_MIB_PER_NODE = (
        "MemoryMiBPerNode",
        "memory_mib_per_node",
        "Memory (MiB) a job can request per node",
        "1120665",
        _integer,
    )
    SCHEDULING_POLICY_ARN = (
        "SchedulingPolicyArn",
        "scheduling_policy_arn",
        "Fair-share scheduling policy of the queue, or none",
        NONE,
        _optional,
        _render_optional,
    )
    # Copying base images inside AWS (copy jobs): a Fargate queue, the copier's image and the
    # roles its jobs run with.
    COPY_QUEUE_ARN = (
        "CopyQueueArn",
        "copy_queue_arn",
        "Fargate job queue for copying base images inside AWS",
        "arn:aws:batch:us-east-1:123456789012:job-queue/EfaBatch-copy",
    )
    COPY_IMAGE = (
        "CopyImage",
        "copy_image",
        "Image of the copy jobs (the launcher's registry copier)",
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/cdk-assets:copier",
    )
    COPY_JOB_ROLE_ARN = (
        "CopyJobRoleArn",
        "copy_job_role_arn",
        "IAM role copy jobs run as (pull sources, push the repository)",
        "arn:aws:iam::123456789012:role/copy",
    )
    COPY_EXECUTION_ROLE_ARN = (
        "CopyExecutionRoleArn",
        "copy_execution_role_arn",
        "IAM role ECS uses for copy jobs (image, logs, secrets)",
        "arn:aws:iam::123456789012:role/copy-execution",
    )
    INTERNET_EGRESS = (
        "InternetEgress",
        "internet_egress",
        "How tasks reach registries outside AWS: nat, none or imported",
        Egress.NONE.value,
        _egress,
    )
    PULL_THROUGH_CACHE = (
        "PullThroughCache",
        "pull_through_cache",
        "ECR pull-through cache rules (PREFIX=UPSTREAM,...) or none",
        "ecr-public=public.ecr.aws",
        parse_pairs,
        format_pairs,
    )
    REGISTRY_SECRETS = (
        "RegistrySecrets",
        "registry_secrets",
        "Registry credentials for copy jobs (HOST=SECRET_ARN,...) or none",
        NONE,
        parse_pairs,
        format_pairs,
    )
    TASK_SECURITY_GROUP_ID = (
        "TaskSecurityGroupId",
        "task_security_group_id",
        "Security group of the jobs' task interfaces (the VPC's default group)",
        "sg-0123456789abcdef0",
    )
    DATA_BUCKETS = (
        "DataBuckets",
        "data_buckets",
        "S3 locations the job role may read (:ro) or write (:rw), space-separated, or none",
        "example-datasets/imagenet:ro example-checkpoints:rw",
        _buckets,
        _words,
    )
    JOB_SECRETS = (
        "JobSecrets",
        "job_secrets",
        "Secrets jobs may read: name prefixes, ssm:PREFIX or ARNs, space-separated, or none",
        "team/ ssm:/team/",
        _grants,
        _words,
    )
    FSX_FILE_SYSTEM_ID = (
        "FsxFileSystemId",
        "fsx_file_system_id",
        "FSx for Lustre file system every node mounts, or none",
        NONE,
        _optional,
        _render_optional,
    )
    ALLOW_PRIVILEGED = (
        "AllowPrivileged",
        "allow_privileged",
        "Whether the nodes run privileged containers (true or false)",
        "false",
        _boolean,
        _render_boolean,
    )
    DEFAULT_POOL = (
        "DefaultPool",
        "pool_name",
        "The pool jobs go to when none is named; the queue and per-node outputs describe it",
        "default",
    )
    POOLS = (
        "Pools",
        "pools",
        "Every compute pool: name, queue, instance type, max nodes, GPUs, vCPUs, memory, EFA "
        "interfaces, Spot, fallback, Capacity Block, compute environment (JSON)",
        EXAMPLE_POOLS,
        _pools,
        _render_pools,
    )
    SHARE_IDENTIFIERS = (
        "ShareIdentifiers",
        "share_identifiers",
        "Share identifiers (or PREFIX*) the fair-share policy weighs, space-separated, or none",
        NONE,
        _identifiers,
        _words,
    )
    # Stacks deployed before this output have ECS Exec off: their job role lacks the
    # ssmmessages permissions the container's SSM agent needs.
    ECS_EXEC = (
        "EcsExec",
        "ecs_exec",
        "Whether jobs start with ECS Exec on, for launcher exec (true or false)",
        "false",
        _boolean,
        _render_boolean,
        "false",
    )
    # Stacks deployed before this output have no bucket for Python functions' payloads
    # (launcher.api.functions): a call on AWS asks for a deploy (a local call needs none).
    FUNCTION_BUCKET = (
        "FunctionBucket",
        "function_bucket",
        "S3 bucket of the Python functions' payloads and results (launcher call), or none",
        "efabatch-functionpayloads-0123456789ab",
        _optional,
        _render_optional,
        NONE,
    )
    # Stacks deployed before this output have no teams: every job runs as the stack's roles.
    TEAMS = (
        "Teams",
        "teams",
        "Every team: its share, pools, roles, EFS access point, common directory, log group, "
        "data buckets, secrets, FSx access and users' policy (JSON), or none",
        NONE,
        _teams,
        render_teams,
        NONE,
    )
