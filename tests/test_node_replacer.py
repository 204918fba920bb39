"""The node replacer: its event pattern against Batch's real event shape, its function against
emulated Batch, ECS, EC2 and CloudWatch Logs, its template, and the launcher's lines."""

from __future__ import annotations

import copy
import json

import pytest

from devenv import moto_gaps
from devenv.emulator import ACCOUNT, REGION
from infra import node_replacer_function as function
from infra.cluster import node_tags
from infra.config import CLUSTER_TAG, load
from infra.node_replacer import EXIT_CODES, event_pattern, function_environment
from launcher.prelude import BAD_HOST_EXIT, NODE_LOST_EXIT
from launcher.replacements import INSTANCE_TAG, JOB_TAG_PREFIX, replacement_lines
from tests.conftest import cdk_context

CONFIG = load(cdk_context())
SETTINGS = function.Settings.from_env(function_environment(CONFIG))

# The Batch user guide's example "Batch Job State Change" event (batch_cwe_events.html,
# "Example Job State Change Event"), as printed there: a job that went RUNNABLE with no attempt.
DOCS_EVENT = {
    "version": "0",
    "id": "c8f9c4b5-76e5-d76a-f980-7011e206042b",
    "detail-type": "Batch Job State Change",
    "source": "aws.batch",
    "account": "123456789012",
    "time": "2022-01-11T23:36:40Z",
    "region": "us-east-1",
    "resources": ["arn:aws:batch:us-east-1:123456789012:job/4c7599ae-0a82-49aa-ba5a-4727fcce14a8"],
    "detail": {
        "jobArn": "arn:aws:batch:us-east-1:123456789012:job/4c7599ae-0a82-49aa-ba5a-4727fcce14a8",
        "jobName": "event-test",
        "jobId": "4c7599ae-0a82-49aa-ba5a-4727fcce14a8",
        "jobQueue": "arn:aws:batch:us-east-1:123456789012:job-queue/PexjEHappyPathCanary2JobQueue",
        "status": "RUNNABLE",
        "attempts": [],
        "createdAt": 1641944200058,
        "retryStrategy": {"attempts": 2, "evaluateOnExit": []},
        "dependsOn": [],
        "jobDefinition": "arn:aws:batch:us-east-1:123456789012:job-definition/"
        "first-run-job-definition:1",
        "parameters": {},
        "container": {
            "image": "137112412989.dkr.ecr.us-east-1.amazonaws.com/amazonlinux:latest",
            "command": ["sleep", "600"],
            "volumes": [],
            "environment": [],
            "mountPoints": [],
            "ulimits": [],
            "networkInterfaces": [],
            "resourceRequirements": [
                {"value": "2", "type": "VCPU"},
                {"value": "256", "type": "MEMORY"},
            ],
            "secrets": [],
        },
        "tags": {
            "resourceArn": "arn:aws:batch:us-east-1:123456789012:job/"
            "4c7599ae-0a82-49aa-ba5a-4727fcce14a8"
        },
        "propagateTags": False,
        "platformCapabilities": [],
    },
}
DOCS_QUEUE = DOCS_EVENT["detail"]["jobQueue"]  # type: ignore[index]


def _retried(event: dict, status: str, codes: list[int], queue: str = DOCS_QUEUE) -> dict:
    """The docs' event after attempts that ended with ``codes`` (JobDetail.attempts: each an
    AttemptDetail whose container is an AttemptContainerDetail with exitCode)."""
    event = copy.deepcopy(event)
    event["detail"].update(
        status=status,
        jobQueue=queue,
        attempts=[
            {
                "container": {
                    "containerInstanceArn": f"arn:aws:ecs:us-east-1:123456789012:"
                    f"container-instance/c/{n}",
                    "exitCode": code,
                    "logStreamName": f"s/default/{n}",
                    "networkInterfaces": [],
                },
                "startedAt": 1641944300058,
                "stoppedAt": 1641944400058,
                "statusReason": "Essential container in task exited",
            }
            for n, code in enumerate(codes)
        ],
    )
    return event


# --- the launcher's lines (fast) --------------------------------------------------------------


def test_replacement_lines_say_attempt_node_instance_and_why_in_order():
    tags = {
        f"{JOB_TAG_PREFIX}2:0": "i-0bbb exit 79",
        f"{JOB_TAG_PREFIX}1:3": f"i-0aaa exit {NODE_LOST_EXIT}",
        f"{JOB_TAG_PREFIX}1:12": "i-0ccc exit 79",
        "team": "vision",  # a user's own
        f"{JOB_TAG_PREFIX}x:1": "i-0ddd exit 79",  # not ours in shape
        f"{JOB_TAG_PREFIX}3:1": "something else",
    }
    assert replacement_lines(tags) == (
        f"attempt 1: node 3 (i-0aaa) replaced: lost (exit {NODE_LOST_EXIT})",
        f"attempt 1: node 12 (i-0ccc) replaced: bad host (exit {BAD_HOST_EXIT})",
        f"attempt 2: node 0 (i-0bbb) replaced: bad host (exit {BAD_HOST_EXIT})",
    )
    assert replacement_lines(None) == ()


def test_a_workers_bad_host_is_blamed_not_the_main_node_that_passes_the_code_on():
    def record(code):
        return {"attempts": [{"container": {"containerInstanceArn": "arn", "exitCode": code}}]}

    records = {0: record(79), 1: record(143), 2: record(79)}
    assert [n.index for n in function.bad_nodes(records, 1, 79)] == [2]
    assert [n.index for n in function.bad_nodes({0: record(79), 1: record(1)}, 1, 79)] == [0]
    assert function.bad_nodes(records, 2, 79) == []  # that attempt has not run


def test_the_function_reads_the_launchers_constants_from_its_environment():
    assert (SETTINGS.bad_host_exit, SETTINGS.node_lost_exit) == (BAD_HOST_EXIT, NODE_LOST_EXIT)
    assert (SETTINGS.cluster_tag, SETTINGS.cluster) == (CLUSTER_TAG, CONFIG.stack_name)
    assert SETTINGS.lost_nodes_line.match("launcher: node(s) 2 5 lost: ending with exit code 75")
    assert function.reason_of(1, SETTINGS) is None


def test_replace_bad_nodes_is_a_setting_on_by_default():
    assert CONFIG.replace_bad_nodes is True
    assert load(cdk_context(replace_bad_nodes="false")).replace_bad_nodes is False


# --- the event pattern, with EventBridge's matching (moto's TestEventPattern) ----------------


@pytest.fixture(scope="module")
def events(moto_server):
    return moto_server.client("events")


def _matches(events, event: dict, queue: str = DOCS_QUEUE) -> bool:
    pattern = json.dumps(event_pattern([queue]))
    return events.test_event_pattern(EventPattern=pattern, Event=json.dumps(event))["Result"]


@pytest.mark.parametrize(
    ("status", "codes", "queue", "matched"),
    [
        ("RUNNABLE", [BAD_HOST_EXIT], DOCS_QUEUE, True),  # retried after a bad host
        ("RUNNABLE", [NODE_LOST_EXIT], DOCS_QUEUE, True),  # ... after a lost node
        ("FAILED", [BAD_HOST_EXIT, 1], DOCS_QUEUE, True),  # an earlier one: the function decides
        ("RUNNABLE", [1], DOCS_QUEUE, False),  # an ordinary failure
        ("RUNNING", [BAD_HOST_EXIT], DOCS_QUEUE, False),  # the retry runs: said already
        ("RUNNABLE", [BAD_HOST_EXIT], DOCS_QUEUE + "-other", False),  # another stack's queue
    ],
)
def test_the_pattern_on_batchs_event_shape(events, status, codes, queue, matched):
    """The Batch user guide's example event (batch_cwe_events.html), whose detail "resembles
    the JobDetail object", with the attempts a retry carries; EventBridge's semantics for the
    arrays of attempts (moto's matcher, with the array gap in devenv/moto_gaps.py)."""
    assert _matches(events, _retried(DOCS_EVENT, status, codes, queue)) is matched


def test_the_docs_example_itself_a_first_runnable_does_not_match(events):
    assert not _matches(events, DOCS_EVENT)
    assert set(EXIT_CODES) == {BAD_HOST_EXIT, NODE_LOST_EXIT}


# --- the function against emulated AWS --------------------------------------------------------


@pytest.fixture(scope="module")
def pool(moto_server, aws):
    """A managed EC2 compute environment tagged as the stack tags its nodes, its queue, a
    multi-node job definition logging to a group, and three of its nodes plus one foreign
    instance (no cluster tag)."""
    moto_server.reset()
    iam = aws["iam"]
    ec2 = aws["ec2"]
    role = iam.create_role(RoleName="node", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    profile = iam.create_instance_profile(InstanceProfileName="node")["InstanceProfile"]["Arn"]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="g", Description="g", VpcId=vpc)["GroupId"]
    batch = aws["batch"]
    ce = batch.create_compute_environment(
        computeEnvironmentName="pool",
        type="MANAGED",
        state="ENABLED",
        serviceRole=role,
        computeResources={
            "type": "EC2",
            "minvCpus": 0,
            "maxvCpus": 384,
            "instanceTypes": ["p4d.24xlarge"],
            "subnets": [subnet],
            "securityGroupIds": [group],
            "instanceRole": profile,
            "tags": node_tags(CONFIG),
        },
    )["computeEnvironmentArn"]
    queue = batch.create_job_queue(
        jobQueueName="jobs",
        state="ENABLED",
        priority=1,
        computeEnvironmentOrder=[{"order": 1, "computeEnvironment": ce}],
    )["jobQueueArn"]
    container = {
        "image": "busybox",
        "command": ["true"],
        "resourceRequirements": [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "64"}],
        "logConfiguration": {
            "logDriver": "awslogs",
            "options": {"awslogs-group": "/jobs", "awslogs-stream-prefix": "train"},
        },
    }
    definition = batch.register_job_definition(
        jobDefinitionName="train",
        type="multinode",
        nodeProperties={
            "numNodes": 3,
            "mainNode": 0,
            "nodeRangeProperties": [{"targetNodes": "0:", "container": container}],
        },
    )["jobDefinitionArn"]
    nodes = [moto_gaps.launch_node(aws, ce) for _ in range(3)]
    (foreign,) = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1)["Instances"]
    document = json.dumps({"instanceId": foreign["InstanceId"]})
    (cluster,) = [
        e["ecsClusterArn"]
        for e in batch.describe_compute_environments(computeEnvironments=[ce])[
            "computeEnvironments"
        ]
    ]
    stray = aws["ecs"].register_container_instance(
        cluster=cluster, instanceIdentityDocument=document
    )["containerInstance"]["containerInstanceArn"]
    return {
        "queue": queue,
        "definition": definition,
        "nodes": nodes,
        "foreign": (foreign["InstanceId"], stray),
        "cluster": cluster,
    }


@pytest.fixture(scope="module")
def aws(moto_server) -> dict:
    """One client per service for the module (a boto3 client costs a second to make)."""
    return {name: moto_server.client(name) for name in ("batch", "ecs", "ec2", "logs", "iam")}


def _ran(aws, pool, hosts, codes, *, retry=True, lines=()) -> dict:
    """A job that ran its one attempt on ``hosts`` and ended with ``codes``; the event."""
    batch = aws["batch"]
    job_id = batch.submit_job(
        jobName="t", jobQueue=pool["queue"], jobDefinition=pool["definition"]
    )["jobId"]
    moto_gaps.start_job(ACCOUNT, REGION, job_id)
    if lines:
        moto_gaps.put_node_lines(ACCOUNT, REGION, job_id, {0: list(lines)})
    moto_gaps.end_attempt_on_hosts(ACCOUNT, REGION, job_id, hosts, codes, retry=retry)
    (detail,) = batch.describe_jobs(jobs=[job_id])["jobs"]
    return {**DOCS_EVENT, "resources": [detail["jobArn"]], "detail": detail}


def _instance(aws, instance_id: str) -> dict:
    (reservation,) = aws["ec2"].describe_instances(InstanceIds=[instance_id])["Reservations"]
    return reservation["Instances"][0]


def _ecs_status(aws, pool, arn: str) -> str:
    (found,) = aws["ecs"].describe_container_instances(
        cluster=pool["cluster"], containerInstances=[arn]
    )["containerInstances"]
    return found["status"]


def test_a_bad_worker_host_is_drained_tagged_terminated_and_said_once(aws, pool, events):
    (_, a), (bad, b), (_, c) = pool["nodes"]
    event = _ran(aws, pool, {0: a, 1: b, 2: c}, {0: 79, 1: 79, 2: 143})
    assert _matches(events, event, pool["queue"])

    done = function.replace_nodes(event["detail"], SETTINGS, aws)

    assert done == {"replaced": [f"node 1 {bad}"], "skipped": []}
    assert _ecs_status(aws, pool, b) == "DRAINING"
    assert _ecs_status(aws, pool, a) == "ACTIVE"  # the main node only passed it on
    instance = _instance(aws, bad)
    assert instance["State"]["Name"] == "terminated"
    job_id = event["detail"]["jobId"]
    assert {t["Key"]: t["Value"] for t in instance["Tags"]}[INSTANCE_TAG] == (
        f"bad host (exit 79): job {job_id} attempt 1 node 1"
    )
    (job,) = aws["batch"].describe_jobs(jobs=[job_id])["jobs"]
    assert replacement_lines(job["tags"]) == (
        f"attempt 1: node 1 ({bad}) replaced: bad host (exit 79)",
    )
    # EventBridge delivers at least once: the same event again changes nothing.
    again = function.replace_nodes(event["detail"], SETTINGS, aws)
    assert again == {"replaced": [], "skipped": ["node 1: already replaced"]}


def test_an_already_terminated_instance_is_recorded_not_terminated_again(aws, pool):
    (main, a), _, _ = pool["nodes"]
    aws["ec2"].terminate_instances(InstanceIds=[main])
    event = _ran(aws, pool, {0: a}, {0: 79}, retry=False)  # out of attempts: FAILED
    done = function.replace_nodes(event["detail"], SETTINGS, aws)
    assert done == {"replaced": [f"node 0 {main}"], "skipped": []}


def test_a_lost_worker_named_by_the_main_node_is_replaced(aws, pool):
    _, _, (lost, c) = pool["nodes"]
    (_, a), (_, b), _ = pool["nodes"]
    line = "launcher: node(s) 2 lost: ending with exit code 75 so that the job is tried again"
    event = _ran(aws, pool, {0: a, 1: b, 2: c}, {0: 75}, lines=["training", line])
    done = function.replace_nodes(event["detail"], SETTINGS, aws)
    assert done == {"replaced": [f"node 2 {lost}"], "skipped": []}
    assert _instance(aws, lost)["State"]["Name"] == "terminated"


def test_an_ordinary_failure_touches_nothing(aws, pool):
    _, _, (_, c) = pool["nodes"]
    event = _ran(aws, pool, {0: c}, {0: 1})
    assert function.replace_nodes(event["detail"], SETTINGS, aws) == {
        "replaced": [],
        "skipped": [],
    }
    (job,) = aws["batch"].describe_jobs(jobs=[event["detail"]["jobId"]])["jobs"]
    assert replacement_lines(job["tags"]) == ()


def test_an_instance_without_the_cluster_tag_is_not_touched(moto_server, aws, pool, monkeypatch):
    """Through the Lambda entry point, with the environment the stack gives it."""
    foreign, stray = pool["foreign"]
    event = _ran(aws, pool, {0: stray}, {0: 79})
    for key, value in {**moto_server.env, **function_environment(CONFIG)}.items():
        monkeypatch.setenv(key, value)
    done = function.handler(event)
    assert done["replaced"] == []
    assert done["skipped"] == [
        f"node 0 {foreign}: not a node of {CONFIG.stack_name} (no {CLUSTER_TAG} tag of its)"
    ]
    assert _instance(aws, foreign)["State"]["Name"] == "running"
    assert _ecs_status(aws, pool, stray) == "ACTIVE"


# --- the template (the session's default synth) ----------------------------------------------


def _of_type(template: dict, type_: str) -> dict[str, dict]:
    found = {k: v for k, v in template["Resources"].items() if v["Type"] == type_}
    return {k: v for k, v in found.items() if k.startswith("NodeReplacer")}


def test_the_rule_matches_every_pool_queue_and_invokes_the_function(synth_default):
    template = synth_default.template()
    (rule,) = _of_type(template, "AWS::Events::Rule").values()
    queues = [k for k, v in template["Resources"].items() if v["Type"] == "AWS::Batch::JobQueue"]
    training = [q for q in queues if not q.startswith("Copy")]
    assert rule["Properties"]["EventPattern"] == event_pattern([{"Ref": q} for q in training])
    (target,) = rule["Properties"]["Targets"]
    (function_id,) = _of_type(template, "AWS::Lambda::Function")
    assert target["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}


def test_the_function_runs_the_repository_file_on_python_3_12_or_later(synth_default):
    (fn,) = _of_type(synth_default.template(), "AWS::Lambda::Function").values()
    props = fn["Properties"]
    assert props["Code"]["ZipFile"] == function.__loader__.get_source(function.__name__)
    assert props["Handler"] == "index.handler"  # CloudFormation writes ZipFile as index.py
    major, minor = props["Runtime"].removeprefix("python").split(".")
    assert (int(major), int(minor)) >= (3, 12)
    assert props["Environment"]["Variables"] == function_environment(synth_default.config)


def test_the_role_terminates_and_tags_only_this_clusters_nodes(synth_default):
    (policy,) = _of_type(synth_default.template(), "AWS::IAM::Policy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    by_action: dict[str, dict] = {}
    for statement in statements:
        actions = statement["Action"]
        for action in [actions] if isinstance(actions, str) else actions:
            by_action[action] = statement
    owned = {f"aws:ResourceTag/{CLUSTER_TAG}": synth_default.config.stack_name}
    for action in ("ec2:TerminateInstances", "ec2:CreateTags"):
        assert by_action[action]["Condition"]["StringEquals"] == owned
    assert by_action["ec2:CreateTags"]["Condition"]["ForAllValues:StringEquals"] == {
        "aws:TagKeys": [INSTANCE_TAG]
    }
    assert all(
        not a.startswith(("ec2:", "ecs:"))
        or "Describe" in a
        or a
        in (
            "ec2:TerminateInstances",
            "ec2:CreateTags",
            "ecs:UpdateContainerInstancesState",
        )
        for a in by_action
    )


def test_the_functions_log_group_keeps_the_configured_retention(synth_default):
    template = synth_default.template()
    (group_id, group), *_ = _of_type(template, "AWS::Logs::LogGroup").items()
    assert group["Properties"]["RetentionInDays"] == synth_default.config.log_retention_days
    assert "KmsKeyId" in group["Properties"]
    (fn,) = _of_type(template, "AWS::Lambda::Function").values()
    assert fn["Properties"]["LoggingConfig"]["LogGroup"] == {"Ref": group_id}
