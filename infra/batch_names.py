"""Names AWS Batch gives at run time to what the stack creates, as values resolved at deploy.

A compute environment's name is CloudFormation's (the stack sets none), and Batch derives more
from it: what it sets ``AWS_BATCH_CE_NAME`` to in a job placed there (Batch user guide,
job_env_vars.html), and its ECS cluster, ``NAME_Batch_UUID``. ``Ref`` gives the environment's
ARN, ``arn:...:compute-environment/NAME`` (Batch names allow no '/').
"""

from __future__ import annotations

from aws_cdk import Fn
from aws_cdk import aws_batch as batch

BATCH_CLUSTER_SUFFIX = "_Batch_"


def compute_environment_name(compute_environment: batch.CfnComputeEnvironment) -> str:
    """The environment's name: the last part of its ARN."""
    return Fn.select(1, Fn.split("/", compute_environment.ref))


def batch_cluster_name(compute_environment: batch.CfnComputeEnvironment, suffix: str) -> str:
    """NAME_Batch_ + ``suffix``: the environment's ECS cluster name as Batch makes it."""
    name = compute_environment_name(compute_environment)
    return Fn.join("", [name, BATCH_CLUSTER_SUFFIX + suffix])
