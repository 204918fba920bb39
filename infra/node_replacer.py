"""The node replacer: a bad or lost node's instance leaves the pool before the job's retry.

A node whose host fails the prelude's checks ends with ``BAD_HOST_EXIT`` (79), and a main
node that lost a worker ends with ``NODE_LOST_EXIT`` (75); the job definition retries both
(launcher.job.jobdef). Batch places the retry wherever it finds room, the same instance included.
An EventBridge rule on this stack's queues' "Batch Job State Change" events (Batch user guide,
batch_cwe_events.html: "Anytime that an existing (previously submitted) job changes states,
an event is created", its ``detail`` shaped like DescribeJobs' JobDetail) invokes a Lambda
function (infra/node_replacer_function.py) that drains the node's ECS container instance (ECS
"prevents new tasks from being scheduled for placement" on a DRAINING instance, developer
guide, container-instance-draining.html), tags it, and terminates it once ECS counts no task
on it; Batch launches a new one as the compute environment needs it. Draining does not stop
Batch's tasks already there (they are not service tasks), and the job's event comes after
all its nodes stopped, when Batch may have placed the retry or another job on the instance:
such an instance stays DRAINING, and a second rule, on ECS's "ECS Container Instance State
Change" events of the stack's compute environments' clusters (one whenever a task stops on an
instance, developer guide, ecs_container_instance_events.html), invokes the function again
until the instance runs nothing and it terminates it. A third, every ``SWEEP_MINUTES``, has it
look at every DRAINING instance of those clusters, so that one whose last event was lost or
read too early (before EC2 showed the tag) is ended all the same.

Why this path and not another AWS-native one:

- A queue's job state time limit actions act on jobs only, and only on RUNNABLE ones (CANCEL
  after a wait, Batch user guide, job_stuck_in_runnable_time_limit_actions.html): they cannot
  take an instance away.
- ECS container instance health (``healthStatus``) covers the container runtime and the agent,
  not GPUs or EFA devices, and does not stop placement or replace anything.
- EC2 automatic recovery acts on EC2's own status checks (system reachability); a GPU with
  uncorrectable ECC errors or a missing EFA device passes them, and recovery keeps the same
  instance id, which Batch would place the retry on again.
- EventBridge delivers Batch's events as they happen, at least once; the function is
  idempotent and costs one short invocation per matching event (docs/operating.md).

The function's code is inlined into the template (CloudFormation has no size limit for
``ZipFile`` since 2022, aws-cdk PR 20624): no asset to publish, boto3 from the runtime only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aws_cdk import Acknowledgment, Duration, Stack, Validations
from aws_cdk import aws_batch as batch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.batch_names import BATCH_CLUSTER_SUFFIX, batch_cluster_name, compute_environment_name
from infra.config import CLUSTER_TAG, ClusterConfig
from infra.log_groups import log_group, node_replacer_log_group_name
from infra.node_replacer_function import CONTAINER_INSTANCE_EVENT, SWEEP, SWEEP_MINUTES
from infra.roles import grant_log_streams, log_group_finding
from launcher.job.jobspec import MAX_TAGS
from launcher.job.replacements import HOST_LOST_REASON, INSTANCE_TAG, JOB_TAG, JOB_TAG_PREFIX
from launcher.node.prelude import BAD_HOST_EXIT, LOST_NODES_LINE, NODE_LOST_EXIT

FUNCTION_SOURCE = Path(__file__).with_name("node_replacer_function.py")
# checkov's Lambda checks, each answered (docs/security.md lists them with the NIST findings).
CHECKOV_SKIPS = [
    {
        "id": "CKV_AWS_115",
        "comment": "no reserved concurrency: a new account's whole quota is "
        "10 and reserving from it fails the deploy; one short call per failed attempt, "
        "per task stopping on an instance it drained, and every 15 minutes",
    },
    {
        "id": "CKV_AWS_116",
        "comment": "invoked by EventBridge, which retries a failed delivery "
        "(185 times over 24 h by default); each step is idempotent",
    },
    {
        "id": "CKV_AWS_117",
        "comment": "calls AWS APIs only; in the VPC it would need four more "
        "interface endpoints (Batch, ECS, EC2, Logs)",
    },
    {"id": "CKV_AWS_173", "comment": "its environment holds tag names and exit codes, no secret"},
]
# A job retried after a bad or lost node goes back to RUNNABLE; one out of attempts FAILS.
# Both events carry the attempt that ended last in ``attempts`` (JobDetail.attempts).
STATUSES = ("RUNNABLE", "FAILED")
EXIT_CODES = (NODE_LOST_EXIT, BAD_HOST_EXIT)
# The container instances the function waits on: ECS says DRAINING in every event of theirs.
DRAINING = ("DRAINING",)
# Reads without a resource-level permission (Service Authorization Reference: no resource type
# for Batch's Describe* calls nor for ec2:DescribeInstances): granted on "*".
DESCRIBE_ANY = (
    "batch:DescribeJobs",
    "batch:DescribeJobQueues",
    "batch:DescribeComputeEnvironments",
    "batch:DescribeJobDefinitions",
    "ec2:DescribeInstances",
)


def event_pattern(queue_arns: list[Any]) -> dict[str, Any]:
    """Batch's job state changes in these queues whose attempts include one that ended with
    a bad-host or lost-node code; the function looks at the latest attempt only.

    A pattern's value list matches "if any of the values in the array match", and an array
    in the event "if the intersection of the event pattern array and the event array is
    non-empty" (EventBridge user guide, eb-event-patterns-arrays.html): every attempt's exit
    code is in ``detail.attempts[].container.exitCode``.

    Child jobs are heard on purpose: a node of a multi-node job (``JOB#N``) lets the function
    drain a worker's bad host before the job's own event, and an array child (``JOB:N``) is a
    single-node job whose retry would meet the same host. The function never tags a child's
    ARN, which Batch refuses (infra/node_replacer_function.py, replace_nodes).
    """
    return {
        "source": ["aws.batch"],
        "detail-type": ["Batch Job State Change"],
        "detail": {
            "jobQueue": queue_arns,
            "status": list(STATUSES),
            "attempts": {"container": {"exitCode": list(EXIT_CODES)}},
        },
    }


def container_instance_pattern(cluster_prefixes: list[Any]) -> dict[str, Any]:
    """ECS's state changes of DRAINING container instances in these clusters (the compute
    environments' ECS clusters, matched by name prefix: "You can match an event depending on
    the prefix of a value in the event source", EventBridge user guide,
    eb-event-patterns-content-based-filtering.html). The event's ``detail`` resembles
    DescribeContainerInstances' ContainerInstance (clusterArn, containerInstanceArn,
    ec2InstanceId, status; developer guide, ecs_container_instance_events.html). The pattern
    does not filter on task counts, which the guide's example does not show, and the function
    does not take them from the event (one may come late or twice): it reads them again."""
    return {
        "source": ["aws.ecs"],
        "detail-type": [CONTAINER_INSTANCE_EVENT],
        "detail": {
            "clusterArn": [{"prefix": p} for p in cluster_prefixes],
            "status": list(DRAINING),
        },
    }


def sweep_input(compute_environment_arns: list[Any]) -> dict[str, Any]:
    """What the scheduled rule sends the function: the compute environments to sweep."""
    return {SWEEP: compute_environment_arns}


def function_environment(config: ClusterConfig) -> dict[str, str]:
    """What the function knows of the stack and the launcher: their own constants."""
    return {
        "CLUSTER_TAG": CLUSTER_TAG,
        "CLUSTER_NAME": config.stack_name,
        "BAD_HOST_EXIT": str(BAD_HOST_EXIT),
        "NODE_LOST_EXIT": str(NODE_LOST_EXIT),
        "LOST_NODES_LINE": LOST_NODES_LINE.pattern,
        "HOST_LOST_REASON": HOST_LOST_REASON.pattern,
        "JOB_TAG": JOB_TAG,
        "JOB_TAG_PREFIX": JOB_TAG_PREFIX,
        "INSTANCE_TAG": INSTANCE_TAG,
        "MAX_JOB_TAGS": str(MAX_TAGS),
    }


class NodeReplacer(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ClusterConfig,
        queues: list[batch.CfnJobQueue],
        compute_environments: list[batch.CfnComputeEnvironment],
        job_log_group: logs.LogGroup,
        logs_key: kms.IKey,
        team_log_groups: Sequence[logs.LogGroup] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = log_group(
            self,
            "LogGroup",
            retention_days=config.log_retention_days,
            log_group_name=node_replacer_log_group_name(config),
            key=logs_key,
        )
        self.role = self._role(config, [job_log_group, *team_log_groups], compute_environments)
        self.function = lambda_.Function(
            self,
            "Function",
            description="Drains and tags the instance of a node that ended with exit "
            f"{BAD_HOST_EXIT} (bad host) or {NODE_LOST_EXIT} (node lost); terminates it once "
            "it runs nothing",
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler="index.handler",
            code=lambda_.Code.from_inline(FUNCTION_SOURCE.read_text()),
            role=self.role,
            timeout=Duration.seconds(60),
            memory_size=128,
            log_group=self.log_group,
            environment=function_environment(config),
        )
        # CDK's Function waits for its role by DependsOn too, which its GetAtt already does
        # (cfn-lint W3005); the wait for the role's policy stays.
        function = self.function.node.default_child
        assert isinstance(function, lambda_.CfnFunction)
        policy = self.role.node.find_child("DefaultPolicy").node.default_child
        assert isinstance(policy, iam.CfnPolicy)
        function.add_override("DependsOn", [policy.logical_id])
        function.add_metadata("checkov", {"skip": CHECKOV_SKIPS})
        self.rule = events.Rule(
            self,
            "Rule",
            description="Batch jobs of this stack whose attempt ended with a bad or lost node",
            event_pattern=events.EventPattern(
                **_cdk_pattern(event_pattern([q.ref for q in queues]))
            ),
            targets=[targets.LambdaFunction(self.function)],
        )
        stack = Stack.of(self)
        clusters = [
            stack.format_arn(
                service="ecs", resource="cluster", resource_name=batch_cluster_name(ce, "")
            )
            for ce in compute_environments
        ]
        self.drained_rule = events.Rule(
            self,
            "DrainedRule",
            description="This stack's nodes that the node replacer drained, when a task stops "
            "on them",
            event_pattern=events.EventPattern(**_cdk_pattern(container_instance_pattern(clusters))),
            targets=[targets.LambdaFunction(self.function)],
        )
        self.sweep_rule = events.Rule(
            self,
            "SweepRule",
            description="Ends the nodes the node replacer drained that run nothing, should "
            "their last event have been missed",
            schedule=events.Schedule.rate(Duration.minutes(SWEEP_MINUTES)),
            targets=[
                targets.LambdaFunction(
                    self.function,
                    event=events.RuleTargetInput.from_object(
                        sweep_input([ce.ref for ce in compute_environments])
                    ),
                )
            ],
        )

    def _role(
        self,
        config: ClusterConfig,
        job_log_groups: list[logs.LogGroup],
        compute_environments: list[batch.CfnComputeEnvironment],
    ) -> iam.Role:
        stack = Stack.of(self)
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Node replacer: reads jobs, drains and terminates this cluster's nodes",
        )
        grant_log_streams(role, self.log_group)
        instances = stack.format_arn(service="ec2", resource="instance", resource_name="*")
        statements = [
            iam.PolicyStatement(actions=list(DESCRIBE_ANY), resources=["*"]),
            iam.PolicyStatement(
                actions=["batch:TagResource"],
                resources=[stack.format_arn(service="batch", resource="job", resource_name="*")],
            ),
            # The container instances of this stack's compute environments' clusters alone,
            # read and drained: container-instance/CLUSTER/ID (Service Authorization
            # Reference), CLUSTER named by Batch NAME_Batch_UUID.
            iam.PolicyStatement(
                actions=["ecs:DescribeContainerInstances", "ecs:UpdateContainerInstancesState"],
                resources=[
                    stack.format_arn(
                        service="ecs",
                        resource="container-instance",
                        resource_name=batch_cluster_name(ce, "*/*"),
                    )
                    for ce in compute_environments
                ],
            ),
            # ... and listed, for the sweep: ListContainerInstances takes the cluster.
            iam.PolicyStatement(
                actions=["ecs:ListContainerInstances"],
                resources=[
                    stack.format_arn(
                        service="ecs", resource="cluster", resource_name=batch_cluster_name(ce, "*")
                    )
                    for ce in compute_environments
                ],
            ),
            # This cluster's nodes only (the tag Batch puts on every instance it launches for
            # the compute environments: ComputeResources.Tags, infra/compute_pool.py node_tags), and
            # of those only one the function has tagged first with why it goes.
            iam.PolicyStatement(
                actions=["ec2:TerminateInstances"],
                resources=[instances],
                conditions={
                    "StringEquals": {f"aws:ResourceTag/{CLUSTER_TAG}": config.stack_name},
                    "Null": {f"aws:ResourceTag/{INSTANCE_TAG}": "false"},
                },
            ),
            # ... and on them its own tag alone (the cluster tag stays as Batch set it).
            iam.PolicyStatement(
                actions=["ec2:CreateTags"],
                resources=[instances],
                conditions={
                    "StringEquals": {f"aws:ResourceTag/{CLUSTER_TAG}": config.stack_name},
                    "ForAllValues:StringEquals": {"aws:TagKeys": [INSTANCE_TAG]},
                },
            ),
            # The main node's last lines say which nodes it lost (in the job log group, or a
            # team's).
            iam.PolicyStatement(
                actions=["logs:GetLogEvents"], resources=[g.log_group_arn for g in job_log_groups]
            ),
        ]
        for statement in statements:
            role.add_to_policy(statement)
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="batch:Describe* and ec2:DescribeInstances support no resource-level "
                "permission; they read only.",
            ),
            Acknowledgment(
                id=_any_of(stack, "batch", "job"),
                reason="Jobs are created at run time; the function tags the job it was told of.",
            ),
            *(
                Acknowledgment(
                    id=_batch_cluster_finding(stack, ce, "container-instance", "*/*"),
                    reason="Batch names a compute environment's ECS cluster NAME_Batch_UUID at "
                    "run time: the container instances of this stack's compute environments "
                    "alone; describe and drain only.",
                )
                for ce in compute_environments
            ),
            *(
                Acknowledgment(
                    id=_batch_cluster_finding(stack, ce, "cluster", "*"),
                    reason="Batch names a compute environment's ECS cluster NAME_Batch_UUID at "
                    "run time: this stack's compute environments' clusters alone; list their "
                    "container instances only.",
                )
                for ce in compute_environments
            ),
            Acknowledgment(
                id=_any_of(stack, "ec2", "instance"),
                reason=f"Only instances tagged {CLUSTER_TAG}={config.stack_name} (condition).",
            ),
            *(
                Acknowledgment(
                    id=log_group_finding(group),
                    reason="Log group ARN ends in :* so its streams can be read; one group.",
                )
                for group in job_log_groups
            ),
        )
        return role


def _any_of(stack: Stack, service: str, resource: str) -> str:
    """cdk-nag's finding id for every RESOURCE of SERVICE in the stack's account and region."""
    return (
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:{service}:{stack.region}:"
        f"{stack.account}:{resource}/*]"
    )


def _batch_cluster_finding(
    stack: Stack, compute_environment: batch.CfnComputeEnvironment, resource: str, rest: str
) -> str:
    """cdk-nag's finding id for ECS's RESOURCE/NAME_Batch_REST of the compute environment's
    cluster: its container instances (``container-instance``, ``*/*``) or the cluster itself
    (``cluster``, ``*``). cdk-nag writes the unresolved cluster name as its CloudFormation
    JSON."""
    name = json.dumps(
        stack.resolve(compute_environment_name(compute_environment)), separators=(",", ":")
    )
    return (
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ecs:{stack.region}:{stack.account}:"
        f"{resource}/{name}{BATCH_CLUSTER_SUFFIX}{rest}]"
    )


def _cdk_pattern(pattern: dict[str, Any]) -> dict[str, Any]:
    """A pattern as the keyword arguments of events.EventPattern."""
    return {
        "source": pattern["source"],
        "detail_type": pattern["detail-type"],
        "detail": pattern["detail"],
    }
