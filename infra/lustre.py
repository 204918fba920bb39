"""FSx for Lustre: its settings, the file system in the storage stack, and the nodes' mount.

Off unless ``fsx_lustre`` is set. The file system lives beside EFS in the storage stack (its
lifetime follows ``removal_policy``: retained by default), in the cluster subnet, behind a
group of its own that admits Lustre's ports from the nodes and from itself. Every node mounts
it at boot (``mount_script``, a user-data part that runs before the ECS agent starts), and jobs
get the node's mount point as a bind mount (``launcher.jobdef``).
"""

from __future__ import annotations

import enum
import shlex
from dataclasses import dataclass

from aws_cdk import CfnDeletionPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from constructs import Construct

from launcher.buckets import BucketError, DataBucket
from launcher.jobspec import FSX_NODE_PATH


class LustreError(ValueError):
    """A setting FSx would refuse; the message names it and what is allowed."""


class Deployment(str, enum.Enum):
    PERSISTENT_2 = "PERSISTENT_2"  # replicated in its zone; file servers replaced on failure
    SCRATCH_2 = "SCRATCH_2"  # not replicated: data is lost with a failed server

    def __str__(self) -> str:
        return self.value


# "For SCRATCH_2, PERSISTENT_2, and PERSISTENT_1 deployment types using SSD storage type, the
# valid values are 1200 GiB, 2400 GiB, and increments of 2400 GiB" (FSx API, CreateFileSystem,
# StorageCapacity).
STORAGE_STEP_GIB = 2400
SMALL_SIZES_GIB = (1200, 2400)
# PerUnitStorageThroughput of PERSISTENT_2 SSD: 125, 250, 500 or 1000 MB/s/TiB (FSx API,
# CreateFileSystemLustreConfiguration); a scratch file system takes none.
PERSISTENT_2_THROUGHPUTS = (125, 250, 500, 1000)
# "2.15 is supported by all Lustre deployment types and is recommended for all new file
# systems"; the default is 2.10 (2.12 for PERSISTENT_2), and data repository associations
# need 2.12 or 2.15 (FSx API, CreateFileSystem FileSystemTypeVersion; FSx user guide,
# create-dra-linked-data-repo.html). The version is create-only: set it explicitly.
LUSTRE_VERSION = "2.15"
# Ports the file servers and clients talk on: "allow inbound traffic on ports 988 and
# 1018-1023" (FSx for Lustre user guide, cannot-create-fs.html, limit-access-security-groups).
LUSTRE_PORTS = ((988, 988), (1018, 1023))
# Mount options the FSx guide gives for the current clients: relatime, flock
# (FSx for Lustre user guide, mounting-ec2-instance.html).
MOUNT_OPTIONS = "relatime,flock"
# How long a booting node retries the mount (the file system may still be creating on the
# first deploy) before it gives up and powers off, so Batch launches another node instead of
# running jobs on a node whose /fsx is an empty directory of the root volume.
MOUNT_ATTEMPTS = 30
MOUNT_RETRY_SECONDS = 10
_EVENTS = ["NEW", "CHANGED", "DELETED"]


@dataclass(frozen=True)
class FsxLustre:
    """The ``fsx_lustre`` setting (a JSON object in cdk.json or on ``-c``)."""

    storage_gib: int = 1200
    deployment: str = Deployment.PERSISTENT_2.value
    # None: 125 for PERSISTENT_2 (the lowest tier), none for SCRATCH_2.
    throughput_mibps_per_tib: int | None = None
    # BUCKET/PREFIX linked at the file system's root: files import lazily from it and new or
    # changed files export back to it (a data repository association).
    s3: str | None = None

    @property
    def deployment_type(self) -> Deployment:
        return Deployment(self.deployment)

    @property
    def throughput(self) -> int | None:
        if self.deployment_type is Deployment.SCRATCH_2:
            return None
        return self.throughput_mibps_per_tib or PERSISTENT_2_THROUGHPUTS[0]

    @property
    def repository(self) -> DataBucket | None:
        """The linked location, as a data bucket jobs may read and write directly too."""
        if self.s3 is None:
            return None
        return DataBucket.parse(self.s3.removesuffix(":rw") + ":rw")

    def validate(self) -> FsxLustre:
        try:
            deployment = Deployment(self.deployment)
        except ValueError:
            raise LustreError(
                f"deployment: {self.deployment!r}; allowed: "
                + ", ".join(d.value for d in Deployment)
            ) from None
        size = self.storage_gib
        if size not in SMALL_SIZES_GIB and (size <= 0 or size % STORAGE_STEP_GIB):
            raise LustreError(
                f"storage_gib: {size}; allowed: 1200, 2400 or a multiple of 2400 (FSx "
                f"CreateFileSystem StorageCapacity for {deployment})"
            )
        wanted = self.throughput_mibps_per_tib
        if deployment is Deployment.SCRATCH_2 and wanted is not None:
            raise LustreError(
                f"throughput_mibps_per_tib: {wanted}; a SCRATCH_2 file system takes none "
                "(its throughput follows its size)"
            )
        if (
            deployment is Deployment.PERSISTENT_2
            and wanted is not None
            and (wanted not in PERSISTENT_2_THROUGHPUTS)
        ):
            raise LustreError(
                f"throughput_mibps_per_tib: {wanted}; allowed for PERSISTENT_2: "
                + ", ".join(map(str, PERSISTENT_2_THROUGHPUTS))
            )
        if self.s3 is not None:
            if self.s3.endswith(":ro"):
                raise LustreError(f"s3: {self.s3!r}; the link imports and exports: no :ro")
            try:
                _ = self.repository
            except BucketError as exc:
                raise LustreError(f"s3: {exc}") from None
        return self


def file_system_ports() -> list[ec2.Port]:
    return [
        ec2.Port.tcp(low) if low == high else ec2.Port.tcp_range(low, high)
        for low, high in LUSTRE_PORTS
    ]


class LustreFileSystem(Construct):
    """The file system, its security group and its link to S3 (L1: the version, the link and
    the deletion policy are set exactly, not by a higher-level default)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: FsxLustre,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        client_security_group: ec2.ISecurityGroup,
        retain: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="FSx for Lustre: Lustre ports from cluster nodes and the file servers",
            allow_all_outbound=False,
        )
        group = self.security_group
        clients = client_security_group.security_group_id
        for index, port in enumerate(file_system_ports()):
            group.add_ingress_rule(group, port, "Lustre between the file servers")
            group.add_egress_rule(group, port, "Lustre between the file servers")
            group.add_ingress_rule(client_security_group, port, "Lustre from cluster nodes")
            group.add_egress_rule(client_security_group, port, "Lustre to cluster nodes")
            # The servers connect back to the clients: the nodes' group admits them. Declared
            # at L1 here, so the network stack never depends on this one.
            low, high = LUSTRE_PORTS[index]
            ec2.CfnSecurityGroupIngress(
                self,
                f"NodesFromFileServers{low}",
                group_id=clients,
                source_security_group_id=group.security_group_id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                description="Lustre from the FSx file servers",
            )
        self.file_system = fsx.CfnFileSystem(
            self,
            "FileSystem",
            file_system_type="LUSTRE",
            file_system_type_version=LUSTRE_VERSION,
            storage_capacity=settings.storage_gib,
            storage_type="SSD",
            # One subnet, the nodes' own: "all Lustre deployment types, provide exactly one
            # subnet ID. The file server is launched in that subnet's Availability Zone" (FSx
            # API, CreateFileSystem SubnetIds); nodes in the same zone avoid cross-zone traffic.
            subnet_ids=[subnet.subnet_id],
            security_group_ids=[group.security_group_id],
            lustre_configuration=fsx.CfnFileSystem.LustreConfigurationProperty(
                deployment_type=settings.deployment,
                per_unit_storage_throughput=settings.throughput,
            ),
        )
        policy = CfnDeletionPolicy.RETAIN if retain else CfnDeletionPolicy.DELETE
        self.file_system.cfn_options.deletion_policy = policy
        self.file_system.cfn_options.update_replace_policy = policy
        repository = settings.repository
        if repository is not None:
            # Import and export both ways at the file system's root (FSx API,
            # AutoImportPolicy/AutoExportPolicy Events: NEW, CHANGED, DELETED). Automatic
            # import needs the bucket in the file system's Region (FSx user guide,
            # create-dra-linked-data-repo.html).
            fsx.CfnDataRepositoryAssociation(
                self,
                "S3Link",
                file_system_id=self.file_system.ref,
                file_system_path="/",
                data_repository_path=repository.uri,
                batch_import_meta_data_on_create=True,
                s3=fsx.CfnDataRepositoryAssociation.S3Property(
                    auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(
                        events=_EVENTS
                    ),
                    auto_export_policy=fsx.CfnDataRepositoryAssociation.AutoExportPolicyProperty(
                        events=_EVENTS
                    ),
                ),
            )

    @property
    def dns_name(self) -> str:
        return self.file_system.attr_dns_name

    @property
    def mount_name(self) -> str:
        return self.file_system.attr_lustre_mount_name


def mount_script(dns_name: str, mount_name: str) -> str:
    """A user-data part: install the Lustre client, mount the file system at FSX_NODE_PATH.

    The client comes from the AMI's own package repository ("sudo dnf install -y
    lustre-client", FSx user guide, install-lustre-client.html), so its version is the one
    for the AMI's kernel: "Each new AL2023 AMI is locked to a particular version of AL2023"
    (AL2023 user guide, deterministic-upgrades-usage.html); Batch moves nodes to a new AMI on
    an infrastructure update. Shell parts run in cloud-final, and the ECS agent's unit starts
    "After=cloud-final.service" (amazon-ecs-agent, packaging/.../ecs.service): no job starts
    before the mount is there. A node that cannot mount powers off instead of serving jobs an
    empty directory.
    """
    source = f"{dns_name}@tcp:/{mount_name}"
    target = shlex.quote(FSX_NODE_PATH)
    return (
        "#!/bin/bash\n"
        "set -u\n"
        "dnf install -y lustre-client || { echo 'lustre-client: install failed'; poweroff; "
        "exit 1; }\n"
        f"mkdir -p {target}\n"
        f"for attempt in $(seq {MOUNT_ATTEMPTS}); do\n"
        f"  mount -t lustre -o {MOUNT_OPTIONS} {source} {target} && break\n"
        f"  sleep {MOUNT_RETRY_SECONDS}\n"
        "done\n"
        f"mountpoint -q {target} || {{ echo 'FSx for Lustre: mount failed'; poweroff; "
        "exit 1; }\n"
        f"chmod 1777 {target}\n"
    )
