"""The variables every node of a job starts with: EFA and NCCL's defaults for the node type,
and what the prelude reads (node count, GPUs, rendezvous port, EFS and FSx paths, restarts,
node group), with the user's ``--env`` over all of them.

The prelude (``launcher.node.prelude``) is the reader of the ``LAUNCHER_*`` names.
"""

from __future__ import annotations

from launcher.job.jobspec import JobSpec, NodeGroup
from launcher.job.volumes import efs_path, fsx_path
from launcher.node import prelude
from launcher.stack.cluster import ClusterInfo

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
            "LAUNCHER_EFS": efs_path(spec, group),
        }
    )
    fsx = fsx_path(spec, cluster, group)
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
