"""Cluster stack: a ``ComputePool`` per pool of the configuration (infra/compute_pool.py: its
launch template, placement group, compute environment and queue) and what the pools share: the
nodes' instance profile and user data, the job and execution roles, the job log group, the
fair-share policy, the copy jobs, the node replacer, and the outputs.

This is the one stack the launcher reads: its outputs (keys from ``launcher.stack.outputs``) hold
everything a job submission needs, including values re-exported from the other stacks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import (
    Acknowledgment,
    CfnDeletionPolicy,
    CfnOutput,
    Stack,
    Validations,
)
from aws_cdk import aws_batch as batch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.compute_pool import ComputePool, pool_construct_id
from infra.config import ClusterConfig
from infra.copy_jobs import CopyJobs
from infra.data_access import attach_managed_policies, grant_buckets, grant_secrets, stack_place
from infra.function_payloads import function_bucket, grant_payloads
from infra.log_groups import job_log_group_name, log_group
from infra.lustre import LustreFileSystem, mount_script
from infra.node_replacer import NodeReplacer
from infra.roles import (
    SSM_MESSAGES,
    execution_role_principal,
    grant_access_point,
    grant_ecs_exec,
    grant_log_streams,
    grant_repository_pull,
    task_role_principal,
)
from infra.teams import Team
from infra.user_data import ecs_agent_settings, mime_multipart
from launcher.stack.outputs import SCHEMA_VERSION, OutputKey

# What SSM Agent needs for Session Manager, and no more: the statement of AWS's managed policy
# for exactly that (AWSCloud9SSMInstanceProfile, AWS managed policy reference; Systems Manager
# user guide, getting-started-create-iam-instance-profile.html, "permissions for Session
# Manager only"). It reads nothing. The ssmmessages channels are also what ECS Exec's agent in
# a job container opens (ecs_exec).
SESSION_MANAGER = ("ssm:UpdateInstanceInformation", *SSM_MESSAGES)

# The ECS agent's settings on every node. Multi-node jobs run in awsvpc mode, whose containers
# reach the instance metadata service (and the instance role's credentials) unless the agent
# blocks it; the task (job) role's credentials come from the agent's own endpoint
# (169.254.170.2, AWS_CONTAINER_CREDENTIALS_RELATIVE_URI) and are not affected (ECS developer
# guide, task-iam-roles.html; amazon-ecs-agent README).
NODE_AGENT_SETTINGS = {"ECS_AWSVPC_BLOCK_IMDS": "true"}


def agent_settings(config: ClusterConfig) -> dict[str, str]:
    """NODE_AGENT_SETTINGS, and no privileged containers unless the stack allows them.

    The agent's default is to run them ("ECS_DISABLE_PRIVILEGED ... default false",
    amazon-ecs-agent README); with it true, the node does not advertise the
    privileged-container capability (agent/app/agent_capability.go), so a privileged job
    submitted past the launcher finds no node instead of root on one.
    """
    settings = dict(NODE_AGENT_SETTINGS)
    if not config.allow_privileged:
        settings["ECS_DISABLE_PRIVILEGED"] = "true"
    return settings


def node_user_data(config: ClusterConfig, lustre: LustreFileSystem | None) -> str:
    """The launch template's user data: the agent's settings, then the FSx mount."""
    parts = [ecs_agent_settings(agent_settings(config))]
    if lustre is not None:
        parts.append(mount_script(lustre.dns_name, lustre.mount_name))
    return mime_multipart(parts)


def _deletion_policy(config: ClusterConfig) -> CfnDeletionPolicy:
    return (
        CfnDeletionPolicy.RETAIN if config.removal_policy == "retain" else CfnDeletionPolicy.DELETE
    )


class ClusterStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ClusterConfig,
        subnet: ec2.ISubnet,
        cluster_security_group: ec2.ISecurityGroup,
        task_security_group: ec2.ISecurityGroup,
        copy_security_group: ec2.ISecurityGroup,
        repository: ecr.IRepository,
        file_system: efs.IFileSystem,
        access_point: efs.IAccessPoint,
        lustre: LustreFileSystem | None,
        logs_key: kms.IKey,
        team_access_points: Mapping[str, efs.IAccessPoint] | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kw)
        it = config.instance
        self.log_group = log_group(
            self,
            "JobLogGroup",
            retention_days=config.log_retention_days,
            log_group_name=job_log_group_name(config),
            key=logs_key,
        )
        instance_profile = self._instance_profile()
        self.execution_role = self._execution_role(config, repository)
        grant_secrets(self.execution_role, config.secret_grants, stack_place(self))
        self.job_role = self._job_role(file_system, access_point)
        grant_buckets(self.job_role, config.data_locations)
        attach_managed_policies(self.job_role, config.job_role_policies)
        if config.ecs_exec:
            grant_ecs_exec(self.job_role)
        # Python functions' payloads: the stack's job role reads and writes functions/ only
        # in a stack without teams; with teams each team's job role its own prefix (Team).
        self.function_bucket = function_bucket(self, config)
        if not config.teams:
            grant_payloads(self.job_role, self.function_bucket, None)

        scheduling_policy = None
        if config.fair_share:
            scheduling_policy = batch.CfnSchedulingPolicy(
                self,
                "FairSharePolicy",
                fairshare_policy=_fairshare_policy(config),
            )
            # Turning fair_share off leaves the old queue (retained, see below) using this policy,
            # and Batch refuses to delete a policy "that's used in any job queues"
            # (DeleteSchedulingPolicy): keep it unless the environment is disposable.
            scheduling_policy.cfn_options.deletion_policy = _deletion_policy(config)
            scheduling_policy.cfn_options.update_replace_policy = _deletion_policy(config)

        user_data = node_user_data(config, lustre)
        self.pools = {
            pool.name: ComputePool(
                self if pool.default else Construct(self, pool_construct_id(pool)),
                pool,
                config.for_pool(pool),
                subnet=subnet,
                security_group=cluster_security_group,
                user_data=user_data,
                powers_off=lustre is not None,
                instance_profile=instance_profile,
            )
            for pool in config.pool_list
        }
        for compute_pool in self.pools.values():
            fallback = compute_pool.pool.fallback
            compute_pool.add_queue(self.pools[fallback] if fallback else None, scheduling_policy)
        default = self.pools[config.default_pool]
        queue, queue_name = default.queue, default.queue_name

        self.copy_jobs = CopyJobs(
            self,
            "Copy",
            config=config,
            subnet=subnet,
            security_group=copy_security_group,
            repository=repository,
            log_group=self.log_group,
        )
        copy = self.copy_jobs
        # The teams (none: the stack's own roles serve every job, as in one-team stacks).
        self.teams = [
            Team(
                self,
                name=name,
                config=config,
                repository=repository,
                file_system=file_system,
                access_point=(team_access_points or {})[name],
                common_access_point=access_point,
                logs_key=logs_key,
                queues=[self.pools[p].queue for p in config.team_pools(name)],
                copy_queue=copy.queue,
                copy_roles=[copy.job_role, copy.execution_role],
                function_bucket=self.function_bucket,
            )
            for name in sorted(config.teams)
        ]
        for team in self.teams:
            # A team's copy jobs log to its own group (launcher/copyjob/plan.py: the team's
            # view), which its users read and the shared copy execution role writes.
            grant_log_streams(copy.execution_role, team.log_group)
        if config.replace_bad_nodes:
            self.node_replacer = NodeReplacer(
                self,
                "NodeReplacer",
                config=config,
                queues=[p.queue for p in self.pools.values()],
                compute_environments=[p.compute_environment for p in self.pools.values()],
                job_log_group=self.log_group,
                logs_key=logs_key,
                team_log_groups=[t.log_group for t in self.teams],
            )

        values = {
            OutputKey.SCHEMA_VERSION: SCHEMA_VERSION,
            OutputKey.REGION: self.region,
            OutputKey.JOB_QUEUE_NAME: queue_name,
            OutputKey.JOB_QUEUE_ARN: queue.ref,
            OutputKey.REPOSITORY_URI: repository.repository_uri,
            OutputKey.FILE_SYSTEM_ID: file_system.file_system_id,
            OutputKey.ACCESS_POINT_ID: access_point.access_point_id,
            OutputKey.JOB_ROLE_ARN: self.job_role.role_arn,
            OutputKey.EXECUTION_ROLE_ARN: self.execution_role.role_arn,
            OutputKey.LOG_GROUP_NAME: self.log_group.log_group_name,
            OutputKey.INSTANCE_TYPE: config.instance_type,
            OutputKey.MAX_NODES: config.max_nodes,
            OutputKey.EFA_INTERFACES: config.efa_interfaces,
            OutputKey.GPUS_PER_NODE: it.gpus,
            OutputKey.VCPUS_PER_NODE: it.vcpus,
            OutputKey.MEMORY_MIB_PER_NODE: it.usable_memory_mib,
            OutputKey.SCHEDULING_POLICY_ARN: scheduling_policy.ref if scheduling_policy else None,
            OutputKey.COPY_QUEUE_ARN: copy.queue.ref,
            OutputKey.COPY_IMAGE: copy.image.image_uri,
            OutputKey.COPY_JOB_ROLE_ARN: copy.job_role.role_arn,
            OutputKey.COPY_EXECUTION_ROLE_ARN: copy.execution_role.role_arn,
            OutputKey.INTERNET_EGRESS: config.internet_egress,
            OutputKey.PULL_THROUGH_CACHE: {
                r.prefix: r.upstream.url_in(self.region) for r in copy.rules
            },
            OutputKey.REGISTRY_SECRETS: dict(config.registry_secrets),
            OutputKey.TASK_SECURITY_GROUP_ID: task_security_group.security_group_id,
            OutputKey.DATA_BUCKETS: config.data_locations,
            OutputKey.JOB_SECRETS: config.secret_grants,
            OutputKey.FSX_FILE_SYSTEM_ID: lustre.file_system.ref if lustre else None,
            OutputKey.ALLOW_PRIVILEGED: config.allow_privileged,
            OutputKey.ECS_EXEC: config.ecs_exec,
            OutputKey.FUNCTION_BUCKET: self.function_bucket.bucket_name,
            OutputKey.DEFAULT_POOL: config.default_pool,
            OutputKey.POOLS: self.to_json_string([p.describe() for p in self.pools.values()]),
            OutputKey.SHARE_IDENTIFIERS: tuple(_share_weights(config)),
            OutputKey.TEAMS: (
                self.to_json_string([t.describe() for t in self.teams]) if self.teams else ()
            ),
        }
        missing = sorted(set(OutputKey) - set(values))
        assert not missing, f"the stack gives no value for outputs {missing}"
        for key, value in values.items():
            CfnOutput(self, key.value, value=key.render(value), description=key.description)

    def _instance_profile(self) -> iam.CfnInstanceProfile:
        """The nodes' role: the ECS agent's managed policy and Session Manager's own statement.

        Single-node jobs run in the host's network (Batch user guide, networking-modes-jobs.html),
        where neither ECS_AWSVPC_BLOCK_IMDS nor the hop limit keeps a container from IMDS: every
        such job may do what this role may. So it gets nothing that reads data or secrets; in
        particular not AmazonSSMManagedInstanceCore, whose ssm:GetParameter(s) on * would hand
        every Parameter Store value to every single-node job, around job_secrets.
        """
        role = iam.Role(
            self,
            "InstanceRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="Batch container instances: ECS agent and SSM Session Manager",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name(
                    "service-role/AmazonEC2ContainerServiceforEC2Role"
                ),
            ],
        )
        role.add_to_policy(iam.PolicyStatement(actions=list(SESSION_MANAGER), resources=["*"]))
        policy = role.node.find_child("DefaultPolicy").node.default_child
        assert isinstance(policy, iam.CfnPolicy)
        policy.add_metadata(
            "checkov",
            {
                "skip": [
                    {
                        "id": "CKV_AWS_111",
                        "comment": "Session Manager's own statement (AWSCloud9SSMInstanceProfile): "
                        "ssmmessages has no resource-level permission; it reads nothing",
                    }
                ]
            },
        )
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                "service-role/AmazonEC2ContainerServiceforEC2Role]",
                reason="AWS maintains the ECS agent's permissions as this policy; a copy would "
                "fall behind new agent features.",
            ),
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="Session Manager's own minimal statement for an instance (as AWS's "
                "AWSCloud9SSMInstanceProfile): ssmmessages has no resource-level permission.",
            ),
        )
        return iam.CfnInstanceProfile(self, "InstanceProfile", roles=[role.role_name])

    def _execution_role(self, config: ClusterConfig, repository: ecr.IRepository) -> iam.Role:
        role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=execution_role_principal(),
            description="Pulls workspace images and writes job logs",
        )
        grant_repository_pull(role, repository, config.extra_pull_repository_arns)
        grant_log_streams(role, self.log_group)
        return role

    def _job_role(self, file_system: efs.IFileSystem, access_point: efs.IAccessPoint) -> iam.Role:
        role = iam.Role(
            self,
            "JobRole",
            assumed_by=task_role_principal(self),
            description="Role of the training containers: EFS through the jobs access point, "
            "the data buckets, the team's managed policies",
        )
        grant_access_point(role, file_system, access_point)
        return role


def _fairshare_policy(config: ClusterConfig) -> batch.CfnSchedulingPolicy.FairsharePolicyProperty:
    """The weights, decay and reservation of the settings (Batch API, FairsharePolicy): a
    change updates the policy in place (its Name and Tags alone are create-only)."""
    SP = batch.CfnSchedulingPolicy
    return SP.FairsharePolicyProperty(
        share_decay_seconds=config.share_decay_seconds,
        compute_reservation=config.compute_reservation,
        share_distribution=[
            SP.ShareAttributesProperty(share_identifier=team, weight_factor=weight)
            for team, weight in sorted(_share_weights(config).items())
        ]
        or None,
    )


def _share_weights(config: ClusterConfig) -> dict[str, float]:
    """The share identifiers the fair-share policy weighs: the teams' (each its name and
    share_weight) or, in a stack without teams, share_weights."""
    if config.teams and config.fair_share:
        return {name: team.share_weight for name, team in sorted(config.teams.items())}
    return dict(config.share_weights)
