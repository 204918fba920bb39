"""Where a job's container sees storage: the cluster's EFS and FSx for Lustre, the node's paths
and devices it binds (``--mount``), as Batch's volumes, mount points and devices.

A team's job (``ClusterInfo.current_team``) mounts its team's EFS access point (root
/teams/NAME) at the usual EFS path and, unless the team's ``common`` is none, the stack's
access point (the common directory) at ``COMMON_PATH``, read-only unless ``common`` is rw;
its FSx path is the team's directory of the node's mount (``fsx=own``), the whole mount
(``all``) or nothing (``none``). Batch RegisterJobDefinition, EFSVolumeConfiguration:
"authorizationConfig: The authorization configuration details for the Amazon EFS file
system", EFSAuthorizationConfig.accessPointId: "If an access point is specified, the root
directory value specified in the EFSVolumeConfiguration must either be omitted or set to /
which enforces the path set on the EFS access point"; MountPoint.readOnly: "If this
value is true, the container has read-only access to the volume."

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
from launcher.stack.teams import COMMON_PATH, Common, FsxAccess, fsx_team_directory

FSX_VOLUME = "fsx"  # the volume of the node's FSx for Lustre mount (the local backend's cue)
COMMON_VOLUME = "common"  # a team's job: the stack's common EFS directory


def efs_path(spec: JobSpec, group: NodeGroup | None = None) -> str:
    """Where the job (the node range ``group``) sees the cluster's EFS."""
    mounts = spec.mounts_of(group)
    return next((m.dst for m in mounts if m.kind is MountKind.EFS), DEFAULT_EFS_PATH)


def fsx_path(spec: JobSpec, cluster: ClusterInfo, group: NodeGroup | None = None) -> str | None:
    """Where the job (the node range ``group``) sees the cluster's FSx for Lustre file system
    (None: the stack has none, or the job's team does not see it)."""
    team = cluster.current_team
    if not cluster.fsx_file_system_id or (team is not None and team.fsx is FsxAccess.NONE):
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
    team = cluster.current_team
    volumes = [_efs_volume("efs", cluster, team.access_point_id if team else None)]
    mount_points = [
        {
            "sourceVolume": "efs",
            "containerPath": efs.dst if efs else DEFAULT_EFS_PATH,
            "readOnly": bool(efs and efs.readonly),
        }
    ]
    if team is not None and team.common is not Common.NONE:
        volumes.append(_efs_volume(COMMON_VOLUME, cluster, None))
        mount_points.append(
            {
                "sourceVolume": COMMON_VOLUME,
                "containerPath": COMMON_PATH,
                "readOnly": team.common is not Common.RW,
            }
        )
    fsx = fsx_path(spec, cluster, group)
    if fsx is not None:
        # The node mounted the file system at boot (infra/lustre.py): the job binds it, a
        # team's job (fsx=own) its team's directory of it. ECS host volumes: "If the
        # sourcePath value doesn't exist on the host container instance, the Docker daemon
        # creates it" (ECS API HostVolumeProperties.sourcePath), so a team's first job finds
        # its directory there, made by the daemon.
        fsx_mount = next((m for m in mounts if m.kind is MountKind.FSX), None)
        source = FSX_NODE_PATH
        if team is not None and team.fsx is FsxAccess.OWN:
            source = FSX_NODE_PATH.rstrip("/") + fsx_team_directory(team.name)
        volumes.append({"name": FSX_VOLUME, "host": {"sourcePath": source}})
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


def _efs_volume(name: str, cluster: ClusterInfo, access_point_id: str | None) -> dict[str, Any]:
    """An EFS volume through an access point (None: the stack's, the common directory), with
    IAM authorization, so the job's role decides what it may do there."""
    point = access_point_id or cluster.access_point_id
    return {
        "name": name,
        "efsVolumeConfiguration": {
            "fileSystemId": cluster.file_system_id,
            "transitEncryption": "ENABLED",
            "authorizationConfig": {"accessPointId": point, "iam": "ENABLED"},
        },
    }
