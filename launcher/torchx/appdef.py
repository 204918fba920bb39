"""A TorchX ``AppDef`` as a ``JobSpec`` (pure): each role a node group of ``num_replicas``
nodes, in the pool its run options or its roles' named resources choose (``choose_pool``),
with the GPUs, mounts and retries its roles ask for and the run options' job settings.

A replica is one whole node (Batch runs one container per node of a multi-node job), so a
role's resource is checked against the pool's node (``role_gpus``), never divided among
replicas.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

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
from launcher.job.jobspec import (
    DEFAULT_RENDEZVOUS_PORT,
    MAX_NODE_GROUPS,
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
from launcher.torchx.options import str_option

EFA_DEVICE = "vpc.amazonaws.com/efa"  # how TorchX's named AWS resources carry EFA
INSTANCE_TYPE = "node.kubernetes.io/instance-type"  # ... and their instance type


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
        efa=parse_efa(efa) if (efa := str_option(cfg, "efa")) else None,
        attempts=attempts,
        share_id=str_option(cfg, "share_id"),
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
