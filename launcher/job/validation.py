"""The checks a spec must pass on the cluster it runs in, and the decisions they rest on: the
pool it names and its EFA mode there (``in_pool``), GPUs per node (``resolve_gpus``), node
count, Spot, fair share, secrets, privileges, memory, and host mounts.

Pure: each raises ``UsageError`` naming the flag and what would be right, before any request
is built (``launcher.job.jobdef.build`` runs them first) or anything is uploaded.
"""

from __future__ import annotations

from dataclasses import replace

from launcher.errors import UsageError
from launcher.job import teams
from launcher.job.jobspec import EfaMode, JobSpec, Mount, MountKind, NodeGroup
from launcher.job.setting_error import Setting, SettingError
from launcher.stack.cluster import ClusterInfo
from launcher.stack.secrets import allowed


def resolve_gpus(spec: JobSpec, cluster: ClusterInfo, group: NodeGroup | None = None) -> int:
    wanted = group.gpus_per_node if group and group.gpus_per_node is not None else None
    wanted = spec.gpus_per_node if wanted is None else wanted
    if wanted is None:
        return cluster.gpus_per_node
    if wanted > cluster.gpus_per_node:
        raise UsageError(
            f"--gpus-per-node {wanted}: {cluster.instance_type} has {cluster.gpus_per_node} GPUs"
        )
    return wanted


def in_pool(spec: JobSpec, cluster: ClusterInfo) -> tuple[JobSpec, ClusterInfo]:
    """The pool the spec names (UsageError naming the pools there are), and the spec as it
    runs there. Unset, EFA is the pool's: ``require`` for a multi-node job on a pool with EFA
    (the fabric guard: a node on TCP or short of a NIC fails in seconds instead of training at
    a fraction of the speed for days), ``auto`` for a one-node job there (its NCCL traffic
    stays on the node), ``off`` on a pool without. ``--efa auto`` means EFA where the pool's
    nodes have it, so a job for a CPU or small GPU pool needs no ``--efa off``; ``require``
    stays a demand. A team's job on a fair-share queue shares as its team unless it names
    another share (``teams.check`` refuses that)."""
    cluster = cluster.pool(spec.pool)
    share_id = teams.default_share(spec, cluster)
    if share_id != spec.share_id:
        spec = replace(spec, share_id=share_id)
    if spec.efa is None:
        efa = cluster.efa_interfaces > 0
        default = EfaMode.AUTO if spec.single_node else EfaMode.REQUIRE
        spec = replace(spec, efa=default if efa else EfaMode.OFF)
    elif spec.efa is EfaMode.AUTO and cluster.efa_interfaces == 0:
        spec = replace(spec, efa=EfaMode.OFF)
    return spec, cluster


def validate(spec: JobSpec, cluster: ClusterInfo) -> None:
    """Checks that need the cluster (the pool the spec names); the spec validated itself on
    construction."""
    teams.check(spec, cluster.pool(spec.pool))  # before in_pool: the share as it was given
    spec, cluster = in_pool(spec, cluster)
    _validate_pool(spec, cluster)
    if spec.efa_on and cluster.efa_interfaces == 0:
        raise SettingError(
            Setting("efa", spec.efa),
            f": {cluster.stack_name} has no EFA interfaces ({cluster.instance_type}); use ",
            Setting("efa", "off"),
        )
    if spec.shm_mib is not None and spec.shm_mib >= cluster.memory_mib_per_node:
        raise UsageError(
            f"--shm-size {spec.shm_mib}MiB: must be below the node's "
            f"{cluster.memory_mib_per_node} MiB of job memory"
        )
    _validate_share(spec, cluster)
    for group in (None, *spec.groups):
        resolve_gpus(spec, cluster, group)  # raises for more GPUs than a node has
    for mounts in spec.mount_sets:  # each node range's
        for kind in (MountKind.EFS, MountKind.FSX):
            if len([m for m in mounts if m.kind is kind]) > 1:
                raise UsageError(f"--mount type={kind}: give the cluster's {kind} one mount point")
    every = [m for mounts in spec.mount_sets for m in mounts]
    if not cluster.fsx_file_system_id and any(m.kind is MountKind.FSX for m in every):
        raise UsageError(
            f"--mount type=fsx: {cluster.stack_name} has no FSx for Lustre file system "
            "(deploy with -c fsx_lustre='{...}')"
        )
    _validate_container_settings(spec, cluster)


def _where(cluster: ClusterInfo) -> str:
    """The pool in words, for messages: the stack alone while it has one pool."""
    if len(cluster.pools) == 1:
        return cluster.stack_name
    return f"pool {cluster.pool_name} of {cluster.stack_name}"


def _validate_pool(spec: JobSpec, cluster: ClusterInfo) -> None:
    """The job fits the pool: its node count, and no gang on Spot."""
    if spec.nodes > cluster.max_nodes:
        raise SettingError(
            Setting("nodes", spec.nodes),
            f": {_where(cluster)} runs at most {cluster.max_nodes} {cluster.instance_type} nodes",
        )
    if spec.nodes > 1 and cluster.current_pool.spot:
        # "Multi-node parallel jobs aren't supported on Spot Instances" (Batch user guide,
        # multi-node-parallel-jobs.html): Batch would keep the job RUNNABLE for ever.
        gangs = [p.name for p in cluster.pools if not p.spot and p.max_nodes >= spec.nodes]
        instead: tuple[str | Setting, ...] = (
            ("use ", Setting("pool", " or ".join(gangs)))
            if gangs
            else ("no pool of it takes a gang",)
        )
        raise SettingError(
            Setting("nodes", spec.nodes),
            f": {_where(cluster)} runs Spot Instances, where AWS Batch runs no multi-node job; ",
            *instead,
            ", or ",
            Setting("nodes", 1),
            Setting("array", "N", aside=" ({} for many single nodes)"),
        )


def share_matches(share_id: str, identifier: str) -> bool:
    """A policy's identifier names one team, or with a trailing ``*`` every team with that
    prefix (botocore ``ShareAttributes.shareIdentifier``)."""
    if identifier.endswith("*"):
        return share_id.startswith(identifier[:-1])
    return share_id == identifier


def _validate_share(spec: JobSpec, cluster: ClusterInfo) -> None:
    """Fair-share fields only for a fair-share queue, and a share id the policy weighs.

    Batch accepts any identifier ("Fair share identifiers that aren't included have a default
    weight of 1.0", botocore ``FairsharePolicy.shareDistribution``): a typo would quietly run
    at the default weight, outside the team's share. So where the stack names teams
    (``share_weights``), the launcher asks for one of them."""
    # A team's job names no share where it has none to name (its queue has no fair share).
    given = spec.share_id is not None or spec.priority is not None
    if not given and (not cluster.share_identifiers or cluster.current_team is not None):
        return
    if not cluster.scheduling_policy_arn:
        raise SettingError(
            Setting("share_id"),
            "/",
            Setting("priority"),
            f": the queue of {_where(cluster)} has no fair-share scheduling policy (deploy with "
            "-c fair_share=true)",
        )
    teams = cluster.share_identifiers
    if not teams:
        return
    named = ", ".join(teams)
    if spec.share_id is None:
        raise SettingError(
            Setting("share_id"),
            f": the fair-share policy of {cluster.stack_name} weighs the teams {named}; name yours",
        )
    if not any(share_matches(spec.share_id, t) for t in teams):
        raise SettingError(
            Setting("share_id", spec.share_id),
            f": the fair-share policy of {cluster.stack_name} weighs {named} (a trailing * is a "
            "prefix); use one of them or ask for a weight",
        )


def _validate_container_settings(spec: JobSpec, cluster: ClusterInfo) -> None:
    """Secrets the stack lets jobs read, privileges it allows, memory the node has."""
    for secret in spec.secrets:
        if not allowed(secret.ref, cluster.job_secrets, cluster.place):
            grants = ", ".join(str(g) for g in cluster.job_secrets) or "none"
            team = cluster.current_team
            whose = (
                f"team {team.name}'s jobs read only secrets under its grants"
                if team
                else f"{cluster.stack_name} lets jobs read only secrets under its job_secrets"
            )
            raise SettingError(
                Setting("secrets", (secret.env, secret.text)), f": {whose}: {grants}"
            )
    memlock = next((u for u in spec.ulimits if u.name == "memlock"), None)
    if spec.efa_on and memlock is not None and (memlock.soft, memlock.hard) != (-1, -1):
        raise UsageError(
            "--ulimit memlock: EFA pins the memory it registers, so memlock stays unlimited "
            "with EFA on (or pass --efa off)"
        )
    if spec.privileged and not cluster.allow_privileged:
        raise SettingError(
            Setting("privileged"),
            f": {cluster.stack_name} does not run privileged containers (deploy with "
            "-c allow_privileged=true: containers then get root on their node)",
        )
    tmpfs_mib = sum(t.size_mib for t in spec.tmpfs)
    if tmpfs_mib >= cluster.memory_mib_per_node:
        raise UsageError(
            f"--tmpfs: {tmpfs_mib} MiB in all; must be below the node's "
            f"{cluster.memory_mib_per_node} MiB of job memory (tmpfs lives in memory)"
        )


def host_mounts_words(mounts: tuple[Mount, ...]) -> str:
    """The first of a job's host mounts as ``--mount`` spells it, and how many more."""
    more = f" (and {len(mounts) - 1} more)" if len(mounts) > 1 else ""
    return f"mount {mounts[0]}{more}"


def check_host_mounts(spec: JobSpec, cluster: ClusterInfo) -> None:
    """On AWS a job mounts its node's paths and devices only where the stack runs privileged
    jobs: through the node's Docker socket a job starts a privileged container of its own, a
    writable ``/`` changes the programs the node runs as root, and a disk device holds every
    other job's files, so each is root on the node (and its instance role's credentials)
    whatever ``--privileged`` says."""
    mounts = spec.host_mounts
    if mounts and not cluster.allow_privileged:
        raise UsageError(
            f"{host_mounts_words(mounts)}: {cluster.stack_name} does not let jobs mount their "
            "node's paths or devices (its Docker socket or / alone are root on the node); "
            "deploy with -c allow_privileged=true to allow them"
        )
