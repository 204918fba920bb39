"""The cluster as the launcher sees it: parsed from the cluster stack's outputs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

from launcher import catalog
from launcher.errors import UsageError
from launcher.outputs import (
    EGRESS_VALUES,
    NO_SCHEDULING_POLICY,
    SCHEMA_VERSION,
    OutputKey,
    parse_pairs,
)

# CloudFormation states in which the stack's outputs describe a working cluster.
USABLE_STATES = frozenset(
    {"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "IMPORT_COMPLETE"}
)


@dataclass(frozen=True)
class ClusterInfo:
    stack_name: str
    region: str
    job_queue_name: str
    job_queue_arn: str
    repository_uri: str
    file_system_id: str
    access_point_id: str
    job_role_arn: str
    execution_role_arn: str
    log_group_name: str
    instance_type: str
    max_nodes: int
    efa_interfaces: int
    gpus_per_node: int
    vcpus_per_node: int
    memory_mib_per_node: int
    scheduling_policy_arn: str | None
    copy_queue_arn: str
    copy_image: str
    copy_job_role_arn: str
    copy_execution_role_arn: str
    internet_egress: str  # nat | none | imported
    pull_through_cache: dict[str, str]  # ECR repository prefix -> upstream registry host
    registry_secrets: dict[str, str]  # registry host -> Secrets Manager secret ARN
    task_security_group_id: str  # the VPC's default group, where jobs' task interfaces are

    @property
    def instance(self) -> catalog.InstanceType | None:
        return catalog.lookup(self.instance_type)

    def as_dict(self) -> dict:
        return asdict(self)


def from_stack(stack: Mapping) -> ClusterInfo:
    """Parse a ``describe_stacks`` entry; refuse stacks the launcher cannot use."""
    name = stack["StackName"]
    status = stack["StackStatus"]
    if status not in USABLE_STATES:
        raise UsageError(
            f"stack {name} is in state {status}; the launcher needs one of "
            f"{', '.join(sorted(USABLE_STATES))}"
        )
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    missing = [k.value for k in OutputKey if k.value not in outputs]
    if OutputKey.SCHEMA_VERSION.value in outputs:
        version = outputs[OutputKey.SCHEMA_VERSION]
        if version != SCHEMA_VERSION:
            raise UsageError(
                f"stack {name} has output schema version {version}; this launcher reads "
                f"version {SCHEMA_VERSION} (deploy the matching infra or upgrade the launcher)"
            )
    if missing:
        raise UsageError(
            f"stack {name} is missing outputs {', '.join(missing)}; is it a cluster stack "
            "deployed from this project's infra?"
        )

    def integer(key: OutputKey) -> int:
        try:
            return int(outputs[key])
        except ValueError:
            raise UsageError(f"stack {name}: output {key.value} is not an integer") from None

    policy = outputs[OutputKey.SCHEDULING_POLICY_ARN]
    egress = outputs[OutputKey.INTERNET_EGRESS]
    if egress not in EGRESS_VALUES:
        raise UsageError(
            f"stack {name}: output {OutputKey.INTERNET_EGRESS.value} is {egress!r}; this "
            f"launcher knows {', '.join(EGRESS_VALUES)}"
        )
    return ClusterInfo(
        stack_name=name,
        region=outputs[OutputKey.REGION],
        job_queue_name=outputs[OutputKey.JOB_QUEUE_NAME],
        job_queue_arn=outputs[OutputKey.JOB_QUEUE_ARN],
        repository_uri=outputs[OutputKey.REPOSITORY_URI],
        file_system_id=outputs[OutputKey.FILE_SYSTEM_ID],
        access_point_id=outputs[OutputKey.ACCESS_POINT_ID],
        job_role_arn=outputs[OutputKey.JOB_ROLE_ARN],
        execution_role_arn=outputs[OutputKey.EXECUTION_ROLE_ARN],
        log_group_name=outputs[OutputKey.LOG_GROUP_NAME],
        instance_type=outputs[OutputKey.INSTANCE_TYPE],
        max_nodes=integer(OutputKey.MAX_NODES),
        efa_interfaces=integer(OutputKey.EFA_INTERFACES),
        gpus_per_node=integer(OutputKey.GPUS_PER_NODE),
        vcpus_per_node=integer(OutputKey.VCPUS_PER_NODE),
        memory_mib_per_node=integer(OutputKey.MEMORY_MIB_PER_NODE),
        scheduling_policy_arn=None if policy == NO_SCHEDULING_POLICY else policy,
        copy_queue_arn=outputs[OutputKey.COPY_QUEUE_ARN],
        copy_image=outputs[OutputKey.COPY_IMAGE],
        copy_job_role_arn=outputs[OutputKey.COPY_JOB_ROLE_ARN],
        copy_execution_role_arn=outputs[OutputKey.COPY_EXECUTION_ROLE_ARN],
        internet_egress=egress,
        pull_through_cache=parse_pairs(outputs[OutputKey.PULL_THROUGH_CACHE]),
        registry_secrets=parse_pairs(outputs[OutputKey.REGISTRY_SECRETS]),
        task_security_group_id=outputs[OutputKey.TASK_SECURITY_GROUP_ID],
    )
