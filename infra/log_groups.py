"""Log groups with a retention taken straight from the configuration in days."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_logs as logs
from constructs import Construct


def log_group(
    scope: Construct, construct_id: str, *, retention_days: int, log_group_name: str | None = None
) -> logs.LogGroup:
    group = logs.LogGroup(
        scope, construct_id, log_group_name=log_group_name, removal_policy=RemovalPolicy.DESTROY
    )
    # RetentionDays is an enum of names; the configuration speaks in days (validated in config).
    group.node.default_child.retention_in_days = retention_days
    return group
