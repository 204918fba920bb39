"""IAM grants several roles share, each with the cdk-nag acknowledgment that explains it."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs

ANY_RESOURCE_IS_THE_AUTH_TOKEN = Acknowledgment(
    id="AwsSolutions-IAM5[Resource::*]",
    reason="ecr:GetAuthorizationToken supports no resource-level permission; it is the only "
    "action granted on *.",
)


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
    logical_id = Stack.of(log_group).resolve(log_group.node.default_child.logical_id)
    Validations.of(role).acknowledge(
        Acknowledgment(
            id=f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>]",
            reason="Log group ARN ends in :* so streams can be written; scoped to one group.",
        )
    )
