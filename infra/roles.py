"""IAM grants several roles share, each with the cdk-nag acknowledgment that explains it."""

from __future__ import annotations

from aws_cdk import Acknowledgment, ArnFormat, Stack, Validations
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs

# The SSM channels ECS Exec's agent in a job container opens (and SSM Agent on the nodes).
SSM_MESSAGES = (
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
)
EFS_MOUNT = "elasticfilesystem:ClientMount"
EFS_WRITE = "elasticfilesystem:ClientWrite"

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
    Validations.of(role).acknowledge(
        Acknowledgment(
            id=log_group_finding(log_group),
            reason="Log group ARN ends in :* so streams can be written; scoped to one group.",
        )
    )


def log_group_finding(log_group: logs.ILogGroup) -> str:
    """cdk-nag's finding id for a grant on one log group of this app (its ARN ends in :*)."""
    cfn = log_group.node.default_child  # the CfnLogGroup: the group is one of this app's
    assert isinstance(cfn, logs.CfnLogGroup), f"{log_group.node.path}: not made in this app"
    logical_id = Stack.of(log_group).resolve(cfn.logical_id)
    return f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>]"


def grant_repository_pull(
    role: iam.Role, repository: ecr.IRepository, extra_repository_arns: tuple[str, ...]
) -> None:
    """Pull images from the workspace repository (and the extra ones), and log in to ECR."""
    role.add_to_policy(
        iam.PolicyStatement(
            actions=[
                "ecr:BatchCheckLayerAvailability",
                "ecr:BatchGetImage",
                "ecr:GetDownloadUrlForLayer",
            ],
            resources=[repository.repository_arn, *extra_repository_arns],
        )
    )
    grant_ecr_login(role)


def grant_access_point(
    role: iam.Role,
    file_system: efs.IFileSystem,
    access_point: efs.IAccessPoint,
    *,
    write: bool = True,
) -> None:
    """Mount the file system through one access point (and write, unless ``write`` is off).

    "elasticfilesystem:AccessPointArn" is the ARN of the access point a client mounts
    through (EFS user guide, iam-access-control-nfs-efs.html): the grant holds for that one.
    """
    role.add_to_policy(
        iam.PolicyStatement(
            actions=[EFS_MOUNT, EFS_WRITE] if write else [EFS_MOUNT],
            resources=[file_system.file_system_arn],
            conditions={
                "StringEquals": {"elasticfilesystem:AccessPointArn": access_point.access_point_arn}
            },
        )
    )


def grant_ecs_exec(role: iam.Role) -> None:
    """The SSM agent ECS runs in each container opens its channels as the task role (ECS
    guide, ecs-exec.html, "IAM permissions required for ECS Exec": these four on "*";
    ssmmessages has no resource types)."""
    role.add_to_policy(iam.PolicyStatement(actions=list(SSM_MESSAGES), resources=["*"]))
    Validations.of(role).acknowledge(
        Acknowledgment(
            id="AwsSolutions-IAM5[Resource::*]",
            reason="ECS Exec's four ssmmessages channel actions (ECS guide, "
            "ecs-exec.html); ssmmessages has no resource-level permission. Off unless "
            "the stack sets ecs_exec.",
        )
    )
