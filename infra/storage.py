"""Stateful stack: the workspace image repository and the shared file system.

Kept apart from the compute so that replacing a compute environment or a launch template can
never replace data; termination protection and RETAIN (by default) guard it further.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_efs as efs
from constructs import Construct

from infra.config import ClusterConfig

# Where jobs land on the file system; the access point confines them to it.
ACCESS_POINT_PATH = "/shared"
# Files written by jobs belong to this user unless the image runs as someone else.
JOB_UID_GID = "1000"


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
        **kw,
    ) -> None:
        super().__init__(scope, construct_id, termination_protection=True, **kw)
        removal = (
            RemovalPolicy.RETAIN if config.removal_policy == "retain" else RemovalPolicy.DESTROY
        )

        self.repository = ecr.Repository(
            self,
            "WorkspaceRepository",
            image_scan_on_push=True,
            # The AWS-managed aws/ecr KMS key: auditable in CloudTrail, no key to manage.
            encryption=ecr.RepositoryEncryption.KMS,
            # Launcher tags are content hashes: a tag never needs to move, so it never may.
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            lifecycle_rules=[
                ecr.LifecycleRule(
                    description=f"Keep the newest {config.keep_images} workspace images",
                    max_image_count=config.keep_images,
                )
            ],
            removal_policy=removal,
            empty_on_delete=False,
        )

        self.file_system_security_group = ec2.SecurityGroup(
            self,
            "FileSystemSecurityGroup",
            vpc=vpc,
            description="EFS mount target: NFS from cluster nodes only",
            allow_all_outbound=False,
        )
        self.file_system_security_group.add_ingress_rule(
            cluster_security_group, ec2.Port.tcp(2049), "NFS from cluster nodes"
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
        )
        self.access_point = self.file_system.add_access_point(
            "JobsAccessPoint",
            path=ACCESS_POINT_PATH,
            posix_user=efs.PosixUser(uid=JOB_UID_GID, gid=JOB_UID_GID),
            create_acl=efs.Acl(owner_uid=JOB_UID_GID, owner_gid=JOB_UID_GID, permissions="0775"),
        )
