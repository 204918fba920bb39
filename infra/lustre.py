"""FSx for Lustre: its settings, the file system in the storage stack, and the nodes' mount.

Off unless ``fsx_lustre`` is set. The file system lives beside EFS in the storage stack (its
lifetime follows ``removal_policy``: retained by default), in the cluster subnet, behind a
group of its own that admits Lustre's ports from the nodes and from itself. Every node mounts
it at every boot, before the ECS agent starts (``mount_script``: a user-data part that installs
a systemd unit), and jobs get the node's mount point as a bind mount (``launcher.job.jobdef``).
"""

from __future__ import annotations

import enum
import re
import shlex
from dataclasses import dataclass

from aws_cdk import Annotations, CfnDeletionPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from constructs import Construct

from launcher.job.jobspec import FSX_NODE_PATH
from launcher.stack.buckets import BucketError, DataBucket


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
# How long a booting node retries the mount (a file server may be restarting in its maintenance
# window) before it gives up and powers off, so Batch launches another node instead of running
# jobs on a node whose /fsx is an empty directory of the root volume.
MOUNT_ATTEMPTS = 30
MOUNT_RETRY_SECONDS = 10
_EVENTS = ["NEW", "CHANGED", "DELETED"]
# An absolute path of printable characters, no empty parts, no trailing slash ("/" alone is
# the root). FSx takes up to 4096 characters (CreateDataRepositoryAssociation FileSystemPath).
_LINK_PATH = re.compile(r"^(/|(/[\x21-\x2e\x30-\x7e]+)+)$")


def link_path_of(repository: DataBucket) -> str:
    """The default directory of an S3 link: /BUCKET/PREFIX, the location's own name.

    CloudFormation replaces an association whose paths change by creating the new one before
    deleting the old, and FSx refuses two associations whose file system paths overlap ("/"
    overlaps all, and only "the first data repository associated with a file system" may use
    it: FSx API, CreateDataRepositoryAssociation FileSystemPath). Named for its location, a
    new link lands beside the old one, so changing s3 works in one deploy unless one location
    lies inside the other.
    """
    return f"/{repository.bucket}" + (f"/{repository.prefix}" if repository.prefix else "")


@dataclass(frozen=True)
class FsxLustre:
    """The ``fsx_lustre`` setting (a JSON object in cdk.json or on ``-c``)."""

    storage_gib: int = 1200
    deployment: str = Deployment.PERSISTENT_2.value
    # None: 125 for PERSISTENT_2 (the lowest tier), none for SCRATCH_2.
    throughput_mibps_per_tib: int | None = None
    # BUCKET/PREFIX linked to a directory of the file system: files import lazily from it and
    # new or changed files export back to it (a data repository association).
    s3: str | None = None
    # That directory (jobs see it under /fsx); None: /BUCKET/PREFIX, so a new location links
    # beside the old one in one deploy (see link_path_of).
    link_path: str | None = None
    # Whether the link writes back to S3 (its AutoExportPolicy: new, changed and deleted files)
    # and the job role may write the location. None: yes, unless data_buckets lists the
    # location read-only (infra/data_config.link_exports), so :ro stays read-only.
    export: bool | None = None

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

    @property
    def file_system_path(self) -> str | None:
        """Where the S3 link appears in the file system, or None without one."""
        repository = self.repository
        if repository is None:
            return None
        return self.link_path or link_path_of(repository)

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
                raise LustreError(
                    f"s3: {self.s3!r}; no :ro here: for a link that writes nothing back, set "
                    "fsx_lustre.export to false (or list the location :ro in data_buckets)"
                )
            try:
                DataBucket.parse(self.s3)  # the user's own text in any refusal
                _ = self.repository
            except BucketError as exc:
                raise LustreError(f"s3: {exc}") from None
        if self.export is not None and self.s3 is None:
            raise LustreError(
                f"export: {str(self.export).lower()} without s3; export is whether the S3 "
                "link writes back: set s3 too"
            )
        if self.link_path is not None:
            if self.s3 is None:
                raise LustreError(f"link_path: {self.link_path!r} without s3; set s3 too")
            if not _LINK_PATH.match(self.link_path) or {".", ".."} & set(self.link_path.split("/")):
                raise LustreError(
                    f"link_path: {self.link_path!r}; allowed: / or an absolute path such as "
                    "/datasets (no spaces, //, . or .. parts)"
                )
        return self


def link_words(settings: FsxLustre, export: bool) -> str:
    """What the S3 link adds, as synth says it. FSx exports a file's deletion as a deletion of
    its object ("DELETED ... Amazon FSx automatically deletes the corresponding object in the
    linked data repository", FSx for Lustre user guide, autoexport-data-repo-dra.html); without
    an export policy nothing written on the file system reaches S3 (FSx API,
    S3DataRepositoryConfiguration AutoExportPolicy)."""
    repository = settings.repository
    assert repository is not None
    where = f"{FSX_NODE_PATH}{settings.file_system_path}".replace("//", "/")
    location = f"{repository.bucket}/{repository.prefix}".rstrip("/")
    if export:
        return (
            f"fsx_lustre.s3: jobs read and write {repository.uri} through {where}; the link "
            "writes new, changed and deleted files back to it (NEW, CHANGED, DELETED: a file "
            f"deleted there deletes its object), and the job role may write {location}"
        )
    return (
        f"fsx_lustre.s3: jobs read {repository.uri} through {where}; read-only: no export "
        "(fsx_lustre.export is false, or data_buckets lists it :ro): files written there stay "
        f"on the file system, and the link gives the job role no write on {location}"
    )


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
        export: bool,
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
        repository, path = settings.repository, settings.file_system_path
        if repository is not None and path is not None:
            # Import (and with export, export) at the link's directory (FSx API,
            # AutoImportPolicy/AutoExportPolicy Events: NEW, CHANGED, DELETED). Automatic
            # import needs the bucket in the file system's Region (FSx user guide,
            # create-dra-linked-data-repo.html). The S3 property updates in place (it is not
            # among the association's createOnlyProperties), so turning export on or off
            # keeps the link.
            export_policy = (
                fsx.CfnDataRepositoryAssociation.AutoExportPolicyProperty(events=_EVENTS)
                if export
                else None
            )
            Annotations.of(self).add_info(link_words(settings, export))
            fsx.CfnDataRepositoryAssociation(
                self,
                "S3Link",
                file_system_id=self.file_system.ref,
                file_system_path=path,
                data_repository_path=repository.uri,
                batch_import_meta_data_on_create=True,
                s3=fsx.CfnDataRepositoryAssociation.S3Property(
                    auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(
                        events=_EVENTS
                    ),
                    auto_export_policy=export_policy,
                ),
            )

    @property
    def dns_name(self) -> str:
        return self.file_system.attr_dns_name

    @property
    def mount_name(self) -> str:
        return self.file_system.attr_lustre_mount_name


# The unit that mounts the file system at every boot, and the script it runs.
MOUNT_UNIT = "efa-batch-fsx.service"
MOUNTER = "/usr/local/sbin/efa-batch-mount-fsx"
# The ECS agent's drop-in: it starts only after the mount, and only with /fsx mounted.
AGENT_DROP_IN = "/etc/systemd/system/ecs.service.d/efa-batch-fsx.conf"


def mounter(dns_name: str, mount_name: str) -> str:
    """The script that mounts FSx at FSX_NODE_PATH, retrying, or powers the node off.

    A node that cannot mount must not serve jobs an empty directory of its root volume: it
    powers off, which terminates it (the launch template's InstanceInitiatedShutdownBehavior),
    and Batch launches another. The line it prints reaches the serial console, so
    `aws ec2 get-console-output` shows why a node went.
    """
    source = f"{dns_name}@tcp:/{mount_name}"
    target = shlex.quote(FSX_NODE_PATH)
    return (
        "#!/bin/bash\n"
        f"# Mounts FSx for Lustre at {target} before the ECS agent, at every boot ({MOUNT_UNIT}).\n"
        "set -u\n"
        f"for attempt in $(seq {MOUNT_ATTEMPTS}); do\n"
        f"  mountpoint -q {target} && break\n"
        f"  mkdir -p {target}\n"
        f"  mount -t lustre -o {MOUNT_OPTIONS} {source} {target} && break\n"
        f"  sleep {MOUNT_RETRY_SECONDS}\n"
        "done\n"
        f"if ! mountpoint -q {target}; then\n"
        f"  echo 'FSx for Lustre: cannot mount {source} at {target}; this node powers off and "
        "terminates' >&2\n"
        "  poweroff\n"
        "  exit 1\n"
        "fi\n"
        f"chmod 1777 {target}\n"
    )


def mount_unit() -> str:
    """The systemd unit that runs the mounter at every boot, before the ECS agent.

    It is ordered after the network and before ecs.service, never after cloud-final (the
    first boot starts it from cloud-final itself). Its output goes to the console too.
    """
    return (
        "[Unit]\n"
        f"Description=FSx for Lustre at {FSX_NODE_PATH}, before the ECS agent\n"
        "Wants=network-online.target\n"
        "After=network-online.target\n"
        "Before=ecs.service\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        f"ExecStart={MOUNTER}\n"
        "StandardOutput=journal+console\n"
        "StandardError=journal+console\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def agent_drop_in() -> str:
    """What the ECS agent's unit gains: it needs the mount unit, starts after it, and checks
    /fsx is a mount point before each start (its Restart=on-failure tries again every 10 s).

    RequiresMountsFor= ties the agent to /fsx's mount once systemd sees it (the mounter makes
    it; no fstab line, whose boot-time mount would race the mounter and, failing once, fail
    the agent for good). An unmounted /fsx stops the agent: no job lands on the root volume.
    """
    return (
        "[Unit]\n"
        f"Requires={MOUNT_UNIT}\n"
        f"After={MOUNT_UNIT}\n"
        f"RequiresMountsFor={FSX_NODE_PATH}\n"
        "\n"
        "[Service]\n"
        f"ExecStartPre=/usr/bin/mountpoint -q {FSX_NODE_PATH}\n"
    )


def mount_script(dns_name: str, mount_name: str) -> str:
    """A user-data part: install the Lustre client and mount the file system at FSX_NODE_PATH
    now and at every later boot, before the ECS agent starts.

    The client comes from the AMI's own package repository ("sudo dnf install -y
    lustre-client", FSx user guide, install-lustre-client.html), so its version is the one
    for the AMI's kernel: "Each new AL2023 AMI is locked to a particular version of AL2023"
    (AL2023 user guide, deterministic-upgrades-usage.html); Batch moves nodes to a new AMI on
    an infrastructure update. User-data scripts run once per instance (cloud-init's
    scripts_user, frequency PER_INSTANCE), so the mount itself is a systemd unit enabled for
    every boot: after a maintenance reboot a node mounts again before its agent takes a job
    (FSx user guide, mount-fs-auto-mount-onreboot.html, mounts at boot too). Shell parts run in
    cloud-final and the agent's unit starts "After=cloud-final.service" (amazon-ecs-agent,
    packaging/amazon-linux-ami-integrated/ecs.service), so on the first boot the unit has run
    before the agent starts.
    """
    files = (
        (MOUNTER, mounter(dns_name, mount_name), "755"),
        (f"/etc/systemd/system/{MOUNT_UNIT}", mount_unit(), "644"),
        (AGENT_DROP_IN, agent_drop_in(), "644"),
    )
    lines = [
        "#!/bin/bash",
        "set -u",
        "dnf install -y lustre-client || { echo 'lustre-client: install failed'; poweroff; "
        "exit 1; }",
    ]
    for path, text, mode in files:
        lines += [
            f"mkdir -p {shlex.quote(path.rsplit('/', 1)[0])}",
            f"cat > {shlex.quote(path)} <<'EFABATCH'",
            text.rstrip("\n"),
            "EFABATCH",
            f"chmod {mode} {shlex.quote(path)}",
        ]
    lines += ["systemctl daemon-reload", f"systemctl enable --now {MOUNT_UNIT}"]
    return "\n".join(lines) + "\n"
