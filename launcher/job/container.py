"""One node's container as Batch's ContainerProperties: image, command, resources, devices
(EFA's first), limits, shared memory, secrets by reference, ECS Exec, logs, and the storage
and environment of ``launcher.job.volumes`` and ``launcher.job.environment``.

A node group (``NodeGroup``) may give its own image, command, GPUs and variables; the rest is
the job's. ``launcher.job.jobdef`` places one container per node range.
"""

from __future__ import annotations

from typing import Any

from launcher.job.environment import environment
from launcher.job.jobspec import JobSpec, NodeGroup
from launcher.job.validation import resolve_gpus
from launcher.job.volumes import storage
from launcher.node import prelude
from launcher.stack.cluster import ClusterInfo

EFA_DEVICE = "/dev/infiniband/uverbs{}"

ULIMITS = (
    # EFA registers (pins) memory for RDMA: without an unlimited memlock, libfabric fails.
    {"name": "memlock", "softLimit": -1, "hardLimit": -1},
    {"name": "stack", "softLimit": 67108864, "hardLimit": 67108864},
    {"name": "nofile", "softLimit": 1048576, "hardLimit": 1048576},
)


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


def container_properties(
    spec: JobSpec, cluster: ClusterInfo, group: NodeGroup | None = None
) -> dict[str, Any]:
    gpus = resolve_gpus(spec, cluster, group)
    volumes, mount_points, devices = storage(spec, cluster, group)
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
