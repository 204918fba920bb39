"""A team of a shared stack (``teams``, infra/team_config.py): its job role, execution role,
log group and the managed policy its users get. Its EFS access point is the file system's
(infra/storage.py ``team_access_point``); the cluster stack (infra/cluster.py) makes one
``Team`` per team and puts what each holds in the Teams output (``Team.describe``).

The roles hold the team's own grants and the stack-wide ones (data_buckets, job_secrets), and
nothing of another team's; the job role and the user policy reach the team's prefix of the
function bucket (infra/function_payloads.py), never another's. The user policy
(``user_statements``) lets the team's users do what docs/security.md's table "What the
launcher's user needs in IAM" lists, narrowed to the team.
Its Batch statements rest on the Service Authorization Reference for AWS Batch
(list_awsbatch.html): SubmitJob's resources are the job queue and the job definition, and
it takes the condition keys ``batch:ShareIdentifier``, ``aws:RequestTag/${TagKey}`` and
``aws:TagKeys``; the ``job`` resource type (``job/${JobId}``), which TerminateJob, CancelJob
and TagResource act on, takes ``aws:ResourceTag/${TagKey}``. The Batch user guide shows
``batch:ShareIdentifier`` on SubmitJob (iam-example-share-identifier.html), and a job's tags
at submission authorize ``batch:TagResource`` too (tag-resources.html, "tagging on creation").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Acknowledgment, ArnFormat, Stack, Validations
from aws_cdk import aws_batch as batch
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.config import ClusterConfig
from infra.data_access import attach_managed_policies, grant_buckets, grant_secrets, stack_place
from infra.function_payloads import USER_ACTIONS, grant_payloads, payload_finding, payload_statement
from infra.log_groups import log_group, team_log_group_name
from infra.roles import (
    execution_role_principal,
    grant_access_point,
    grant_ecs_exec,
    grant_log_streams,
    grant_repository_pull,
    log_group_finding,
    task_role_principal,
)
from infra.team_config import TeamConfig, team_construct_name
from launcher.stack import buckets, secrets
from launcher.stack.teams import TEAM_TAG, Common, FsxAccess, team_definition_prefix

# The launcher's copy job definitions (launcher/copyjob/plan.py) are named with this prefix; a
# team's job definitions with launcher.stack.teams.team_definition_prefix.
COPY_DEFINITION_PREFIX = "efa-batch-copy-"
# What the launcher reads that has no resource-level permission (Service Authorization
# Reference: no resource type for these actions), and reads only.
READ_ANY = (
    "batch:DescribeJobs",
    "batch:ListJobs",
    "batch:DescribeJobDefinitions",
    "batch:DescribeJobQueues",
    "batch:DescribeComputeEnvironments",
    "ec2:DescribeSecurityGroupRules",
    "ec2:DescribeCapacityReservations",
    "ecr:GetAuthorizationToken",
)
IMAGE_PUSH_PULL = (
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:GetDownloadUrlForLayer",
    "ecr:InitiateLayerUpload",
    "ecr:UploadLayerPart",
    "ecr:CompleteLayerUpload",
    "ecr:PutImage",
    "ecr:ListImages",
)


class Team(Construct):
    """One team's roles, log group and user policy."""

    def __init__(
        self,
        scope: Construct,
        *,
        name: str,
        config: ClusterConfig,
        repository: ecr.IRepository,
        file_system: efs.IFileSystem,
        access_point: efs.IAccessPoint,
        common_access_point: efs.IAccessPoint,
        logs_key: kms.IKey,
        queues: Sequence[batch.CfnJobQueue],
        copy_queue: batch.CfnJobQueue,
        copy_roles: Sequence[iam.IRole],
        function_bucket: s3.IBucket,
    ) -> None:
        super().__init__(scope, f"Team{team_construct_name(name)}")
        stack = Stack.of(self)
        team: TeamConfig = config.teams[name]
        self.name = name
        self.settings = team
        self.pools = config.team_pools(name)
        self.access_point = access_point
        self.fair_share = config.fair_share
        self.fsx = FsxAccess(team.fsx) if config.fsx_lustre else FsxAccess.NONE
        # The FSx link's S3 location is the file system's: a team that may not use FSx gets
        # only the stack-wide buckets, not the location the link reads (and exports to).
        shared = (
            buckets.parse_all(config.data_buckets)
            if self.fsx is FsxAccess.NONE
            else config.data_locations
        )
        self.data_buckets = tuple(dict.fromkeys((*buckets.parse_all(team.data_buckets), *shared)))
        self.job_secrets = tuple(
            dict.fromkeys(secrets.parse_grants((*team.secrets, *config.job_secrets)))
        )
        self.log_group = log_group(
            self,
            "LogGroup",
            retention_days=config.log_retention_days,
            log_group_name=team_log_group_name(config, name),
            key=logs_key,
        )

        self.execution_role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=execution_role_principal(),
            description=f"Team {name}: pulls workspace images, writes its job logs, reads its "
            "secrets",
        )
        grant_repository_pull(self.execution_role, repository, config.extra_pull_repository_arns)
        grant_log_streams(self.execution_role, self.log_group)
        grant_secrets(self.execution_role, self.job_secrets, stack_place(stack))

        self.job_role = iam.Role(
            self,
            "JobRole",
            assumed_by=task_role_principal(stack),
            description=f"Team {name}'s training containers: its EFS directory, the common "
            "one, its data buckets and managed policies",
        )
        grant_access_point(self.job_role, file_system, access_point)
        common = Common(team.common)
        if common is not Common.NONE:
            grant_access_point(
                self.job_role, file_system, common_access_point, write=common is Common.RW
            )
        grant_buckets(self.job_role, self.data_buckets)
        grant_payloads(self.job_role, function_bucket, name)
        attach_managed_policies(self.job_role, team.job_role_policies)
        if config.ecs_exec:
            grant_ecs_exec(self.job_role)

        self.user_policy = iam.ManagedPolicy(
            self,
            "UserPolicy",
            description=f"{config.stack_name}: what team {name}'s users may do with the "
            "launcher: submit to its pools as its share, pass its roles, read its logs, end "
            "its jobs",
            statements=user_statements(
                stack,
                name=name,
                fair_share=config.fair_share,
                queues=[q.ref for q in queues],
                roles=[self.job_role.role_arn, self.execution_role.role_arn],
                log_group_arn=self.log_group.log_group_arn,
                repository_arn=repository.repository_arn,
                copy_queue=copy_queue.ref,
                copy_roles=[r.role_arn for r in copy_roles],
            )
            + [payload_statement(function_bucket, name, USER_ACTIONS, sid="FunctionCalls")],
        )
        self._acknowledge_user_policy(stack)
        Validations.of(self.user_policy).acknowledge(payload_finding(function_bucket, name))

    def _acknowledge_user_policy(self, stack: Stack) -> None:
        def any_of(service: str, resource: str) -> str:
            return (
                f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:{service}:{stack.region}:"
                f"{stack.account}:{resource}]"
            )

        Validations.of(self.user_policy).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="Describe/List reads and ecr:GetAuthorizationToken, which support no "
                "resource-level permission (Service Authorization Reference); they read only.",
            ),
            Acknowledgment(
                id=any_of("batch", f"job-definition/{team_definition_prefix(self.name)}*"),
                reason="The team's job definitions, named by content at run time; the roles "
                "in them are the team's own (iam:PassRole).",
            ),
            Acknowledgment(
                id=any_of("batch", f"job-definition/{COPY_DEFINITION_PREFIX}*"),
                reason="The launcher's copy job definitions, named by content at run time.",
            ),
            Acknowledgment(
                id=any_of("batch", "job/*"),
                reason=f"Jobs exist at run time; only those tagged {TEAM_TAG}={self.name} "
                "(aws:ResourceTag, aws:RequestTag conditions).",
            ),
            Acknowledgment(
                id=any_of("cloudformation", f"stack/{stack.stack_name}/*"),
                reason="The cluster stack (its id ends in a UUID); DescribeStacks only.",
            ),
            Acknowledgment(
                id=log_group_finding(self.log_group),
                reason="The team's own log group (its ARN ends in :*); read only.",
            ),
        )

    def describe(self) -> dict[str, Any]:
        """The team as the Teams output gives it (launcher.stack.teams.TeamInfo)."""
        return {
            "name": self.name,
            "share_id": self.name,
            "pools": list(self.pools),
            "job_role_arn": self.job_role.role_arn,
            "execution_role_arn": self.execution_role.role_arn,
            "access_point_id": self.access_point.access_point_id,
            "common": Common(self.settings.common).value,
            "log_group_name": self.log_group.log_group_name,
            "data_buckets": [str(b) for b in self.data_buckets],
            "job_secrets": [str(g) for g in self.job_secrets],
            "fsx": self.fsx.value,
            "user_policy_arn": self.user_policy.managed_policy_arn,
        }


def user_statements(
    stack: Stack,
    *,
    name: str,
    fair_share: bool,
    queues: list[str],
    roles: list[str],
    log_group_arn: str,
    repository_arn: str,
    copy_queue: str,
    copy_roles: list[str],
) -> list[iam.PolicyStatement]:
    """A team's users' statements (module docstring: the Batch actions and condition keys).

    - SubmitJob: the team's queues and the team's job definitions (team_definition_prefix:
      SubmitJob names no role, so another team's definition would run with its roles), only
      with the request
      tag TEAM_TAG=NAME, and with fair share only as the team's share identifier
      (``batch:ShareIdentifier``). A StringEquals on a key the request lacks does not match
      (IAM user guide, reference_policies_condition-single-vs-multi-valued-context-keys), so
      a submission without the tag or the share is refused.
    - TagResource on jobs: the tags given at submission, TEAM_TAG=NAME among them; never on
      another team's job (StringEqualsIfExists on the job's own TEAM_TAG).
    - TerminateJob, CancelJob: jobs tagged TEAM_TAG=NAME (aws:ResourceTag).
    - iam:PassRole: the team's two roles, and the shared copy jobs' two; as the Batch user
      guide's example (iam-example-job-def.html) does, with no iam:PassedToService condition,
      which AWS documents for neither Batch nor its ECS tasks (one IAM did not meet would stop
      every registration).
    - logs: FilterLogEvents and GetLogEvents on the team's log group alone.
    - copy jobs (bases copied into the workspace repository): the copy queue with the copy
      job definitions; reads without resource-level permission; the workspace repository.
    """
    team_tag = {f"aws:RequestTag/{TEAM_TAG}": name}
    submit_conditions: dict[str, Any] = {"StringEquals": dict(team_tag)}
    if fair_share:
        submit_conditions["StringEquals"]["batch:ShareIdentifier"] = name

    def batch_arn(resource: str, resource_name: str) -> str:
        return stack.format_arn(service="batch", resource=resource, resource_name=resource_name)

    jobs = batch_arn("job", "*")
    definitions = batch_arn("job-definition", f"{team_definition_prefix(name)}*")
    return [
        iam.PolicyStatement(
            sid="SubmitToTheTeamsPools",
            actions=["batch:SubmitJob"],
            resources=[*queues, definitions],
            conditions=submit_conditions,
        ),
        iam.PolicyStatement(
            sid="TagTheTeamsJobs",
            actions=["batch:TagResource"],
            resources=[jobs],
            conditions={
                "StringEquals": dict(team_tag),
                "StringEqualsIfExists": {f"aws:ResourceTag/{TEAM_TAG}": name},
            },
        ),
        iam.PolicyStatement(
            sid="EndTheTeamsJobs",
            actions=["batch:TerminateJob", "batch:CancelJob"],
            resources=[jobs],
            conditions={"StringEquals": {f"aws:ResourceTag/{TEAM_TAG}": name}},
        ),
        iam.PolicyStatement(
            sid="RegisterJobDefinitions",
            actions=["batch:RegisterJobDefinition", "batch:TagResource"],
            resources=[definitions, batch_arn("job-definition", f"{COPY_DEFINITION_PREFIX}*")],
        ),
        iam.PolicyStatement(
            sid="WhyTheTeamsJobsWait",
            actions=["batch:GetJobQueueSnapshot"],
            resources=list(queues),
        ),
        iam.PolicyStatement(
            sid="PassTheTeamsRoles",
            actions=["iam:PassRole"],
            resources=list(roles),
        ),
        iam.PolicyStatement(
            sid="ReadTheTeamsLogs",
            actions=["logs:FilterLogEvents", "logs:GetLogEvents"],
            resources=[log_group_arn],
        ),
        iam.PolicyStatement(
            sid="ReadTheStack",
            actions=["cloudformation:DescribeStacks"],
            resources=[
                stack.format_arn(
                    service="cloudformation",
                    resource="stack",
                    resource_name=f"{stack.stack_name}/*",
                    arn_format=ArnFormat.SLASH_RESOURCE_NAME,
                )
            ],
        ),
        iam.PolicyStatement(sid="Read", actions=list(READ_ANY), resources=["*"]),
        iam.PolicyStatement(
            sid="WorkspaceImages", actions=list(IMAGE_PUSH_PULL), resources=[repository_arn]
        ),
        iam.PolicyStatement(
            sid="CopyBases",
            actions=["batch:SubmitJob"],
            resources=[copy_queue, batch_arn("job-definition", f"{COPY_DEFINITION_PREFIX}*")],
        ),
        iam.PolicyStatement(
            sid="PassTheCopyRoles",
            actions=["iam:PassRole"],
            resources=list(copy_roles),
        ),
    ]
