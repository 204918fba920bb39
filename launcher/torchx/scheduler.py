"""A TorchX scheduler, ``efa_batch``: TorchX apps on an efa-batch cluster (or local Docker).

``pip install ".[torchx]"`` registers it twice, for both TorchX lines:

- the ``torchx.schedulers`` entry-point group (TorchX 0.7.0, the latest release). Once that
  group has any entry, 0.7.0 offers only the entries (TorchX issue 1009), so the group also
  carries 0.7.0's own schedulers (``launcher.torchx.builtins``) and none of them disappears;
- ``torchx_plugins.schedulers.efa_batch`` with ``@register.scheduler()`` (TorchX main and
  torchx-nightly), used where TorchX does not read entry points.

It is a front door to ``launcher.api``, like the CLI: an ``AppDef`` becomes a ``JobSpec``
(roles and replicas -> node groups), the dry run is the same request ``launcher run --dryrun``
prints, and the job runs on the same two backends. Workspaces are patched into the role's
image in the registry (no Docker build); the digest is computed at dry run and the layer is
pushed at schedule time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Dict, List  # noqa: UP035 (TorchX compares with typing's)

from torchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream
from torchx.specs import (
    AppDef,
    AppDryRunInfo,
    AppState,
    BindMount,
    CfgVal,
    DeviceMount,
    ReplicaStatus,
    Resource,
    Role,
    RoleStatus,
    VolumeMount,
    macros,
    runopts,
)
from torchx.specs.finder import ComponentValidationException
from torchx.workspace.api import WorkspaceMixin

from launcher.api import BuildOptions, Cluster, Job, aws_session, default_stack
from launcher.errors import LauncherError, RemoteError, UsageError
from launcher.job import jobdef
from launcher.job.info import GroupInfo, JobInfo, JobState
from launcher.job.jobspec import (
    DEFAULT_RENDEZVOUS_PORT,
    MAX_NODE_GROUPS,
    EfaMode,
    JobSpec,
    Mount,
    MountKind,
    NodeGroup,
    default_name,
    device_permissions,
    parse_efa,
    parse_secret,
    parse_tmpfs,
    parse_ulimit,
)
from launcher.job.shapes import Dependency, parse_after
from launcher.stack.cluster import ClusterInfo

if TYPE_CHECKING:
    from launcher.aws.client import Aws

NAME = "efa_batch"
EFA_DEVICE = "vpc.amazonaws.com/efa"  # how TorchX's named AWS resources carry EFA
INSTANCE_TYPE = "node.kubernetes.io/instance-type"  # ... and their instance type
TORCHX_MERGE_SUFFIX = "torchx_workspace_"  # torchx.workspace.api's temporary merges
# (stack, profile, region, local, host mounts allowed in a local run)
Where = tuple[str, str | None, str | None, bool, bool, bool]
HOST_MOUNTS_OPTION = "allow_host_mounts"
STATES = {
    JobState.SUBMITTED: AppState.SUBMITTED,
    JobState.PENDING: AppState.PENDING,
    JobState.RUNNABLE: AppState.PENDING,
    JobState.STARTING: AppState.PENDING,
    JobState.RUNNING: AppState.RUNNING,
    JobState.SUCCEEDED: AppState.SUCCEEDED,
    JobState.FAILED: AppState.FAILED,
}


@dataclass
class Request:
    """What ``schedule`` sends: the Batch requests and the workspace layers still to push."""

    requests: jobdef.Requests
    cluster: Where  # where schedule() sends it
    # (base, workspace, reference, build options) of each workspace image to push
    pushes: list[tuple[str, str, str, BuildOptions]] = field(default_factory=list)

    def __str__(self) -> str:
        return json.dumps(self.requests.as_dict(), indent=2)


def _pairs(cfg: Mapping[str, CfgVal], key: str) -> list[tuple[str, str]]:
    """A mapping option (TorchX's ``KEY:VALUE;KEY:VALUE``: ``=`` cannot appear in a value)."""
    value = cfg.get(key)
    return [(str(k), str(v)) for k, v in value.items()] if isinstance(value, dict) else []


def _after(cfg: Mapping[str, CfgVal]) -> tuple[Dependency, ...]:
    """``after``: the job ids (TorchX app ids' last part) this app waits for."""
    value = cfg.get("after")
    items = value if isinstance(value, list) else ([value] if value else [])
    return tuple(parse_after(str(item).rsplit("/", 1)[-1]) for item in items)


def _str(cfg: Mapping[str, CfgVal], key: str) -> str | None:
    value = cfg.get(key)
    return None if value in (None, "") else str(value)


def from_command_line(cfg: Mapping[str, CfgVal], option: str) -> bool:
    """A local run's ``allow_host_mounts`` or ``privileged``, taken from the command line
    only: ``torchx run`` fills the run options it was not given from ``.torchxconfig`` in the
    working directory and the home directory (torchx.runner.config.apply, find_configs), and a
    cloned repository's file must not let its own app be root on this machine (a BindMount of
    ``/``, a privileged container). UsageError when a file names it."""
    if not cfg.get(option):
        return False
    import configparser

    from torchx.runner import config

    for path in config.find_configs():
        parser = configparser.ConfigParser()
        parser.read(path)
        if parser.has_option(NAME, option):
            raise UsageError(
                f"{path}: [{NAME}] {option}: a config file cannot make a local app root on this "
                f"machine; give -cfg {option}=True on the command line instead"
            )
    return True


def _where(cfg: Mapping[str, CfgVal]) -> Where:
    """The cluster ``cfg`` names, and how it runs jobs."""
    local = bool(cfg.get("local"))
    return (
        _str(cfg, "stack") or default_stack(),
        _str(cfg, "profile"),
        _str(cfg, "region"),
        local,
        local and from_command_line(cfg, HOST_MOUNTS_OPTION),
        local and from_command_line(cfg, "privileged"),
    )


# --- AppDef -> JobSpec (pure) -----------------------------------------------------------------


def choose_pool(roles: Sequence[Role], cluster: ClusterInfo, cfg: Mapping[str, CfgVal]) -> str:
    """The pool an app runs in: the ``pool`` run option, else the pool of the instance type
    its roles' named resources ask for (``-h aws_g5.xlarge``), else the default pool.

    Of two pools with that type where one is the other's fallback, the one in front (its
    queue reaches both); the default pool before any other."""
    named = _str(cfg, "pool")
    if named is not None:
        return cluster.pool(named).pool_name  # UsageError naming the pools there are
    types = {t for r in roles if (t := (r.resource.capabilities or {}).get(INSTANCE_TYPE))}
    if not types:
        return cluster.pool_name
    if len(types) > 1:
        raise UsageError(
            f"roles ask for {', '.join(sorted(types))}: one job runs in one pool's queue, on "
            "one instance type; give the roles one -h, or submit them as separate jobs"
        )
    (itype,) = types
    pools = [p for p in cluster.pools if p.instance_type == itype]
    behind = {p.fallback for p in pools}
    front = [p.name for p in pools if p.name not in behind]  # fallbacks are one step deep
    if not front or cluster.pool_name in front:
        return cluster.pool_name  # none of that type: role_gpus says which types there are
    if len(front) > 1:
        raise UsageError(
            f"resource aws_{itype}: pools {' and '.join(front)} both run {itype}; choose one "
            "with -cfg pool=NAME"
        )
    return front[0]


def role_gpus(role: Role, cluster: ClusterInfo) -> int | None:
    """GPUs per node for a role, or a UsageError if its resource does not fit one node.

    A replica is one whole node (Batch runs one container per node of a multi-node job). A
    named resource for the cluster's instance type (``aws_p4d.24xlarge``) means exactly that;
    its memory is a little above what Batch can give a job, and is not held against it.
    Anything else must fit the node; TorchX's default of 0 GPUs takes the node's GPUs, so a
    GPU cluster's GPUs are never left idle by omission.
    """
    resource: Resource = role.resource
    itype = (resource.capabilities or {}).get(INSTANCE_TYPE)
    efa = int((resource.devices or {}).get(EFA_DEVICE, 0))
    info = cluster
    if itype is not None:
        if itype != info.instance_type:
            if len(info.pools) == 1:
                where = f"{info.stack_name} runs {info.instance_type} nodes"
            elif any(p.instance_type == itype for p in info.pools):  # -cfg pool named another
                where = f"pool {info.pool_name} of {info.stack_name} runs {info.instance_type}"
            else:
                where = f"no pool of {info.stack_name} runs it (its pools: " + ", ".join(
                    f"{p.name} {p.instance_type}" for p in info.pools
                )
                where += ")"
            use = f"aws_{info.instance_type}" if len(info.pools) == 1 else "aws_TYPE of a pool"
            raise UsageError(
                f"role {role.name}: resource is for {itype}; {where} (use -h {use} or plain "
                "numbers)"
            )
        return None
    if efa > info.efa_interfaces:
        raise UsageError(
            f"role {role.name}: asks for {efa} EFA devices; a {info.instance_type} node has "
            f"{info.efa_interfaces}"
        )
    too_big = []
    if resource.cpu > info.vcpus_per_node:
        too_big.append(f"{resource.cpu} vCPUs (node: {info.vcpus_per_node})")
    if resource.gpu > info.gpus_per_node:
        too_big.append(f"{resource.gpu} GPUs (node: {info.gpus_per_node})")
    if resource.memMB > info.memory_mib_per_node:
        too_big.append(f"{resource.memMB} MB (node: {info.memory_mib_per_node} MiB for jobs)")
    if too_big:
        raise UsageError(
            f"role {role.name}: one replica is one {info.instance_type} node; it does not fit "
            + ", ".join(too_big)
        )
    # TorchX's NULL_RESOURCE (a role that names none) is -1 everywhere: the node's GPUs.
    return resource.gpu if resource.gpu > 0 else None


def role_mounts(role: Role) -> tuple[Mount, ...]:
    mounts = []
    for m in role.mounts:
        if isinstance(m, BindMount):
            mounts.append(Mount(MountKind.BIND, m.dst_path, m.src_path, readonly=m.read_only))
        elif isinstance(m, VolumeMount):
            kinds = {"efs": MountKind.EFS, "shared": MountKind.EFS, "fsx": MountKind.FSX}
            if m.src not in kinds:
                raise UsageError(
                    f"role {role.name}: volume {m.src!r}: the cluster's volumes are its EFS "
                    "(type=volume,src=efs,dst=PATH) and FSx for Lustre (src=fsx)"
                )
            mounts.append(Mount(kinds[m.src], m.dst_path, readonly=m.read_only))
        elif isinstance(m, DeviceMount):
            permissions = device_permissions(m.permissions)
            mounts.append(Mount(MountKind.DEVICE, m.dst_path, m.src_path, permissions=permissions))
    return tuple(mounts)


def app_to_spec(app: AppDef, cluster: ClusterInfo, cfg: Mapping[str, CfgVal]) -> JobSpec:
    """An AppDef as a job spec: each role a node group of ``num_replicas`` nodes."""
    if not app.roles:
        raise UsageError(f"app {app.name}: no roles")
    if len(app.roles) > MAX_NODE_GROUPS:
        raise UsageError(
            f"app {app.name}: {len(app.roles)} roles; AWS Batch allows {MAX_NODE_GROUPS} node "
            "ranges per multi-node job"
        )
    name = default_name([re.sub(r"[^A-Za-z0-9_-]", "-", app.name)])
    values = macros.Values(
        img_root="",
        app_id=name,
        # Expanded by the shell that runs the role's command (dist.ddp's bash -c).
        replica_id="$LAUNCHER_REPLICA_ID",
        # Set on every node by the launcher's prelude, the main node included.
        rank0_env="LAUNCHER_MAIN_ADDR",
    )
    pool = choose_pool(app.roles, cluster, cfg)
    cluster = cluster.pool(pool)
    groups: list[NodeGroup] = []
    mounts: list[Mount] = []
    first = 0
    for role in app.roles:
        role = values.apply(role)
        if role.num_replicas < 1:
            raise UsageError(f"role {role.name}: num_replicas must be at least 1")
        gpus = role_gpus(role, cluster)
        command = (role.entrypoint, *role.args)
        groups.append(
            NodeGroup(
                first,
                first + role.num_replicas - 1,
                image=role.image,
                command=command,
                gpus_per_node=gpus,
                # TORCHX_ROLE_NAME as TorchX's own schedulers set it; LAUNCHER_GROUP names the
                # node range so describe and log can find the role again.
                env=tuple({**role.env, "TORCHX_ROLE_NAME": role.name}.items()),
                name=role.name,
            )
        )
        mounts.extend(role_mounts(role))
        first += role.num_replicas
    main = groups[0]
    attempts = min(10, max(1, 1 + max(r.max_retries for r in app.roles)))
    return JobSpec(
        name=name,
        command=main.command or ("true",),
        image=main.image or "",
        nodes=first,
        mounts=tuple(dict.fromkeys(mounts)),
        efa=parse_efa(efa) if (efa := _str(cfg, "efa")) else None,
        attempts=attempts,
        share_id=_str(cfg, "share_id"),
        priority=int(cfg["priority"]) if cfg.get("priority") is not None else None,
        rendezvous_port=int(cfg.get("port") or DEFAULT_RENDEZVOUS_PORT),
        groups=tuple(groups) if len(groups) > 1 else (),
        gpus_per_node=main.gpus_per_node if len(groups) == 1 else None,
        env=(*main.env, ("LAUNCHER_GROUP", app.roles[0].name)) if len(groups) == 1 else (),
        tags=(("torchx:app", app.name[:256]),),
        secrets=tuple(parse_secret(f"{k}={v}") for k, v in _pairs(cfg, "secrets")),
        ulimits=tuple(parse_ulimit(f"{k}={v}") for k, v in _pairs(cfg, "ulimits")),
        tmpfs=tuple(parse_tmpfs(f"{k}:{v}") for k, v in _pairs(cfg, "tmpfs")),
        privileged=bool(cfg.get("privileged")),
        # One role of one replica is one node: a container job (launcher.job.shapes).
        after=_after(cfg),
        pool=pool,
    )


# --- errors as TorchX reports them -----------------------------------------------------------


_REPORTED: dict[str, type[LauncherError]] = {}


def reported(kind: type[LauncherError]) -> type[LauncherError]:
    """``kind``, and also the one error ``torchx run`` reports as a line instead of a traceback:
    its CLI catches ``ComponentValidationException`` (and ``ComponentNotFoundException``),
    logs "Failed to run component ...: MESSAGE" and exits 1; anything else a scheduler raises
    reaches the user as a traceback. A caller of the Runner still catches ``kind``."""
    key = f"{kind.__module__}.{kind.__qualname__}"
    if key not in _REPORTED:
        bases = (kind, ComponentValidationException)
        _REPORTED[key] = type(kind.__name__, bases, {"__module__": __name__})
    return _REPORTED[key]


@contextlib.contextmanager
def torchx_errors() -> Iterator[None]:
    """The launcher's errors (bad input, AWS or a registry failing) and botocore's, as
    ``reported`` errors; the original stays the ``__cause__``."""
    try:
        yield
    except ComponentValidationException:
        raise
    except LauncherError as exc:
        raise reported(type(exc))(str(exc)) from exc
    except Exception as exc:
        if not type(exc).__module__.startswith("botocore."):
            raise
        raise reported(RemoteError)(f"AWS request failed: {exc}") from exc


# --- the scheduler ----------------------------------------------------------------------------


class EfaBatchScheduler(WorkspaceMixin[None], Scheduler[Mapping[str, CfgVal]]):
    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__(NAME, session_name)
        self._clusters: dict[Where, Cluster] = {}
        self._roles: dict[str, dict[str, GroupInfo]] = {}
        self._lock = threading.Lock()
        self._session: Aws | None = None

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add("stack", type_=str, default=default_stack(), help="efa-batch cluster stack")
        opts.add("profile", type_=str, default=None, help="AWS profile")
        opts.add("region", type_=str, default=None, help="AWS region")
        opts.add(
            "pool",
            type_=str,
            default=None,
            help="the stack's pool to run in (default: the pool of -h aws_TYPE's instance type, "
            "else the default pool)",
        )
        opts.add("share_id", type_=str, default=None, help="fair-share identifier")
        opts.add("priority", type_=int, default=None, help="fair-share scheduling priority")
        opts.add(
            "image_repo",
            type_=str,
            default=None,
            help="registry HOST[:PORT] to push workspace images to instead of the stack's ECR "
            "(same repository path; $LAUNCHER_REGISTRY)",
        )
        opts.add(
            "efa",
            type_=str,
            default=None,
            help=" | ".join(m.value for m in EfaMode)
            + " (default: require for multi-node jobs on a pool with EFA, auto for one node)",
        )
        opts.add("port", type_=int, default=DEFAULT_RENDEZVOUS_PORT, help="rendezvous port")
        opts.add("local", type_=bool, default=False, help="run on the local Docker engine")
        opts.add(
            HOST_MOUNTS_OPTION,
            type_=bool,
            default=False,
            help="with local=True: the app may mount this machine's paths and devices "
            "(BindMount, DeviceMount), which give it root here; on the command line only, "
            "never from .torchxconfig (on AWS the stack's allow_privileged decides)",
        )
        opts.add(
            "secrets",
            type_=Dict[str, str],  # noqa: UP006 (TorchX compares the type with typing's)
            default=None,
            help="NAME:SECRET;...: variables read at start from Secrets Manager (name or ARN, "
            "NAME#KEY) or ssm:PARAMETER; only those the stack's job_secrets allow",
        )
        opts.add(
            "ulimits",
            type_=Dict[str, str],  # noqa: UP006
            default=None,
            help="NAME:SOFT[:HARD];... over the launcher's memlock, stack, nofile",
        )
        opts.add(
            "tmpfs",
            type_=Dict[str, str],  # noqa: UP006
            default=None,
            help="DST:SIZE;... memory-backed directories (e.g. /scratch:8g)",
        )
        opts.add(
            "privileged",
            type_=bool,
            default=False,
            help="root on the node (only where the stack sets allow_privileged); with "
            "local=True, root on this machine: on the command line only, never from .torchxconfig",
        )
        opts.add(
            "after",
            type_=List[str],  # noqa: UP006
            default=None,
            help="job ids (or efa_batch:// app handles) this app waits for (AWS Batch dependsOn, "
            "at most 20)",
        )
        opts.add(
            "stream_base",
            type_=bool,
            default=False,
            help="send base layers through this machine instead of a copy job",
        )
        return opts

    def _cluster(self, cfg: Mapping[str, CfgVal]) -> Cluster:
        return self._cluster_at(_where(cfg))

    def _cluster_at(self, key: Where) -> Cluster:
        """The cluster of a stack, on AWS or (``local``) on the local Docker engine."""
        if key not in self._clusters:
            stack, profile, region, local, host_mounts, privileged = key
            cluster = Cluster.from_stack(stack, profile=profile, region=region)
            self._clusters[key] = (
                cluster.local(allow_host_mounts=host_mounts, allow_privileged=privileged)
                if local
                else cluster
            )
        return self._clusters[key]

    # --- workspace: a layer on the role's image, in the registry -------------------------

    def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        with torchx_errors():
            self._build_workspace(role, workspace, cfg)

    def _build_workspace(self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]) -> None:
        path = workspace.removeprefix("file://")
        if "://" in path or not os.path.isdir(path):
            raise UsageError(f"workspace {workspace!r}: efa_batch takes a local directory")
        repo = _str(cfg, "image_repo")
        if repo:
            os.environ["LAUNCHER_REGISTRY"] = repo
        cluster = self._cluster(cfg)
        cluster = cluster.in_pool(choose_pool([role], cluster.info, cfg))  # its platform
        stream_base = bool(cfg.get("stream_base"))
        options: BuildOptions = {"stream_base": stream_base}
        # The digest; nothing pushed yet.
        built = cluster.build(role.image, path, dryrun=True, stream_base=stream_base)
        if built.reused:
            role.image = built.reference
            return
        # TorchX (main) hands a merge of several directories over in a temporary directory
        # that is gone by schedule time: push that now. A plain directory waits for schedule.
        if os.path.basename(os.path.normpath(path)).endswith(TORCHX_MERGE_SUFFIX):
            built = cluster.build(role.image, path, **options)
        else:
            self._pending = getattr(self, "_pending", [])
            self._pending.append((role.image, path, built.reference, options))
        role.image = built.reference

    # --- dry run and schedule -------------------------------------------------------------

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo:
        with torchx_errors():
            return self._dryrun(app, cfg)

    def _dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo:
        where = _where(cfg)
        cluster = self._cluster_at(where)
        spec = cluster.spec(spec=app_to_spec(app, cluster.info, cfg))
        request = Request(
            cluster.requests(spec),
            cluster=(cluster.info.stack_name, *where[1:]),
            pushes=list(getattr(self, "_pending", [])),
        )
        self._pending = []
        return AppDryRunInfo(request, str)

    def schedule(self, dryrun_info: AppDryRunInfo) -> str:
        with torchx_errors():
            return self._schedule(dryrun_info.request)

    def _schedule(self, request: Request) -> str:
        cluster = self._cluster_at(request.cluster)
        for base, path, expected, options in request.pushes:
            built = cluster.build(base, path, **options)
            if built.reference != expected:
                raise UsageError(f"workspace {path} changed since the dry run; run again")
        job = cluster.submit(request.requests)
        return job.job_id

    # --- reading back ---------------------------------------------------------------------

    def _job(self, app_id: str) -> Job:
        return Job.attach(app_id, aws=self._aws())

    def _aws(self) -> Aws:
        """One AWS session for every call of this scheduler: TorchX calls it from a thread per
        replica, and a session with its clients per thread cost 64 replicas ~12 s of CPU and
        ~0.7 GB here, and held their logs followers apart while they started."""
        with self._lock:
            if self._session is None:
                self._session = aws_session()
            return self._session

    def _info(self, app_id: str) -> JobInfo | None:
        try:
            return self._job(app_id).describe()
        except UsageError:
            return None

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        info = self._info(app_id)
        if info is None:
            return None
        state = STATES[info.state]
        if info.state is JobState.FAILED and info.cancelled:
            state = AppState.CANCELLED
        nodes = {n.index: n for n in info.node_status}
        roles, statuses = [], []
        for group in info.groups or (GroupInfo("main", 0, info.nodes - 1, info.image),):
            replicas = [
                ReplicaStatus(
                    id=i,
                    state=STATES[nodes[n].state] if n in nodes else state,
                    role=group.name,
                    hostname="",
                    structured_error_msg=(nodes[n].reason if n in nodes else None) or "<NONE>",
                )
                for i, n in enumerate(range(group.first, group.last + 1))
            ]
            statuses.append(RoleStatus(group.name, replicas))
            roles.append(
                Role(
                    name=group.name,
                    image=group.image or "",
                    num_replicas=group.last - group.first + 1,
                )
            )
        return DescribeAppResponse(
            app_id=app_id,
            state=state,
            num_restarts=max(0, info.attempts - 1),
            msg=info.reason or "",
            roles_statuses=statuses,
            roles=roles,
        )

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterable[str]:
        job = self._job(app_id)
        groups = self._groups(job)
        if role_name not in groups:
            raise ValueError(f"app {app_id} has no role {role_name!r}; roles: {', '.join(groups)}")
        group = groups[role_name]
        if not 0 <= k <= group.last - group.first:
            raise ValueError(f"role {role_name} has replicas 0-{group.last - group.first}")
        pattern = re.compile(regex) if regex else None
        end = until.timestamp() if until else None
        for line in job.logs(
            node=group.first + k,
            since=since.timestamp() if since else None,
            follow=should_tail,
        ):
            if end is not None and line.timestamp is not None and line.timestamp > end:
                return
            if pattern is None or pattern.search(line.message):
                yield line.message + "\n"

    def _groups(self, job: Job) -> dict[str, GroupInfo]:
        """An app's roles as node ranges, read once per app (they are fixed when it is
        submitted): ``torchx log`` asks from a thread per replica at once, and one DescribeJobs
        answers them all. The replicas' lines are read together too (``launcher.aws.follow``)."""
        with self._lock:  # held while describing: the other threads wait for the answer
            if job.job_id not in self._roles:
                info = job.status()
                self._roles[job.job_id] = {g.name: g for g in info.groups} or {
                    "main": GroupInfo("main", 0, info.nodes - 1)
                }
            return self._roles[job.job_id]

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        cfg = cfg or {}
        jobs = self._cluster(cfg).list(all=True, pool=_str(cfg, "pool"))
        return [ListAppResponse(app_id=j.job_id, state=STATES[j.state]) for j in jobs]

    def _cancel_existing(self, app_id: str) -> None:
        try:
            self._job(app_id).cancel()
        except UsageError as exc:
            if "already" not in str(exc):  # cancel is idempotent in TorchX
                raise

    def _validate(self, app: AppDef, scheduler: str, cfg: Any = None) -> None:
        """Checked in the dry run (one line each); TorchX's own check refuses roles without a
        resource, but here a replica is a node whatever its resource says."""


def create_scheduler(session_name: str, **kwargs: Any) -> EfaBatchScheduler:
    return EfaBatchScheduler(session_name, **kwargs)
