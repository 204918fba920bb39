"""The cluster as the launcher sees it: parsed from the cluster stack's outputs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from launcher.errors import UsageError
from launcher.stack import catalog
from launcher.stack.buckets import DataBucket
from launcher.stack.outputs import SCHEMA_VERSION, Egress, OutputKey, PoolInfo
from launcher.stack.secrets import Place, SecretGrant
from launcher.stack.teams import TeamInfo

# CloudFormation states in which the stack's outputs describe a working cluster.
USABLE_STATES = frozenset(
    {"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "IMPORT_COMPLETE"}
)


@dataclass(frozen=True)
class ClusterInfo:
    """One field per output that fills one (``launcher.stack.outputs.OutputKey``), and the stack."""

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
    internet_egress: Egress
    pull_through_cache: dict[str, str]  # ECR repository prefix -> upstream registry host
    registry_secrets: dict[str, str]  # registry host -> Secrets Manager secret ARN
    task_security_group_id: str  # the VPC's default group, where jobs' task interfaces are
    data_buckets: tuple[DataBucket, ...]
    job_secrets: tuple[SecretGrant, ...]
    fsx_file_system_id: str | None
    allow_privileged: bool
    # The pool the queue and per-node fields above describe (the default pool unless pool()
    # chose another), and every pool of the stack.
    pool_name: str
    pools: tuple[PoolInfo, ...]
    share_identifiers: tuple[str, ...]  # the fair-share policy's teams (PREFIX* a prefix)
    ecs_exec: bool = False  # jobs start with ECS Exec on (launcher exec)
    # Where Python functions' payloads and results live (launcher.stack.functions); None: a
    # stack deployed before the bucket, whose functions run on the local engine only.
    function_bucket: str | None = None
    # The stack's teams (none: one team, every job runs as the stack's roles), and the team
    # this view submits as (for_team; None: no team chosen). ``team`` comes from no output.
    teams: tuple[TeamInfo, ...] = ()
    team: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "internet_egress", Egress(self.internet_egress))
        # From dataclasses.asdict (a ClusterInfo handed to another process as JSON).
        pools = tuple(PoolInfo(**p) if isinstance(p, dict) else p for p in self.pools)
        object.__setattr__(self, "pools", pools)
        object.__setattr__(self, "share_identifiers", tuple(self.share_identifiers))
        teams = tuple(TeamInfo(**t) if isinstance(t, dict) else t for t in self.teams)
        object.__setattr__(self, "teams", teams)

    @property
    def instance(self) -> catalog.InstanceType | None:
        return catalog.lookup(self.instance_type)

    @property
    def pool_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.pools)

    @property
    def current_pool(self) -> PoolInfo:
        """The pool this view submits to."""
        (found,) = [p for p in self.pools if p.name == self.pool_name]
        return found

    def pool(self, name: str | None) -> ClusterInfo:
        """The cluster as seen from one pool: its queue and per-node sizes in the fields the
        launcher reads (None: the default pool, this view unchanged)."""
        if name is None or name == self.pool_name:
            return self
        found = [p for p in self.pools if p.name == name]
        if not found:
            raise UsageError(
                f"stack {self.stack_name} has no pool {name!r}; its pools: "
                + ", ".join(self.pool_names)
            )
        (p,) = found
        return replace(
            self,
            pool_name=p.name,
            job_queue_name=p.queue_name,
            job_queue_arn=p.queue_arn,
            instance_type=p.instance_type,
            max_nodes=p.max_nodes,
            efa_interfaces=p.efa_interfaces,
            gpus_per_node=p.gpus_per_node,
            vcpus_per_node=p.vcpus_per_node,
            memory_mib_per_node=p.memory_mib_per_node,
        )

    @property
    def team_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.teams)

    @property
    def current_team(self) -> TeamInfo | None:
        """The team this view submits as (None: the stack has no teams, or none is chosen)."""
        return next((t for t in self.teams if t.name == self.team), None)

    def for_team(self, name: str) -> ClusterInfo:
        """The cluster as one team sees it: its roles, log group, data buckets, secrets and
        share in the fields the launcher reads, on one of its pools. ``access_point_id`` stays
        the stack's (the common directory); the team's own is ``current_team.access_point_id``."""
        found = [t for t in self.teams if t.name == name]
        if not found:
            known = ", ".join(self.team_names) or "none (it was deployed without teams)"
            raise UsageError(f"stack {self.stack_name} has no team {name!r}; its teams: {known}")
        (t,) = found
        view = self.pool(t.pools[0]) if self.pool_name not in t.pools and t.pools else self
        return replace(
            view,
            team=t.name,
            job_role_arn=t.job_role_arn,
            execution_role_arn=t.execution_role_arn,
            log_group_name=t.log_group_name,
            data_buckets=t.data_buckets,
            job_secrets=t.job_secrets,
            share_identifiers=(t.share_id,),
        )

    @property
    def place(self) -> Place:
        """The partition, Region and account of the stack (from its queue's ARN), where a
        secret named without an ARN lives."""
        _, partition, _, region, account, _ = self.job_queue_arn.split(":", 5)
        return Place(partition, region, account)

    @property
    def internet(self) -> str:
        """Whether jobs reach the internet, in words (`launcher outputs` and `launcher check`)."""
        return {
            Egress.NAT: "yes, through the stack's NAT gateway",
            Egress.NONE: "no (nat_gateway=false): AWS services through VPC endpoints only; "
            "experiment trackers, model hubs and pip at run time need NAT or a stand-in "
            '(docs/operating.md, "First deploy")',
            Egress.IMPORTED: "as the imported VPC routes it (the stack cannot tell)",
        }[self.internet_egress]

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["internet_egress"] = self.internet_egress.value
        data["data_buckets"] = [str(b) for b in self.data_buckets]
        data["job_secrets"] = [str(g) for g in self.job_secrets]
        data["pools"] = [asdict(p) for p in self.pools]
        data["share_identifiers"] = list(self.share_identifiers)
        data["teams"] = [t.as_dict() for t in self.teams]
        return data

    @classmethod
    def from_outputs(cls, stack_name: str, outputs: Mapping[str, str]) -> ClusterInfo:
        """The cluster an output-key-to-text mapping describes; UsageError naming a bad one."""
        values: dict[str, Any] = {"stack_name": stack_name}
        for key in OutputKey:
            if key.field is None:
                continue
            try:
                text = outputs.get(key.value, key.absent)
                values[key.field] = key.parse(outputs[key.value] if text is None else text)
            except ValueError as exc:
                detail = str(exc) if str(exc).startswith("is ") else "is malformed"
                raise UsageError(f"stack {stack_name}: output {key.value} {detail}") from None
        return cls(**values)


# Every field but the stack's name and the chosen team comes from exactly one output.
assert {f.name for f in fields(ClusterInfo)} - {"stack_name", "team"} == {
    k.field for k in OutputKey if k.field
}


def from_stack(stack: Mapping[str, Any]) -> ClusterInfo:
    """Parse a ``describe_stacks`` entry; refuse stacks the launcher cannot use."""
    name = stack["StackName"]
    status = stack["StackStatus"]
    if status not in USABLE_STATES:
        raise UsageError(
            f"stack {name} is in state {status}; the launcher needs one of "
            f"{', '.join(sorted(USABLE_STATES))}"
        )
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    version = outputs.get(OutputKey.SCHEMA_VERSION.value)
    if version is not None and version != SCHEMA_VERSION:
        newer = version.isdigit() and int(version) > int(SCHEMA_VERSION)
        what = (
            "upgrade the launcher to the infra's version"
            if newer
            else "redeploy the infra of this launcher's version (cdk deploy --all; "
            'docs/operating.md, "Updating a deployed cluster")'
        )
        raise UsageError(
            f"stack {name} has output schema version {version}; this launcher reads "
            f"version {SCHEMA_VERSION}: {what}"
        )
    missing = [k.value for k in OutputKey if k.value not in outputs and k.absent is None]
    if missing:
        raise UsageError(
            f"stack {name} is missing outputs {', '.join(missing)}; is it a cluster stack "
            "deployed from this project's infra?"
        )
    return ClusterInfo.from_outputs(name, outputs)
