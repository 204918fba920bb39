"""Stateful stack: the workspace image repository and the shared file systems.

Kept apart from the compute so that replacing a compute environment or a launch template can
never replace data; termination protection and RETAIN (by default) guard it further.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Annotations, Duration, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.config import ClusterConfig
from infra.data_config import link_exports, widened_by_link
from infra.lustre import LustreFileSystem
from infra.team_config import team_construct_name, team_uid
from launcher.stack.image_tags import BASE_PREFIX, WORKSPACE_PREFIX
from launcher.stack.teams import efs_team_directory

# Where jobs land on the file system; the access point confines them to it.
ACCESS_POINT_PATH = "/shared"
# Files written by jobs belong to this user unless the image runs as someone else.
JOB_UID_GID = "1000"
# A team's own directory: its uid/gid alone may read, enter and write it; the group may read.
TEAM_DIRECTORY_PERMISSIONS = "0750"


class StorageStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ClusterConfig,
        vpc: ec2.IVpc,
        subnet: ec2.ISubnet,
        cluster_security_group: ec2.ISecurityGroup,
        task_security_group: ec2.ISecurityGroup,
        **kw: Any,
    ) -> None:
        # A disposable environment (removal_policy=destroy) must come down with `cdk destroy`:
        # termination protection, and a repository that still holds images (ECR refuses to
        # delete one unless forced: EmptyOnDelete), would stop it.
        disposable = config.removal_policy == "destroy"
        super().__init__(scope, construct_id, termination_protection=not disposable, **kw)
        removal = RemovalPolicy.DESTROY if disposable else RemovalPolicy.RETAIN

        self.repository = ecr.Repository(
            self,
            "WorkspaceRepository",
            image_scan_on_push=True,
            encryption=repository_encryption(config),
            # Launcher tags are content hashes: a tag never needs to move, so it never may.
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            lifecycle_rules=lifecycle_rules(config),
            removal_policy=removal,
            empty_on_delete=disposable,
        )

        self.file_system_security_group = ec2.SecurityGroup(
            self,
            "FileSystemSecurityGroup",
            vpc=vpc,
            description="EFS mount target: NFS from cluster nodes and job tasks only",
            allow_all_outbound=False,
        )
        self.file_system_security_group.add_ingress_rule(
            cluster_security_group, ec2.Port.tcp(2049), "NFS from cluster nodes"
        )
        # Jobs mount EFS from their own (awsvpc) task interface, which is in the task group.
        self.file_system_security_group.add_ingress_rule(
            task_security_group, ec2.Port.tcp(2049), "NFS from job task interfaces"
        )
        self.file_system = efs.FileSystem(
            self,
            "SharedFileSystem",
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnets=[subnet]),
            security_group=self.file_system_security_group,
            encrypted=True,
            enable_automatic_backups=True,
            performance_mode=efs.PerformanceMode.GENERAL_PURPOSE,
            throughput_mode=efs.ThroughputMode.ELASTIC,
            removal_policy=removal,
            file_system_policy=file_system_policy(),
            # CDK's own "deny anonymous" statement would grant ClientWrite and ClientRootAccess
            # to every principal; the policy above is what closes anonymous access.
            allow_anonymous_access=True,
        )
        # FSx for Lustre, when configured: beside EFS, with the same lifetime rules.
        self.lustre = (
            LustreFileSystem(
                self,
                "Lustre",
                settings=config.fsx_lustre,
                export=link_exports(config.data_buckets, config.fsx_lustre),
                vpc=vpc,
                subnet=subnet,
                client_security_group=cluster_security_group,
                retain=not disposable,
            )
            if config.fsx_lustre
            else None
        )
        widened = widened_by_link(config.data_buckets, config.fsx_lustre)
        if self.lustre is not None and widened is not None:
            Annotations.of(self.lustre).add_warning_v2(
                "efa-batch:fsx-export-widens",
                f"fsx_lustre.export: true makes {widened} writable under "
                f"{config.fsx_lustre.s3 if config.fsx_lustre else ''}: the link writes new, "
                "changed and deleted files back, and the job role may write there",
            )
        self.access_point = self.file_system.add_access_point(
            "JobsAccessPoint",
            path=ACCESS_POINT_PATH,
            posix_user=efs.PosixUser(uid=JOB_UID_GID, gid=JOB_UID_GID),
            create_acl=efs.Acl(owner_uid=JOB_UID_GID, owner_gid=JOB_UID_GID, permissions="0775"),
        )
        self.team_access_points = {
            name: team_access_point(self.file_system, name, team_uid(name, team))
            for name, team in sorted(config.teams.items())
        }


def team_access_point(file_system: efs.FileSystem, team: str, uid: int) -> efs.AccessPoint:
    """A team's own directory (efs_team_directory) as its uid/gid, created 0750.

    An access point "enforces a user identity ... for all file system requests" made through
    it and "exposes the specified directory as the root" (EFS user guide,
    efs-access-points.html): a team's jobs, mounting through theirs, see only their
    directory and act as their uid, and the file system policy refuses any mount without an
    access point (file_system_policy).
    """
    ids = str(uid)
    return file_system.add_access_point(
        f"TeamAccessPoint{team_construct_name(team)}",
        path=efs_team_directory(team),
        posix_user=efs.PosixUser(uid=ids, gid=ids),
        create_acl=efs.Acl(owner_uid=ids, owner_gid=ids, permissions=TEAM_DIRECTORY_PERMISSIONS),
    )


def lifecycle_rules(config: ClusterConfig) -> list[ecr.LifecycleRule]:
    """Each kind of image by its age, so what a job may still pull stays.

    A count ("the newest 50") let a busy day expire the image of a job still queued, of a
    Batch retry or of a `launcher resubmit`. Workspace images (``ws-``) and copied bases
    (``base-``) expire a number of days after their push, each rule owning its kind: "An image
    that matches the tagging requirements of a rule cannot be expired by a rule with a lower
    priority" (ECR user guide, LifecyclePolicies.html). Images without a tag (none of the
    launcher's) go after a day; anything else pushed by hand keeps the newest keep_images, in
    the one rule of tag status "any", which "must have the highest value for rulePriority".
    Layers a live image uses stay whatever happens to a base's own tag.
    """
    return [
        ecr.LifecycleRule(
            rule_priority=1,
            description=f"Workspace images: {config.workspace_image_days} days after push",
            tag_status=ecr.TagStatus.TAGGED,
            tag_prefix_list=[WORKSPACE_PREFIX],
            max_image_age=Duration.days(config.workspace_image_days),
        ),
        ecr.LifecycleRule(
            rule_priority=2,
            description=f"Copied bases: {config.base_image_days} days after push",
            tag_status=ecr.TagStatus.TAGGED,
            tag_prefix_list=[BASE_PREFIX],
            max_image_age=Duration.days(config.base_image_days),
        ),
        ecr.LifecycleRule(
            rule_priority=3,
            description="Untagged images: a day after push",
            tag_status=ecr.TagStatus.UNTAGGED,
            max_image_age=Duration.days(1),
        ),
        ecr.LifecycleRule(
            rule_priority=4,
            description=f"Anything else: the newest {config.keep_images}",
            tag_status=ecr.TagStatus.ANY,
            max_image_count=config.keep_images,
        ),
    ]


def repository_encryption(config: ClusterConfig) -> ecr.RepositoryEncryption:
    """AES256 (ECR's default) unless kms is asked for; KMS means the AWS managed key aws/ecr.

    ECR mounts a base's layers from another repository of the registry only when both use
    "identical encryption type and keys" (ECR user guide, blob-mounting.html). Ordinary
    repositories use ECR's default, AES256, so a workspace repository on AES256 can mount
    their layers; on KMS it mounts only from repositories on the same key. ECR fixes a
    repository's encryption when it creates it: changing this setting on a deployed stack
    replaces the (unnamed) repository.
    """
    if config.repository_encryption == "kms":
        return ecr.RepositoryEncryption.KMS
    return ecr.RepositoryEncryption.AES_256


def file_system_policy() -> iam.PolicyDocument:
    """Without a file system policy, EFS grants full access to any client that reaches a mount
    target, IAM or not (EFS user guide, iam-access-control-nfs-efs.html, "Default EFS file
    system policy"). With one, only principals whose IAM policies allow it may mount (the job
    role: through the access point), and these denials hold for everyone:

    - no connection without TLS;
    - no mount except through an access point, which maps every client to uid/gid 1000 and
      confines it to /shared (mounting the root would expose everything);
    - no root access: nothing the jobs do needs uid 0 on the file system.
    """
    everyone = [iam.AnyPrincipal()]
    client = ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"]
    return iam.PolicyDocument(
        statements=[
            iam.PolicyStatement(
                sid="DenyWithoutTls",
                effect=iam.Effect.DENY,
                principals=everyone,
                actions=["*"],
                resources=["*"],
                conditions={"Bool": {"aws:SecureTransport": "false"}},
            ),
            iam.PolicyStatement(
                sid="DenyMountWithoutAccessPoint",
                effect=iam.Effect.DENY,
                principals=everyone,
                actions=client,
                resources=["*"],
                conditions={"Null": {"elasticfilesystem:AccessPointArn": "true"}},
            ),
            iam.PolicyStatement(
                sid="DenyRootAccess",
                effect=iam.Effect.DENY,
                principals=everyone,
                actions=["elasticfilesystem:ClientRootAccess"],
                resources=["*"],
            ),
        ]
    )
