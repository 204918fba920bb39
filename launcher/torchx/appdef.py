"""A TorchX ``AppDef`` as a ``JobSpec`` (pure): each role a node group of ``num_replicas``
nodes, in the pool its run options or its roles' named resources choose (``choose_pool``),
with the GPUs, mounts and retries its roles ask for and the run options' job settings.

What TorchX's ``aws_batch`` gave a job, it gets here: a name unique to the run (the app's,
with TorchX's ``make_unique`` suffix), the tags TorchX's keys name (``launcher.torchx.tags``)
with ``app.metadata``, ``TORCHX_ROLE_IDX`` and ``TORCHX_ROLE_NAME`` on each role's nodes, and
``TORCHX_JOB_ID`` the app's handle (``job_id_env``). ``max_retries`` is TorchX's retries of the
app's failures, over the retries of a lost or bad host that every job has (``retries``).

A replica is one whole node (Batch runs one container per node of a multi-node job), so a
role's resource is checked against the pool's node (``role_gpus``), never divided among
replicas.
"""

from __future__ import annotations

import getpass
import re
from collections.abc import Mapping, Sequence
from string import Template

import torchx
from torchx.schedulers.ids import make_unique
from torchx.specs import (
    AppDef,
    BindMount,
    CfgVal,
    DeviceMount,
    Resource,
    Role,
    VolumeMount,
    macros,
)

from launcher.errors import UsageError
from launcher.job.job_name import MAX_LENGTH
from launcher.job.jobspec import (
    DEFAULT_ATTEMPTS,
    DEFAULT_RENDEZVOUS_PORT,
    MAX_NODE_GROUPS,
    MAX_USER_TAGS,
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
    valid_tag,
)
from launcher.job.shapes import Dependency, parse_after
from launcher.stack.cluster import ClusterInfo
from launcher.torchx import tags
from launcher.torchx.options import str_option

EFA_DEVICE = "vpc.amazonaws.com/efa"  # how TorchX's named AWS resources carry EFA
INSTANCE_TYPE = "node.kubernetes.io/instance-type"  # ... and their instance type
# torchx.tracker.api.ENV_TORCHX_JOB_ID: the app's handle, which TorchX's Runner puts in every
# role's env as make_app_handle(scheduler, session, macros.app_id) (torchx/runner/api.py).
JOB_ID_ENV = "TORCHX_JOB_ID"
# What ``${app_id}`` becomes in TORCHX_JOB_ID: the job's id, known only once Batch accepts the
# job; the node's prelude puts it in (launcher.node.prelude: LAUNCHER_JOB_ID).
JOB_ID_REF = "${LAUNCHER_JOB_ID}"
MAX_ATTEMPTS = 10  # RetryStrategy.attempts: "You can specify between 1 and 10 attempts"
# make_unique's suffix: "-" and a 64-bit number in 20 or 29 letters a digit (torchx ids.py).
_SUFFIX = 15


def _pairs(cfg: Mapping[str, CfgVal], key: str) -> list[tuple[str, str]]:
    """A mapping option (TorchX's ``KEY:VALUE;KEY:VALUE``: ``=`` cannot appear in a value)."""
    value = cfg.get(key)
    return [(str(k), str(v)) for k, v in value.items()] if isinstance(value, dict) else []


def _after(cfg: Mapping[str, CfgVal]) -> tuple[Dependency, ...]:
    """``after``: the job ids (TorchX app ids' last part) this app waits for."""
    value = cfg.get("after")
    items = value if isinstance(value, list) else ([value] if value else [])
    return tuple(parse_after(str(item).rsplit("/", 1)[-1]) for item in items)


def choose_pool(roles: Sequence[Role], cluster: ClusterInfo, cfg: Mapping[str, CfgVal]) -> str:
    """The pool an app runs in: the ``pool`` run option, else the pool of the instance type
    its roles' named resources ask for (``-h aws_g5.xlarge``), else the default pool.

    Of two pools with that type where one is the other's fallback, the one in front (its
    queue reaches both); the default pool before any other."""
    named = str_option(cfg, "pool")
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


def job_name(app: AppDef) -> str:
    """The app's name made unique as TorchX's schedulers make it (``make_unique``: ``train``
    becomes ``train-k3v9...``), so that the console tells one run of an app from another,
    within Batch's job names (jobspec._JOB_NAME: 128 letters, digits, ``-`` and ``_``)."""
    base = default_name([re.sub(r"[^A-Za-z0-9_-]", "-", app.name)])
    unique: str = make_unique(base[: MAX_LENGTH - _SUFFIX].rstrip("-_") or "app")
    return unique


def retries(app: AppDef) -> tuple[int, bool]:
    """Batch attempts and whether the app's own failures take one, for TorchX's max_retries.

    TorchX: Role.max_retries is the "max number of retries before giving up" (torchx/specs/
    api.py), which local_docker gives Docker as restart_policy on-failure MaximumRetryCount and
    kubernetes as Volcano's maxRetry: N retries of a failed app. Batch counts attempts, the
    first included, at most 10 (RetryStrategy.attempts), for every cause at once. So
    max_retries N > 0 is N + 1 attempts, the app's failures retried as a lost or bad host is;
    0 (TorchX's default) retries a lost or bad host only, the launcher's DEFAULT_ATTEMPTS,
    as ``launcher run`` does. Batch retries the whole job (TorchX's RetryPolicy.APPLICATION),
    so the job takes the largest of its roles' (as TorchX's aws_batch did)."""
    wanted = max(r.max_retries for r in app.roles)
    if wanted + 1 > MAX_ATTEMPTS:
        role = next(r for r in app.roles if r.max_retries == wanted)
        raise UsageError(
            f"role {role.name}: max_retries {wanted}: AWS Batch runs a job at most "
            f"{MAX_ATTEMPTS} times; allowed 0-{MAX_ATTEMPTS - 1}"
        )
    if wanted <= 0:
        return DEFAULT_ATTEMPTS, False
    return wanted + 1, True


def job_tags(app: AppDef, cfg: Mapping[str, CfgVal]) -> tuple[tuple[str, str], ...]:
    """The job's tags as TorchX's aws_batch set them: its version, the app's name, the user
    (run option ``user``, else who runs TorchX) and ``app.metadata``, within Batch's tag rules
    (jobspec.valid_tag; MAX_USER_TAGS with the launcher's own)."""
    try:
        user = str_option(cfg, "user") or getpass.getuser()
    except (KeyError, OSError):  # no login name, no $USER: a container without passwd entry
        user = "unknown"
    found = {
        tags.VERSION: torchx.__version__,
        tags.APP_NAME: app.name[:256],
        tags.USER: user[:256],
        **{str(key): str(value) for key, value in app.metadata.items()},
    }
    for key, value in found.items():
        if not valid_tag(key, value):
            raise UsageError(
                f"app {app.name}: metadata {key!r}: not an AWS Batch tag (key 1-128 letters, "
                "digits, spaces or _.:/=+-@, not aws:*; value at most 256 characters)"
            )
    if len(found) > MAX_USER_TAGS:
        raise UsageError(
            f"app {app.name}: {len(found)} tags with its metadata; AWS Batch allows 50 a job, "
            f"the launcher's 2 included: at most {MAX_USER_TAGS - 3} metadata entries"
        )
    return tuple(found.items())


def job_id_env(role: Role) -> dict[str, str]:
    """TorchX's TORCHX_JOB_ID as the app's handle, the one ``torchx status`` takes: the Runner
    sets it to ``SCHEDULER://SESSION/${app_id}`` and trackers read it as the run's identity
    (torchx/tracker/mlflow.py names the run after it); the app id is the Batch job's id, which
    the node's prelude puts in for JOB_ID_REF. Empty when TorchX's Runner did not set it."""
    raw = role.env.get(JOB_ID_ENV)
    if raw is None:
        return {}
    return {JOB_ID_ENV: Template(raw).safe_substitute(app_id=JOB_ID_REF)}


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
    name = job_name(app)
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
    first = 0
    for index, given in enumerate(app.roles):
        role = values.apply(given)
        if role.num_replicas < 1:
            raise UsageError(f"role {role.name}: num_replicas must be at least 1")
        gpus = role_gpus(role, cluster)
        command = (role.entrypoint, *role.args)
        # TORCHX_ROLE_IDX and TORCHX_ROLE_NAME as TorchX's aws_batch set them; LAUNCHER_GROUP
        # names the node range so describe and log can find the role again.
        env = {
            **role.env,
            **job_id_env(given),
            "TORCHX_ROLE_IDX": str(index),
            "TORCHX_ROLE_NAME": role.name,
        }
        groups.append(
            NodeGroup(
                first,
                first + role.num_replicas - 1,
                image=role.image,
                command=command,
                gpus_per_node=gpus,
                env=tuple(env.items()),
                name=role.name,
                mounts=role_mounts(role),  # this role's nodes only
            )
        )
        first += role.num_replicas
    main = groups[0]
    attempts, retry_errors = retries(app)
    return JobSpec(
        name=name,
        command=main.command or ("true",),
        image=main.image or "",
        nodes=first,
        mounts=(main.mounts or ()) if len(groups) == 1 else (),
        efa=parse_efa(efa) if (efa := str_option(cfg, "efa")) else None,
        attempts=attempts,
        retry_errors=retry_errors,
        share_id=str_option(cfg, "share_id"),
        priority=int(cfg["priority"]) if cfg.get("priority") is not None else None,
        rendezvous_port=int(cfg.get("port") or DEFAULT_RENDEZVOUS_PORT),
        groups=tuple(groups) if len(groups) > 1 else (),
        gpus_per_node=main.gpus_per_node if len(groups) == 1 else None,
        env=(*main.env, ("LAUNCHER_GROUP", app.roles[0].name)) if len(groups) == 1 else (),
        tags=job_tags(app, cfg),
        secrets=tuple(parse_secret(f"{k}={v}") for k, v in _pairs(cfg, "secrets")),
        ulimits=tuple(parse_ulimit(f"{k}={v}") for k, v in _pairs(cfg, "ulimits")),
        tmpfs=tuple(parse_tmpfs(f"{k}:{v}") for k, v in _pairs(cfg, "tmpfs")),
        privileged=bool(cfg.get("privileged")),
        # One role of one replica is one node: a container job (launcher.job.shapes).
        after=_after(cfg),
        pool=pool,
    )
