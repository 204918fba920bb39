"""The node replacer (infra/node_replacer.py): what it hears, what it runs, who may call it."""

from __future__ import annotations

import json

from infra.batch_names import BATCH_CLUSTER_SUFFIX
from infra.config import CLUSTER_TAG
from infra.log_groups import node_replacer_log_group_name
from infra.node_replacer import (
    DRAINING,
    EXIT_CODES,
    FUNCTION_SOURCE,
    STATUSES,
    function_environment,
)
from infra.node_replacer_function import CONTAINER_INSTANCE_EVENT, SWEEP, SWEEP_MINUTES
from launcher.job.replacements import INSTANCE_TAG
from tests.rules.deployment import Deployment, Resource
from tests.rules.registry import Model, Page, rule

PATTERN = Model(
    "events",
    "PutRuleRequest",
    "EventPattern",
    "The event pattern. For more information, see Amazon EventBridge event patterns",
)
STATE = Model(
    "events",
    "PutRuleRequest",
    "State",
    "ENABLED: The rule is enabled. EventBridge matches events against the rule",
)
TARGETS = Model(
    "events", "PutTargetsRequest", "Targets", "The targets to update or add to the rule."
)
TIMEOUT = Model(
    "lambda",
    "CreateFunctionRequest",
    "Timeout",
    "The amount of time (in seconds) that Lambda allows a function to run before stopping it. "
    "The default is 3 seconds",
)
HANDLER = Model(
    "lambda",
    "CreateFunctionRequest",
    "Handler",
    "The name of the method within your code that Lambda calls to run your function.",
)
ENVIRONMENT = Model(
    "lambda",
    "CreateFunctionRequest",
    "Environment",
    "Environment variables that are accessible from function code during execution.",
)
ECS_EVENTS = Page(
    "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/ecs_container_instance_events.html",
    "Placing or stopping tasks on a container instance modifies the available resources on the "
    "container instance, such as CPU, memory, and available ports.",
)
PREFIX = Page(
    "https://docs.aws.amazon.com/eventbridge/latest/userguide/"
    "eb-event-patterns-content-based-filtering.html",
    "You can match an event depending on the prefix of a value in the event source.",
)
RUNNING_TASKS = Model(
    "ecs",
    "ContainerInstance",
    "runningTasksCount",
    "The number of tasks on the container instance that have a desired status (desiredStatus) "
    "of RUNNING.",
)
ECS_RESOURCES = Page(
    "https://docs.aws.amazon.com/service-authorization/latest/reference/"
    "list_amazonelasticcontainerservice.html",
    "If you specify a resource-level permission ARN in a statement using this action, then it "
    "must be of this type.",
)
SCHEDULE = Model(
    "events",
    "PutRuleRequest",
    "ScheduleExpression",
    'The scheduling expression. For example, "cron(0 20 * * ? *)" or "rate(5 minutes)".',
)
INPUT = Model(
    "events",
    "Target",
    "Input",
    "Valid JSON text passed to the target. In this case, nothing from the event itself is "
    "passed to the target.",
)
DRAINING_FILTER = Model(
    "ecs",
    "ListContainerInstancesRequest",
    "status",
    "if you specify the DRAINING status, the results include only container instances that "
    "have been set to DRAINING using UpdateContainerInstancesState.",
)
EVENTUAL = Page(
    "https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html",
    "This means that the result of an API command you run that affects your Amazon EC2 "
    "resources might not be immediately visible to all subsequent commands you run.",
)
SOURCE_ARN = Model(
    "lambda",
    "AddPermissionRequest",
    "Principal",
    "If you specify a service, use SourceArn or SourceAccount to limit who can invoke the "
    "function through that service.",
)


def _replacer(d: Deployment, type_: str) -> list[Resource]:
    return [r for r in d.of_type(type_) if r.logical_id.startswith("NodeReplacer")]


def _heard(r: Resource, source: str) -> bool:
    return r.props.get("EventPattern", {}).get("source") == [source]


def _pool_environments(d: Deployment) -> list[str]:
    """Logical ids of the pools' compute environments (not the copy jobs')."""
    copy = d.copy_compute_environment.logical_id
    return sorted(
        ce.logical_id for ce in d.of_type("AWS::Batch::ComputeEnvironment") if ce.logical_id != copy
    )


def _environment_of(value, suffix: str) -> str | None:
    """The compute environment whose Batch cluster name ``value`` ends with: a ``Fn::Join``
    ending in the environment's name (``Fn::Select`` 1 of its ``Ref`` split at ``/``) and
    ``_Batch_`` + ``suffix``; None for anything else."""
    parts = value.get("Fn::Join", ["", []])[1] if isinstance(value, dict) else []
    if len(parts) < 2 or parts[-1] != BATCH_CLUSTER_SUFFIX + suffix:
        return None
    select = parts[-2].get("Fn::Select", []) if isinstance(parts[-2], dict) else []
    if len(select) != 2 or select[0] != 1:
        return None
    split = select[1].get("Fn::Split", []) if isinstance(select[1], dict) else []
    if len(split) != 2 or split[0] != "/" or not isinstance(split[1], dict):
        return None
    return split[1].get("Ref")


@rule(
    PATTERN,
    STATE,
    TARGETS,
    covers=(
        "AWS::Events::Rule.EventPattern",
        "AWS::Events::Rule.State",
        "AWS::Events::Rule.Targets",
    ),
)
def node_replacer_hears_only_bad_or_lost_nodes_of_this_stacks_pools(d: Deployment) -> list[str]:
    """The rule is enabled and sends the function only Batch's job state changes in this
    stack's pool queues (not the copy queue, not another stack's) whose attempts ended with
    the bad-host or lost-node code, on the way back to RUNNABLE (a retry) or to FAILED.

    https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutRule.html: "The event
    pattern" decides what reaches the targets, and "ENABLED: The rule is enabled. EventBridge
    matches events against the rule"; https://docs.aws.amazon.com/eventbridge/latest/
    APIReference/API_PutTargets.html: the targets are what it invokes.
    """
    found = []
    rules = [r for r in _replacer(d, "AWS::Events::Rule") if _heard(r, "aws.batch")]
    if d.cluster_config.replace_bad_nodes and not rules:
        return ["replace_bad_nodes is on, but the stack has no node replacer rule"]
    queues = sorted(r.logical_id for r in d.of_type("AWS::Batch::JobQueue"))
    copy = d.copy_job_queue.logical_id
    for r in rules:
        pattern = r.props.get("EventPattern", {})
        detail = pattern.get("detail", {})
        heard = sorted(d.ref_target(r.stack, q).logical_id for q in detail.get("jobQueue", []))
        if heard != sorted(q for q in queues if q != copy):
            found.append(f"{r.path}: hears queues {heard}, the pools' are {queues}")
        if (pattern.get("source"), pattern.get("detail-type")) != (
            ["aws.batch"],
            ["Batch Job State Change"],
        ):
            found.append(f"{r.path}: not Batch's job state changes: {pattern}")
        if sorted(detail.get("status", [])) != sorted(STATUSES):
            found.append(f"{r.path}: statuses {detail.get('status')}")
        codes = detail.get("attempts", {}).get("container", {}).get("exitCode")
        if sorted(codes or []) != sorted(EXIT_CODES):
            found.append(f"{r.path}: exit codes {codes}, want {sorted(EXIT_CODES)}")
        if r.props.get("State") != "ENABLED":
            found.append(f"{r.path}: state {r.props.get('State')}")
        functions = [d.ref_target(r.stack, t["Arn"]) for t in r.props.get("Targets", [])]
        if [f.type if f else None for f in functions] != ["AWS::Lambda::Function"]:
            found.append(f"{r.path}: targets {r.props.get('Targets')}")
    return found


@rule(PATTERN, ECS_EVENTS, PREFIX, RUNNING_TASKS, covers=("AWS::Events::Rule.EventPattern",))
def node_replacer_finishes_on_its_own_pools_draining_instances(d: Deployment) -> list[str]:
    """An instance the function left DRAINING, because a task still ran on it, is ended when
    that task stops: ECS sends a container instance state change then ("Placing or stopping
    tasks on a container instance modifies the available resources on the container
    instance, such as CPU, memory, and available ports", https://docs.aws.amazon.com/AmazonECS/
    latest/developerguide/ecs_container_instance_events.html). The second rule hears those
    events, for DRAINING instances, in the ECS clusters of this stack's pool compute
    environments alone: each matched by the prefix NAME_Batch_ of the cluster Batch makes
    (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns-content-based-
    filtering.html: "You can match an event depending on the prefix of a value in the event
    source"), NAME resolved from the environment's ARN at deploy time. The function takes no
    task count from the event (the guide's example shows none; an event may come late): it
    reads runningTasksCount, "The number of tasks on the container
    instance that have a desired status (desiredStatus) of RUNNING" (https://docs.aws.amazon.
    com/AmazonECS/latest/APIReference/API_ContainerInstance.html), and PutRule's "The event
    pattern" decides what reaches it (https://docs.aws.amazon.com/eventbridge/latest/
    APIReference/API_PutRule.html).
    """
    found = []
    rules = [r for r in _replacer(d, "AWS::Events::Rule") if _heard(r, "aws.ecs")]
    if d.cluster_config.replace_bad_nodes and len(rules) != 1:
        return [f"replace_bad_nodes is on: {len(rules)} container instance rules, want 1"]
    for r in rules:
        pattern = r.props.get("EventPattern", {})
        detail = pattern.get("detail", {})
        if pattern.get("detail-type") != [CONTAINER_INSTANCE_EVENT]:
            found.append(f"{r.path}: not ECS's container instance changes: {pattern}")
        if detail.get("status") != list(DRAINING):
            found.append(f"{r.path}: statuses {detail.get('status')}, want {list(DRAINING)}")
        prefixes = detail.get("clusterArn", [])
        heard = sorted(
            str(_environment_of(p.get("prefix") if isinstance(p, dict) else p, ""))
            for p in prefixes
        )
        if heard != _pool_environments(d):
            found.append(
                f"{r.path}: hears the clusters of {heard}, the pools' are {_pool_environments(d)}"
            )
        if r.props.get("State") != "ENABLED":
            found.append(f"{r.path}: state {r.props.get('State')}")
        functions = [d.ref_target(r.stack, t["Arn"]) for t in r.props.get("Targets", [])]
        if [f.logical_id if f else None for f in functions] != [
            f.logical_id for f in _replacer(d, "AWS::Lambda::Function")
        ]:
            found.append(f"{r.path}: targets {r.props.get('Targets')}")
    return found


@rule(
    SCHEDULE,
    INPUT,
    DRAINING_FILTER,
    EVENTUAL,
    covers=("AWS::Events::Rule.ScheduleExpression", "AWS::Events::Rule.Targets"),
)
def node_replacer_sweeps_its_pools_draining_instances(d: Deployment) -> list[str]:
    """An instance left DRAINING whose last event the function missed (a failed invocation,
    or one that read EC2 before its own tag showed: "the result of an API command you run ...
    might not be immediately visible to all subsequent commands you run", https://docs.aws.
    amazon.com/ec2/latest/devguide/eventual-consistency.html) is ended by a sweep: a rule
    enabled on a schedule ("rate(5 minutes)", https://docs.aws.amazon.com/eventbridge/latest/
    APIReference/API_PutRule.html) whose target, the function, gets as its input ("Valid JSON
    text passed to the target", https://docs.aws.amazon.com/eventbridge/latest/APIReference/
    API_Target.html) exactly this stack's pool compute environments, whose clusters it lists
    by ``status`` DRAINING (https://docs.aws.amazon.com/AmazonECS/latest/APIReference/
    API_ListContainerInstances.html).
    """
    found = []
    rules = [r for r in _replacer(d, "AWS::Events::Rule") if "ScheduleExpression" in r.props]
    if d.cluster_config.replace_bad_nodes and len(rules) != 1:
        return [f"replace_bad_nodes is on: {len(rules)} sweep rules, want 1"]
    functions = [f.logical_id for f in _replacer(d, "AWS::Lambda::Function")]
    wanted = [f"<{d.cluster_config.stack_name}/{ce}>" for ce in _pool_environments(d)]
    for r in rules:
        if r.props["ScheduleExpression"] != f"rate({SWEEP_MINUTES} minutes)":
            found.append(f"{r.path}: schedule {r.props['ScheduleExpression']}")
        if r.props.get("State") != "ENABLED":
            found.append(f"{r.path}: state {r.props.get('State')}")
        targets = r.props.get("Targets", [])
        called = [d.ref_target(r.stack, t["Arn"]) for t in targets]
        if [f.logical_id if f else None for f in called] != functions:
            found.append(f"{r.path}: targets {targets}")
            continue
        try:
            given = json.loads(d.text(r.stack, targets[0].get("Input", "null")))
        except json.JSONDecodeError:
            given = None
        if not isinstance(given, dict) or sorted(given.get(SWEEP) or []) != wanted:
            found.append(f"{r.path}: input {given}, want the pools' compute environments")
    return found


@rule(ECS_RESOURCES, RUNNING_TASKS, covers=("AWS::IAM::Policy.PolicyDocument",))
def node_replacer_role_drains_its_pools_and_ends_only_what_it_marked(d: Deployment) -> list[str]:
    """The function's role may describe and drain the container instances of this stack's
    pool compute environments' ECS clusters alone, container-instance/NAME_Batch_*/*, one
    resource per environment (the resource type's ARN is container-instance/CLUSTER/ID, and
    "If you specify a resource-level permission ARN in a statement using this action, then it
    must be of this type", https://docs.aws.amazon.com/service-authorization/latest/reference/
    list_amazonelasticcontainerservice.html), and list them in those clusters alone
    (ListContainerInstances' resource type is the cluster: cluster/NAME_Batch_*). It may
    terminate only instances tagged as this
    stack's nodes and already tagged by itself with why they go: an instance it has not
    marked, after finding no task on it (runningTasksCount, https://docs.aws.amazon.com/
    AmazonECS/latest/APIReference/API_ContainerInstance.html), is not its to end.
    """
    found = []
    for role in _replacer(d, "AWS::IAM::Role"):
        statements = d.role_statements(role)
        for action in ("ecs:DescribeContainerInstances", "ecs:UpdateContainerInstancesState"):
            granted = [s for s in statements if action in _actions(s)]
            resources = [r for s in granted for r in _list(s.get("Resource"))]
            heard = sorted(str(_environment_of(r, "*/*")) for r in resources)
            if heard != _pool_environments(d):
                found.append(f"{role.path}: {action} on {resources}")
        granted = [s for s in statements if "ecs:ListContainerInstances" in _actions(s)]
        resources = [r for s in granted for r in _list(s.get("Resource"))]
        if sorted(str(_environment_of(r, "*")) for r in resources) != _pool_environments(d):
            found.append(f"{role.path}: ecs:ListContainerInstances on {resources}")
        for s in statements:
            if "ec2:TerminateInstances" not in _actions(s):
                continue
            condition = s.get("Condition", {})
            if (
                condition.get("StringEquals", {}).get(f"aws:ResourceTag/{CLUSTER_TAG}")
                != (d.cluster_config.stack_name)
                or condition.get("Null", {}).get(f"aws:ResourceTag/{INSTANCE_TAG}") != "false"
            ):
                found.append(f"{role.path}: terminates without both tags: {condition}")
    return found


def _actions(statement: dict) -> list[str]:
    return _list(statement.get("Action"))


def _list(value) -> list:
    return value if isinstance(value, list) else [value]


@rule(
    TIMEOUT,
    HANDLER,
    ENVIRONMENT,
    covers=(
        "AWS::Lambda::Function.Code",
        "AWS::Lambda::Function.Handler",
        "AWS::Lambda::Function.Runtime",
        "AWS::Lambda::Function.Environment",
        "AWS::Lambda::Function.Timeout",
        "AWS::Lambda::Function.MemorySize",
        "AWS::Lambda::Function.LoggingConfig",
        "AWS::Lambda::Function.Role",
    ),
)
def node_replacer_runs_this_repositorys_code_with_the_launchers_constants(
    d: Deployment,
) -> list[str]:
    """The function is infra/node_replacer_function.py as index.py, called at ``handler``, on
    a Python runtime, with the stack's and the launcher's constants in its environment, time
    for its few calls, its own log group and its own role.

    https://docs.aws.amazon.com/lambda/latest/api/API_CreateFunction.html: "The amount of time
    (in seconds) that Lambda allows a function to run before stopping it. The default is 3
    seconds" (one event is a handful of calls: 60 s); the handler is "The name of the method
    within your code that Lambda calls to run your function"; "Environment variables that are
    accessible from function code during execution".
    """
    found = []
    for r in _replacer(d, "AWS::Lambda::Function"):
        props = r.props
        if props.get("Code", {}).get("ZipFile") != FUNCTION_SOURCE.read_text():
            found.append(f"{r.path}: its code is not {FUNCTION_SOURCE.name}")
        if props.get("Handler") != "index.handler":
            found.append(f"{r.path}: handler {props.get('Handler')}")
        if not str(props.get("Runtime", "")).startswith("python3."):
            found.append(f"{r.path}: runtime {props.get('Runtime')}")
        variables = props.get("Environment", {}).get("Variables", {})
        if variables != function_environment(d.cluster_config):
            found.append(f"{r.path}: environment {variables}")
        if not 30 <= props.get("Timeout", 3) <= 900 or props.get("MemorySize", 128) < 128:
            found.append(f"{r.path}: timeout {props.get('Timeout')} s")
        group = d.ref_target(r.stack, props.get("LoggingConfig", {}).get("LogGroup"))
        name = group.props.get("LogGroupName") if group else None
        if name != node_replacer_log_group_name(d.cluster_config):
            found.append(f"{r.path}: logs to {name}")
        role = d.ref_target(r.stack, props.get("Role"))
        if role is None or not role.logical_id.startswith("NodeReplacerRole"):
            found.append(f"{r.path}: not its own role: {props.get('Role')}")
    return found


@rule(
    SOURCE_ARN,
    covers=(
        "AWS::Lambda::Permission.Action",
        "AWS::Lambda::Permission.FunctionName",
        "AWS::Lambda::Permission.Principal",
        "AWS::Lambda::Permission.SourceArn",
    ),
)
def only_the_rule_may_invoke_the_node_replacer(d: Deployment) -> list[str]:
    """EventBridge may invoke the function for the node replacer's rule alone: a permission
    for the service principal without the source ARN would let any rule in the account (or
    any account's, through the service) call it.

    https://docs.aws.amazon.com/lambda/latest/api/API_AddPermission.html: "If you specify a
    service, use SourceArn or SourceAccount to limit who can invoke the function through that
    service."
    """
    found = []
    for r in _replacer(d, "AWS::Lambda::Permission"):
        props = r.props
        source = d.ref_target(r.stack, props.get("SourceArn"))
        function = d.ref_target(r.stack, props.get("FunctionName"))
        if (props.get("Action"), props.get("Principal")) != (
            "lambda:InvokeFunction",
            "events.amazonaws.com",
        ):
            found.append(f"{r.path}: {props.get('Action')} for {props.get('Principal')}")
        if source is None or source.type != "AWS::Events::Rule":
            found.append(f"{r.path}: not limited to the rule: {props.get('SourceArn')}")
        if function is None or function.type != "AWS::Lambda::Function":
            found.append(f"{r.path}: for {props.get('FunctionName')}")
    return found
