"""Pure request building: (job spec, cluster) -> the exact boto3 keyword arguments.

No I/O here: ``launcher run --dryrun`` prints what these functions return, and the tests
compare dicts and validate them against the botocore service model.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from secrets import token_hex
from typing import TYPE_CHECKING, Any

from launcher.errors import UsageError
from launcher.job.jobspec import (
    DEFAULT_EFS_PATH,
    DEFAULT_FSX_PATH,
    FSX_NODE_PATH,
    EfaMode,
    JobSpec,
    Mount,
    MountKind,
    NodeGroup,
)
from launcher.job.replacements import is_replacer_tag
from launcher.job.shapes import is_single, single_container
from launcher.node import prelude
from launcher.stack.cluster import ClusterInfo
from launcher.stack.secrets import allowed

if TYPE_CHECKING:
    from launcher.job.info import GroupInfo

EFA_DEVICE = "/dev/infiniband/uverbs{}"
ULIMITS = (
    # EFA registers (pins) memory for RDMA: without an unlimited memlock, libfabric fails.
    {"name": "memlock", "softLimit": -1, "hardLimit": -1},
    {"name": "stack", "softLimit": 67108864, "hardLimit": 67108864},
    {"name": "nofile", "softLimit": 1048576, "hardLimit": 1048576},
)
RETRY_ON_HOST_LOSS = (
    # Instance loss (reclaimed, failed status checks) of the main node is worth another
    # attempt. Batch retries a multi-node job only when the main node fails ("Child node
    # failures don't cause more attempts"), so a worker's loss reaches these rules through
    # the main node's prelude, which ends it with NODE_LOST_EXIT (launcher.node.prelude).
    {"onStatusReason": "Host EC2*", "action": "RETRY"},
    {"onExitCode": str(prelude.NODE_LOST_EXIT), "action": "RETRY"},
    # A node's health or fabric check found its host bad: try again, elsewhere (the stack's
    # node replacer takes the instance out of the pool).
    {"onExitCode": str(prelude.BAD_HOST_EXIT), "action": "RETRY"},
    # An application failure is not.
    {"onReason": "*", "action": "EXIT"},
)
JOB_DEFINITION_PREFIX = "efa-batch"
FSX_VOLUME = "fsx"  # the volume of the node's FSx for Lustre mount (the local backend's cue)


@dataclass(frozen=True)
class Requests:
    register: dict[str, Any]
    submit: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"registerJobDefinition": self.register, "submitJob": self.submit}


# NCCL's bootstrap interfaces on AWS: any but loopback, Docker's bridges and veths, and ECS's.
AWS_NCCL_INTERFACES = "^lo,docker,veth,ecs"


def efa_environment(spec: JobSpec, cluster: ClusterInfo) -> dict[str, str]:
    """EFA/NCCL defaults for the node type; each can be overridden with ``--env``."""
    if spec.efa is None or not spec.efa.on:
        return {}
    env = {
        # Read by the prelude's userspace check (launcher.node.prelude).
        "LAUNCHER_EFA": spec.efa.value,
        "LAUNCHER_EFA_DEVICES": str(cluster.efa_interfaces),
        "FI_PROVIDER": "efa",
        # NCCL's bootstrap must use the task's own interface (eth0): not loopback, Docker's
        # bridges or veths, nor ECS's link-local ecs-eth0 (169.254.172.0/22) that awsvpc tasks
        # get beside it, which other nodes cannot reach (ECS guide, task-networking-awsvpc).
        "NCCL_SOCKET_IFNAME": AWS_NCCL_INTERFACES,
        # INFO for init and the network goes to files the prelude watches: the job log gets
        # NCCL's warnings and one line naming the transport, not every rank's INFO lines.
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,NET",
        "NCCL_DEBUG_FILE": f"{prelude.NCCL_LOG_DIR}/%h.%p.log",
    }
    instance = cluster.instance
    if instance is not None and instance.gpudirect_rdma:
        env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    return env


def container_command(spec: JobSpec, gpus: int, group: NodeGroup | None = None) -> list[str]:
    command = list(group.command if group and group.command else spec.command)
    if spec.torchrun:
        # Master address, port and node rank come from the PET_* variables of the prelude.
        command = [
            "torchrun",
            f"--nnodes={spec.nodes}",
            f"--nproc-per-node={max(gpus, 1)}",
            *command,
        ]
    return prelude.command(command)


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
    stays a demand."""
    cluster = cluster.pool(spec.pool)
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
    spec, cluster = in_pool(spec, cluster)
    _validate_pool(spec, cluster)
    if spec.efa_on and cluster.efa_interfaces == 0:
        raise UsageError(
            f"--efa {spec.efa}: {cluster.stack_name} has no EFA interfaces "
            f"({cluster.instance_type}); use --efa off"
        )
    if spec.shm_mib is not None and spec.shm_mib >= cluster.memory_mib_per_node:
        raise UsageError(
            f"--shm-size {spec.shm_mib}MiB: must be below the node's "
            f"{cluster.memory_mib_per_node} MiB of job memory"
        )
    _validate_share(spec, cluster)
    for group in (None, *spec.groups):
        resolve_gpus(spec, cluster, group)  # raises for more GPUs than a node has
    for kind in (MountKind.EFS, MountKind.FSX):
        if len([m for m in spec.mounts if m.kind is kind]) > 1:
            raise UsageError(f"--mount type={kind}: give the cluster's {kind} one mount point")
    if not cluster.fsx_file_system_id and any(m.kind is MountKind.FSX for m in spec.mounts):
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
        raise UsageError(
            f"--nodes {spec.nodes}: {_where(cluster)} runs at most {cluster.max_nodes} "
            f"{cluster.instance_type} nodes"
        )
    if spec.nodes > 1 and cluster.current_pool.spot:
        # "Multi-node parallel jobs aren't supported on Spot Instances" (Batch user guide,
        # multi-node-parallel-jobs.html): Batch would keep the job RUNNABLE for ever.
        gangs = [p.name for p in cluster.pools if not p.spot and p.max_nodes >= spec.nodes]
        instead = f"use --pool {' or '.join(gangs)}" if gangs else "no pool of it takes a gang"
        raise UsageError(
            f"--nodes {spec.nodes}: {_where(cluster)} runs Spot Instances, where AWS Batch runs "
            f"no multi-node job; {instead}, or --nodes 1 (--array N for many single nodes)"
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
    if spec.share_id is None and spec.priority is None and not cluster.share_identifiers:
        return
    if not cluster.scheduling_policy_arn:
        raise UsageError(
            f"--share-id/--priority: the queue of {_where(cluster)} has no fair-share "
            "scheduling policy (deploy with -c fair_share=true)"
        )
    teams = cluster.share_identifiers
    if not teams:
        return
    named = ", ".join(teams)
    if spec.share_id is None:
        raise UsageError(
            f"--share-id: the fair-share policy of {cluster.stack_name} weighs the teams "
            f"{named}; name yours"
        )
    if not any(share_matches(spec.share_id, t) for t in teams):
        raise UsageError(
            f"--share-id {spec.share_id}: the fair-share policy of {cluster.stack_name} weighs "
            f"{named} (a trailing * is a prefix); use one of them or ask for a weight"
        )


def _validate_container_settings(spec: JobSpec, cluster: ClusterInfo) -> None:
    """Secrets the stack lets jobs read, privileges it allows, memory the node has."""
    for secret in spec.secrets:
        if not allowed(secret.ref, cluster.job_secrets, cluster.place):
            grants = ", ".join(str(g) for g in cluster.job_secrets) or "none"
            raise UsageError(
                f"--secret {secret.env}={secret.text}: {cluster.stack_name} lets jobs read only "
                f"secrets under its job_secrets: {grants}"
            )
    memlock = next((u for u in spec.ulimits if u.name == "memlock"), None)
    if spec.efa_on and memlock is not None and (memlock.soft, memlock.hard) != (-1, -1):
        raise UsageError(
            "--ulimit memlock: EFA pins the memory it registers, so memlock stays unlimited "
            "with EFA on (or pass --efa off)"
        )
    if spec.privileged and not cluster.allow_privileged:
        raise UsageError(
            f"--privileged: {cluster.stack_name} does not run privileged containers "
            "(deploy with -c allow_privileged=true: containers then get root on their node)"
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


def efs_path(spec: JobSpec) -> str:
    """Where the job sees the cluster's EFS."""
    return next((m.dst for m in spec.mounts if m.kind is MountKind.EFS), DEFAULT_EFS_PATH)


def fsx_path(spec: JobSpec, cluster: ClusterInfo) -> str | None:
    """Where the job sees the cluster's FSx for Lustre file system (None: the stack has none)."""
    if not cluster.fsx_file_system_id:
        return None
    return next((m.dst for m in spec.mounts if m.kind is MountKind.FSX), DEFAULT_FSX_PATH)


def _volumes(
    spec: JobSpec, cluster: ClusterInfo
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    efs = next((m for m in spec.mounts if m.kind is MountKind.EFS), None)
    volumes = [
        {
            "name": "efs",
            "efsVolumeConfiguration": {
                "fileSystemId": cluster.file_system_id,
                "transitEncryption": "ENABLED",
                "authorizationConfig": {"accessPointId": cluster.access_point_id, "iam": "ENABLED"},
            },
        }
    ]
    mount_points = [
        {
            "sourceVolume": "efs",
            "containerPath": efs.dst if efs else DEFAULT_EFS_PATH,
            "readOnly": bool(efs and efs.readonly),
        }
    ]
    fsx = fsx_path(spec, cluster)
    if fsx is not None:
        # The node mounted the file system at boot (infra/lustre.py): the job binds it.
        fsx_mount = next((m for m in spec.mounts if m.kind is MountKind.FSX), None)
        volumes.append({"name": FSX_VOLUME, "host": {"sourcePath": FSX_NODE_PATH}})
        mount_points.append(
            {
                "sourceVolume": FSX_VOLUME,
                "containerPath": fsx,
                "readOnly": bool(fsx_mount and fsx_mount.readonly),
            }
        )
    devices: list[dict[str, Any]] = []
    binds = [m for m in spec.mounts if m.kind is MountKind.BIND]
    for index, mount in enumerate(binds):
        volumes.append({"name": f"bind{index}", "host": {"sourcePath": mount.src}})
        mount_points.append(
            {"sourceVolume": f"bind{index}", "containerPath": mount.dst, "readOnly": mount.readonly}
        )
    for mount in spec.mounts:
        if mount.kind is MountKind.DEVICE:
            devices.append(
                {
                    "hostPath": mount.src,
                    "containerPath": mount.dst,
                    "permissions": list(mount.permissions),
                }
            )
    return volumes, mount_points, devices


def environment(
    spec: JobSpec, cluster: ClusterInfo, gpus: int, group: NodeGroup | None = None
) -> dict[str, str]:
    env = efa_environment(spec, cluster)
    if spec.single_node:
        # A container job runs in the instance's network namespace (Batch user guide,
        # networking-modes-jobs: "ECS-EC2 simple job | host"): its rendezvous, if torchrun
        # wants one, is this host; no other node will ask for it.
        env["LAUNCHER_MAIN_ADDR"] = "127.0.0.1"
    env.update(
        {
            "LAUNCHER_NNODES": str(spec.nodes),
            "LAUNCHER_GPUS_PER_NODE": str(gpus),
            # Named in the prelude's health and fabric lines, to say which host fell short.
            "LAUNCHER_INSTANCE_TYPE": cluster.instance_type,
            "LAUNCHER_MAIN_PORT": str(spec.rendezvous_port),
            "LAUNCHER_EFS": efs_path(spec),
        }
    )
    fsx = fsx_path(spec, cluster)
    if fsx is not None:
        env["LAUNCHER_FSX"] = fsx
    if spec.restarts_on:
        env["LAUNCHER_RESTARTS"] = "on"
    if spec.groups and group is not None:
        env["LAUNCHER_GROUP_FIRST_NODE"] = str(group.first)  # the prelude's replica id
        if group.name:
            env["LAUNCHER_GROUP"] = group.name
    env.update(dict(spec.env))  # the user's --env wins over every default
    if group is not None:
        env.update(dict(group.env))
    return env


def container_properties(
    spec: JobSpec, cluster: ClusterInfo, group: NodeGroup | None = None
) -> dict[str, Any]:
    gpus = resolve_gpus(spec, cluster, group)
    volumes, mount_points, devices = _volumes(spec, cluster)
    if spec.efa_on:
        devices = [
            {
                "hostPath": EFA_DEVICE.format(i),
                "containerPath": EFA_DEVICE.format(i),
                "permissions": ["READ", "WRITE", "MKNOD"],
            }
            for i in range(cluster.efa_interfaces)
        ] + devices
    instance = cluster.instance
    shm = spec.shm_mib or (
        instance.default_shm_mib if instance else cluster.memory_mib_per_node // 4
    )
    resources = [
        {"type": "VCPU", "value": str(cluster.vcpus_per_node)},
        {"type": "MEMORY", "value": str(cluster.memory_mib_per_node)},
    ]
    if gpus:
        resources.append({"type": "GPU", "value": str(gpus)})
    env = environment(spec, cluster, gpus, group)
    linux: dict[str, Any] = {"sharedMemorySize": shm, "initProcessEnabled": True}
    if devices:
        linux["devices"] = devices
    if spec.tmpfs:
        linux["tmpfs"] = [{"containerPath": t.dst, "size": t.size_mib} for t in spec.tmpfs]
    extra: dict[str, Any] = {}
    if spec.secrets:
        # References only: the ECS agent reads each value with the execution role when the
        # container starts (Batch ContainerProperties.secrets); no value is in this request.
        extra["secrets"] = [
            {"name": s.env, "valueFrom": s.ref.value_from(cluster.place)} for s in spec.secrets
        ]
    if spec.privileged:
        extra["privileged"] = True
    extra |= exec_properties(cluster)
    return {
        "image": group.image if group and group.image else spec.image,
        "command": container_command(spec, gpus, group),
        "jobRoleArn": cluster.job_role_arn,
        "executionRoleArn": cluster.execution_role_arn,
        "instanceType": cluster.instance_type,
        "resourceRequirements": resources,
        "environment": [{"name": k, "value": v} for k, v in sorted(env.items())],
        "ulimits": ulimits(spec),
        "linuxParameters": linux,
        "volumes": volumes,
        "mountPoints": mount_points,
        "logConfiguration": {
            "logDriver": "awslogs",
            "options": {
                "awslogs-group": cluster.log_group_name,
                "awslogs-region": cluster.region,
                "awslogs-stream-prefix": spec.name,
            },
        },
        **extra,
    }


def exec_properties(cluster: ClusterInfo) -> dict[str, Any]:
    """ECS Exec into the nodes (``launcher exec``) where the stack turned it on (its output
    EcsExec; the job role then has the SSM messages permissions the container's agent needs).
    ContainerProperties.enableExecuteCommand: "If true, execute command functionality is turned
    on all the containers in the task" (botocore batch model); the ECS guide (ecs-exec.html)
    recommends initProcessEnabled beside it, which every node has already. Off, the request and
    so the definition's name (its content hash) are as they were before the setting existed."""
    return {"enableExecuteCommand": True} if cluster.ecs_exec else {}


def ulimits(spec: JobSpec) -> list[dict[str, Any]]:
    """The launcher's limits (ULIMITS), each replaced by the job's own of the same name."""
    mine: dict[str, dict[str, Any]] = {u.name: dict(u.as_batch()) for u in spec.ulimits}
    merged = [mine.pop(str(u["name"]), dict(u)) for u in ULIMITS]
    return merged + [mine[name] for name in sorted(mine)]


def definition_name(body: dict[str, Any]) -> str:
    """Named by a hash of the content: registering the same job twice finds the first."""
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    return f"{JOB_DEFINITION_PREFIX}-{digest[:32]}"


def _multinode(spec: JobSpec, cluster: ClusterInfo) -> dict[str, Any]:
    return {
        "type": "multinode",
        "nodeProperties": {
            "numNodes": spec.nodes,
            "mainNode": 0,
            "nodeRangeProperties": [
                {"targetNodes": "0:", "container": container_properties(spec, cluster)}
            ]
            if not spec.groups
            else [
                {
                    "targetNodes": f"{g.first}:{g.last}",
                    "container": container_properties(spec, cluster, g),
                }
                for g in sorted(spec.groups, key=lambda g: g.first)
            ],
        },
    }


def _container_job(spec: JobSpec, cluster: ClusterInfo) -> dict[str, Any]:
    """One node: ``type: container`` (botocore RegisterJobDefinitionRequest.type: "If the value
    is container, then one of the following is required: containerProperties, ..."), with the
    same image, devices, mounts, secrets, limits and environment as a node of a gang."""
    container = container_properties(spec, cluster, spec.groups[0] if spec.groups else None)
    # ContainerProperties.instanceType: "This parameter isn't applicable to single-node
    # container jobs ... and shouldn't be provided." The queue's compute environment runs the
    # cluster's type only, so the job lands on it all the same.
    del container["instanceType"]
    return {"type": "container", "containerProperties": container}


def build(spec: JobSpec, cluster: ClusterInfo) -> Requests:
    validate(spec, cluster)
    spec, cluster = in_pool(spec, cluster)
    body = _container_job(spec, cluster) if spec.single_node else _multinode(spec, cluster)
    body |= {
        "retryStrategy": {
            "attempts": spec.attempts,
            "evaluateOnExit": [dict(rule) for rule in RETRY_ON_HOST_LOSS],
        },
        "propagateTags": True,
        "platformCapabilities": ["EC2"],
    }
    if spec.timeout_seconds is not None:
        # Per attempt, and for an array per child: "The timeout specified in the
        # attemptDurationSeconds parameter applies to each child job" (array_jobs.html).
        body["timeout"] = {"attemptDurationSeconds": spec.timeout_seconds}
    name = definition_name(body)
    register = {"jobDefinitionName": name, **body}
    submit: dict[str, Any] = {
        "jobName": spec.name,
        "jobQueue": cluster.job_queue_arn,
        "jobDefinition": name,
        "propagateTags": True,
        "tags": {"efa-batch:stack": cluster.stack_name, **dict(spec.tags)},
    }
    if not spec.single_node:
        submit["nodeOverrides"] = node_overrides(body, [watch_token()])
    if spec.array_size is not None:
        submit["arrayProperties"] = {"size": spec.array_size}
    if spec.after:
        submit["dependsOn"] = [d.as_batch() for d in spec.after]
    if cluster.scheduling_policy_arn:
        submit["shareIdentifier"] = spec.share_id or "default"
        if spec.priority is not None:
            submit["schedulingPriorityOverride"] = spec.priority
    return Requests(register, submit)


def watch_token() -> dict[str, str]:
    """A new token for the prelude's node watch (launcher.node.prelude), as an environment entry
    of a submit's overrides.

    It goes with each submit, not into the definition: definitions are named by their content
    and registered once for every submit of the same job (``definition_name``), so a token there
    would be every such job's, and a new one would register a new definition with each submit.
    Batch starts every attempt of a job with its submit's overrides, so every node of every
    attempt holds the same token; a resubmission is a new job with a new one."""
    return {"name": prelude.WATCH_TOKEN_ENV, "value": token_hex(32)}


def node_overrides(definition: dict[str, Any], environment: list[dict[str, str]]) -> dict[str, Any]:
    """SubmitJob ``nodeOverrides`` giving ``environment`` to each node range of a multi-node
    definition (or job), named as the definition names it."""
    return {
        "nodePropertyOverrides": [
            {"targetNodes": r["targetNodes"], "containerOverrides": {"environment": environment}}
            for r in definition["nodeProperties"]["nodeRangeProperties"]
        ]
    }


def with_overrides(definition: dict[str, Any], submit: dict[str, Any]) -> dict[str, Any]:
    """A job definition in ``nodeProperties`` form (``as_one_node``) with a submit's environment
    overrides in its containers, as Batch applies them when each node starts: for the local
    backend, which runs the definition itself."""
    result = definition
    if "containerOverrides" in submit:  # a container job's, now its one node's
        result = with_environment(result, _override_env(submit["containerOverrides"]))
    ranges = [r["targetNodes"] for r in result["nodeProperties"]["nodeRangeProperties"]]
    for override in submit.get("nodeOverrides", {}).get("nodePropertyOverrides", []):
        if override["targetNodes"] not in ranges:
            raise UsageError(
                f"nodeOverrides: targetNodes {override['targetNodes']} is none of the job "
                f"definition's node ranges ({', '.join(ranges)})"
            )
        env = _override_env(override.get("containerOverrides", {}))
        result = with_environment(result, env, override["targetNodes"])
    return result


def _override_env(overrides: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in overrides.get("environment", [])}


def node_ranges(definition: dict[str, Any]) -> list[tuple[tuple[int, int], dict[str, Any]]]:
    """((first, last), container) for each node range of a job definition (or a job); a
    container job is its own one node."""
    if is_single(definition):
        return [((0, 0), single_container(definition))]
    props = definition["nodeProperties"]
    last_node = props["numNodes"] - 1
    ranges = []
    for node_range in props["nodeRangeProperties"]:
        first, _, last = node_range["targetNodes"].partition(":")
        bounds = (int(first or 0), int(last) if last else last_node)
        ranges.append((bounds, node_range["container"]))
    return ranges


def as_one_node(register: dict[str, Any], parameters: dict[str, str]) -> dict[str, Any]:
    """A container job (a copy job) as a one-node job, for code that runs both kinds one way
    (the local backend), with its ``Ref::NAME`` command arguments replaced by the submitted
    parameters, or the definition's defaults, as Batch does."""
    if "nodeProperties" in register:
        return register
    values = {**register.get("parameters", {}), **parameters}
    container = dict(register["containerProperties"])
    container["command"] = [
        values.get(arg[len("Ref::") :], arg) if arg.startswith("Ref::") else arg
        for arg in container.get("command", [])
    ]
    rest = {k: v for k, v in register.items() if k != "containerProperties"}
    return {
        **rest,
        "nodeProperties": {
            "numNodes": 1,
            "mainNode": 0,
            "nodeRangeProperties": [{"targetNodes": "0:", "container": container}],
        },
    }


def with_environment(
    definition: dict[str, Any], env: dict[str, str], target_nodes: str | None = None
) -> dict[str, Any]:
    """A copy of a job definition with ``env`` set in every node range's container (or only in
    the range named ``target_nodes``)."""
    import copy

    result = copy.deepcopy(definition)
    for node_range in result["nodeProperties"]["nodeRangeProperties"]:
        if target_nodes is not None and node_range["targetNodes"] != target_nodes:
            continue
        container = node_range["container"]
        merged = {e["name"]: e["value"] for e in container.get("environment", [])} | env
        container["environment"] = [{"name": k, "value": v} for k, v in sorted(merged.items())]
    return result


CHECKPOINT_TAG = "efa-batch:checkpoint"


def resumption(job: dict[str, Any], job_id: str) -> tuple[str, dict[str, str]]:
    """The checkpoint directory a resubmission of ``job`` continues in, and the tags it gets:
    the job's own plus the directory, so that resubmitting the resubmission finds it again
    (a job's tags come back from DescribeJobs as they were submitted). The node replacer's
    record of the old job's attempts stays with the old job: on the new one it would name
    attempts that never ran, and take one of its 50 tags."""
    tags = {k: v for k, v in (job.get("tags") or {}).items() if not is_replacer_tag(k)}
    checkpoint = tags.get(CHECKPOINT_TAG) or checkpoint_dir(job, job_id)
    return checkpoint, {**tags, CHECKPOINT_TAG: checkpoint}


def checkpoint_dir(definition: dict[str, Any], job_id: str) -> str:
    """Where a job's attempts keep their checkpoints (the prelude's default, unless the job
    was itself a resubmission and carries its first job's directory)."""
    (_, container), *_ = node_ranges(definition)
    env: dict[str, str] = {e["name"]: e["value"] for e in container.get("environment", [])}
    if "LAUNCHER_CHECKPOINT_DIR" in env:
        return env["LAUNCHER_CHECKPOINT_DIR"]
    return f"{env.get('LAUNCHER_EFS', DEFAULT_EFS_PATH)}/checkpoints/{job_id}"


def groups_of(definition: dict[str, Any]) -> tuple[GroupInfo, ...]:
    """The node groups of a job definition (or a job), named after their ``LAUNCHER_GROUP``."""
    from launcher.job.info import GroupInfo

    groups = []
    for (first, last), container in node_ranges(definition):
        env = {e["name"]: e["value"] for e in container.get("environment", [])}
        name = env.get("LAUNCHER_GROUP") or (
            "main" if len(node_ranges(definition)) == 1 else f"{first}-{last}"
        )
        groups.append(GroupInfo(name, first, last, container.get("image")))
    return tuple(groups)
