"""Log groups: named from the configuration, retention in days, encrypted with the stack's key."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import ClusterConfig


def job_log_group_name(config: ClusterConfig) -> str:
    return f"/aws/batch/{config.stack_name}/jobs"


def team_log_group_name(config: ClusterConfig, team: str) -> str:
    """A team's job log group: the job log group's name and the team's."""
    return f"{job_log_group_name(config)}/{team}"


def flow_log_group_name(config: ClusterConfig) -> str:
    return f"/aws/vpc/{config.stack_name}/flow-logs"


def node_replacer_log_group_name(config: ClusterConfig) -> str:
    return f"/aws/lambda/{config.stack_name}/node-replacer"


def encrypted_log_group_names(config: ClusterConfig) -> tuple[str, ...]:
    """Every log group the stack's logs key encrypts: its key policy names each one."""
    names: tuple[str, ...] = (job_log_group_name(config), flow_log_group_name(config))
    if config.replace_bad_nodes:
        names = (*names, node_replacer_log_group_name(config))
    return (*names, *(team_log_group_name(config, team) for team in sorted(config.teams)))


def log_group(
    scope: Construct,
    construct_id: str,
    *,
    retention_days: int,
    log_group_name: str,
    key: kms.IKey,
) -> logs.LogGroup:
    group = logs.LogGroup(
        scope,
        construct_id,
        log_group_name=log_group_name,
        encryption_key=key,
        removal_policy=RemovalPolicy.DESTROY,
    )
    # RetentionDays is an enum of names; the configuration speaks in days (validated in config).
    cfn = group.node.default_child
    assert isinstance(cfn, logs.CfnLogGroup)
    cfn.retention_in_days = retention_days
    return group
