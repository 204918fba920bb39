"""IAM grants several roles share, each with the cdk-nag acknowledgment that explains it."""

from __future__ import annotations

from aws_cdk import Acknowledgment, ArnFormat, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs

ANY_RESOURCE_IS_THE_AUTH_TOKEN = Acknowledgment(
    id="AwsSolutions-IAM5[Resource::*]",
    reason="ecr:GetAuthorizationToken supports no resource-level permission; it is the only "
    "action granted on *.",
)


def task_role_principal(stack: Stack) -> iam.IPrincipal:
    """Who may assume a job's (task's) role: ECS tasks of this account and region only.

    The ECS guide recommends the confused-deputy conditions for task roles ("It is recommended
    that you use the aws:SourceAccount or aws:SourceArn condition keys", task-iam-roles.html),
    with a wildcard for the cluster ("Using the aws:SourceArn condition key to specify a
    specific cluster is not currently supported").
    """
    return iam.ServicePrincipal(
        "ecs-tasks.amazonaws.com",
        conditions={
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnLike": {
                "aws:SourceArn": stack.format_arn(
                    service="ecs", resource="*", arn_format=ArnFormat.NO_RESOURCE_NAME
                )
            },
        },
    )


def execution_role_principal() -> iam.IPrincipal:
    """Who may assume an execution role: ECS, as the ECS and Batch guides' trust policies for
    execution roles say (task_execution_IAM_role.html, execution-IAM-role.html), with no
    condition: neither documents that ECS sends aws:SourceArn when it assumes one, and a
    condition it does not satisfy would stop every job before it starts."""
    return iam.ServicePrincipal("ecs-tasks.amazonaws.com")


def grant_ecr_login(role: iam.Role) -> None:
    """ecr:GetAuthorizationToken, which IAM accepts only on "*" (it has no resource type)."""
    role.add_to_policy(iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"]))
    Validations.of(role).acknowledge(ANY_RESOURCE_IS_THE_AUTH_TOKEN)


def grant_log_streams(role: iam.Role, log_group: logs.ILogGroup) -> None:
    """Create and write streams of one log group (its ARN ends in :*, which cdk-nag flags)."""
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["logs:CreateLogStream", "logs:PutLogEvents"],
            resources=[log_group.log_group_arn],
        )
    )
    cfn = log_group.node.default_child  # the CfnLogGroup: the group is one of this app's
    assert isinstance(cfn, logs.CfnLogGroup), f"{log_group.node.path}: not made in this app"
    logical_id = Stack.of(log_group).resolve(cfn.logical_id)
    Validations.of(role).acknowledge(
        Acknowledgment(
            id=f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>]",
            reason="Log group ARN ends in :* so streams can be written; scoped to one group.",
        )
    )
