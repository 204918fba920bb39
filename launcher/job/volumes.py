"""Where a job's container sees storage: the cluster's EFS and FSx for Lustre, the node's paths
and devices it binds (``--mount``), as Batch's volumes, mount points and devices.

The paths are also what the environment tells the prelude (``launcher.job.environment``), so
they sit here, below both.
"""

from __future__ import annotations

from typing import Any

from launcher.job.jobspec import (
    DEFAULT_EFS_PATH,
    DEFAULT_FSX_PATH,
    FSX_NODE_PATH,
    JobSpec,
    MountKind,
    NodeGroup,
)
from launcher.stack.cluster import ClusterInfo

FSX_VOLUME = "fsx"  # the volume of the node's FSx for Lustre mount (the local backend's cue)


def efs_path(spec: JobSpec, group: NodeGroup | None = None) -> str:
    """Where the job (the node range ``group``) sees the cluster's EFS."""
    mounts = spec.mounts_of(group)
    return next((m.dst for m in mounts if m.kind is MountKind.EFS), DEFAULT_EFS_PATH)


def fsx_path(spec: JobSpec, cluster: ClusterInfo, group: NodeGroup | None = None) -> str | None:
    """Where the job (the node range ``group``) sees the cluster's FSx for Lustre file system
    (None: the stack has none)."""
    if not cluster.fsx_file_system_id:
        return None
    mounts = spec.mounts_of(group)
    return next((m.dst for m in mounts if m.kind is MountKind.FSX), DEFAULT_FSX_PATH)


def storage(
    spec: JobSpec, cluster: ClusterInfo, group: NodeGroup | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The container's volumes, their mount points, and the node's devices it gets: the
    mounts of its node range (``group``), which are the job's unless the range has its own."""
    mounts = spec.mounts_of(group)
    efs = next((m for m in mounts if m.kind is MountKind.EFS), None)
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
    fsx = fsx_path(spec, cluster, group)
    if fsx is not None:
        # The node mounted the file system at boot (infra/lustre.py): the job binds it.
        fsx_mount = next((m for m in mounts if m.kind is MountKind.FSX), None)
        volumes.append({"name": FSX_VOLUME, "host": {"sourcePath": FSX_NODE_PATH}})
        mount_points.append(
            {
                "sourceVolume": FSX_VOLUME,
                "containerPath": fsx,
                "readOnly": bool(fsx_mount and fsx_mount.readonly),
            }
        )
    devices: list[dict[str, Any]] = []
    binds = [m for m in mounts if m.kind is MountKind.BIND]
    for index, mount in enumerate(binds):
        volumes.append({"name": f"bind{index}", "host": {"sourcePath": mount.src}})
        mount_points.append(
            {"sourceVolume": f"bind{index}", "containerPath": mount.dst, "readOnly": mount.readonly}
        )
    for mount in mounts:
        if mount.kind is MountKind.DEVICE:
            devices.append(
                {
                    "hostPath": mount.src,
                    "containerPath": mount.dst,
                    "permissions": list(mount.permissions),
                }
            )
    return volumes, mount_points, devices
