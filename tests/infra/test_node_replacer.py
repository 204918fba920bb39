"""The node replacer: its event pattern against Batch's real event shape, its function against
emulated Batch, ECS, EC2 and CloudWatch Logs, its template, and the launcher's lines."""

from __future__ import annotations

import copy
import fnmatch
import json
import re

import pytest

from devenv import moto_gaps
from devenv.emulator import ACCOUNT, REGION
from infra import node_replacer_function as function
from infra.compute_pool import node_tags
from infra.config import CLUSTER_TAG, load
from infra.node_replacer import (
    EXIT_CODES,
    container_instance_pattern,
    event_pattern,
    function_environment,
    sweep_input,
)
from launcher.job.jobspec import MAX_TAGS, MAX_USER_TAGS
from launcher.job.replacements import INSTANCE_TAG, JOB_TAG, JOB_TAG_PREFIX, replacement_lines
from launcher.job.resumption import CHECKPOINT_TAG, resumption
from launcher.node.prelude import BAD_HOST_EXIT, NODE_LOST_EXIT
from tests.conftest import cdk_context
from tests.rules import replacer_rules
from tests.rules.deployment import Deployment

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

# The ECS developer guide's example "ECS Container Instance State Change" event
# (ecs_container_instance_events.html), its attributes and resources shortened: the detail
# "resembles the ContainerInstance object" of DescribeContainerInstances; it shows no task counts.
ECS_DOCS_EVENT = {
    "version": "0",
    "id": "8952ba83-7be2-4ab5-9c32-6687532d15a2",
    "detail-type": "ECS Container Instance State Change",
    "source": "aws.ecs",
    "account": "111122223333",
    "time": "2016-12-06T16:41:06Z",
    "region": "us-east-1",
    "resources": [
        "arn:aws:ecs:us-east-1:111122223333:container-instance/b54a2a04-046f-4331-9d74-3f6d7f6ca315"
    ],
    "detail": {
        "agentConnected": True,
        "attributes": [{"name": "com.amazonaws.ecs.capability.logging-driver.awslogs"}],
        "clusterArn": "arn:aws:ecs:us-east-1:111122223333:cluster/default",
        "containerInstanceArn": "arn:aws:ecs:us-east-1:111122223333:container-instance/"
        "b54a2a04-046f-4331-9d74-3f6d7f6ca315",
        "ec2InstanceId": "i-f3a8506b",
        "registeredResources": [{"name": "CPU", "type": "INTEGER", "integerValue": 2048}],
        "remainingResources": [{"name": "CPU", "type": "INTEGER", "integerValue": 1988}],
        "status": "ACTIVE",
        "version": 14801,
        "versionInfo": {
            "agentHash": "aebcbca",
            "agentVersion": "1.13.0",
            "dockerVersion": "DockerVersion: 1.11.2",
        },
        "updatedAt": "2016-12-06T16:41:06.991Z",
    },
}


def _ecs_event(cluster: str, arn: str, instance_id: str, status: str = "DRAINING") -> dict:
    event = copy.deepcopy(ECS_DOCS_EVENT)
    event["resources"] = [arn]
    event["detail"].update(
        clusterArn=cluster, containerInstanceArn=arn, ec2InstanceId=instance_id, status=status
    )
    return event


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


def test_one_tag_records_every_attempt_and_reads_as_lines():
    """The record the replacer writes (function.append_record) is the one the launcher reads:
    instance ids while they fit, node runs when they do not, in Batch's 256 characters of
    letters, digits, spaces and ``+ - = . _ : / @`` (Batch user guide,
    tag-restrictions.html)."""
    record = function.append_record("", 1, 79, [(3, "i-0aaa"), (12, "i-0ccc")])
    record = function.append_record(record, 2, 75, [(n, f"i-{n:017x}") for n in range(1, 65)])
    assert record == "1/79:3=i-0aaa+12=i-0ccc 2/75:1-64"
    assert replacement_lines({JOB_TAG: record, "team": "vision"}) == (
        f"attempt 1: node 3 (i-0aaa) replaced: bad host (exit {BAD_HOST_EXIT})",
        f"attempt 1: node 12 (i-0ccc) replaced: bad host (exit {BAD_HOST_EXIT})",
        f"attempt 2: nodes 1-64 replaced: lost (exit {NODE_LOST_EXIT})",
    )
    # The previous replacer's per-node tags still read, beside the new record.
    old = {f"{JOB_TAG_PREFIX}1:5": "i-0ddd exit 79", JOB_TAG: "2/79:0=i-0eee"}
    assert replacement_lines(old) == (
        "attempt 1: node 5 (i-0ddd) replaced: bad host (exit 79)",
        "attempt 2: node 0 (i-0eee) replaced: bad host (exit 79)",
    )


def test_a_record_that_cannot_hold_every_node_says_so_within_256_characters():
    """Ten attempts of 64 scattered nodes do not fit: earlier entries stay as they were (the
    follower's lines stay true) and ``more`` says the log has the rest."""
    record = ""
    for attempt in range(1, 11):
        scattered = [(n, f"i-{n:017x}") for n in range(attempt, 128, 2)]
        before = record
        record = function.append_record(record, attempt, 79, scattered)
        assert record.startswith(before.removesuffix(" more"))
        assert len(record) <= 256 and re.fullmatch(r"[\w +\-=.:/@]*", record)
    assert record.endswith(" more") and record.count("more") == 1
    lines = replacement_lines({JOB_TAG: record})
    assert lines[0] == "attempt 1: node 1 replaced: bad host (exit 79)"
    assert lines[-1].startswith("more nodes were replaced than the job's efa-batch:replaced")


def test_a_resubmission_does_not_inherit_the_replacers_record():
    """``launcher resubmit`` copies the old job's tags; the replacer's record of the old job's
    attempts is not the new job's (and would take one of its 50 tags)."""
    old = {
        "tags": {
            "team": "vision",
            JOB_TAG: "1/79:3=i-0aaa",
            f"{JOB_TAG_PREFIX}1:3": "i-0aaa exit 79",
            CHECKPOINT_TAG: "/mnt/efs/checkpoints/j0",
        }
    }
    _, tags = resumption(old, "j1")
    assert tags == {"team": "vision", CHECKPOINT_TAG: "/mnt/efs/checkpoints/j0"}


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


POOL_CLUSTER = "arn:aws:ecs:us-east-1:111122223333:cluster/pool-a1_Batch_"


@pytest.mark.parametrize(
    ("cluster", "status", "matched"),
    [
        (POOL_CLUSTER + "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "DRAINING", True),
        (POOL_CLUSTER + "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "ACTIVE", False),
        ("arn:aws:ecs:us-east-1:111122223333:cluster/pool-a10_Batch_0f1e", "DRAINING", False),
        ("arn:aws:ecs:us-east-1:111122223333:cluster/default", "DRAINING", False),
    ],
)
def test_the_drained_rule_hears_only_its_compute_environments_draining_instances(
    events, cluster, status, matched
):
    """The ECS developer guide's example container instance event (ecs_container_instance_
    events.html) in a cluster Batch named for a compute environment ``pool-a1`` (NAME_Batch_
    UUID), against the rule's prefix match (EventBridge user guide, eb-event-patterns-content-
    based-filtering.html): another environment whose name merely starts the same is not
    heard, nor an ACTIVE instance."""
    pattern = json.dumps(container_instance_pattern([POOL_CLUSTER]))
    instance = "arn:aws:ecs:us-east-1:111122223333:container-instance/x/y"
    event = _ecs_event(cluster, instance, "i-1", status)
    result = events.test_event_pattern(EventPattern=pattern, Event=json.dumps(event))["Result"]
    assert result is matched


# --- the function against emulated AWS --------------------------------------------------------


@pytest.fixture(scope="module")
def pool(moto_server, aws):
    """A managed EC2 compute environment tagged as the stack tags its nodes, its queue, a
    multi-node job definition logging to a group, and three of its nodes plus one foreign
    instance (no cluster tag); a 65-node definition and a single-node one beside it."""
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

    def multinode(name: str, count: int, **more) -> str:
        return batch.register_job_definition(
            jobDefinitionName=name,
            type="multinode",
            nodeProperties={
                "numNodes": count,
                "mainNode": 0,
                "nodeRangeProperties": [{"targetNodes": "0:", "container": container}],
            },
            **more,
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
    aws["ecs"].register_task_definition(
        family="another-teams-job", containerDefinitions=[{"name": "c", "image": "b", "memory": 64}]
    )
    return {
        "ce": ce,
        "queue": queue,
        "definition": multinode("train", 3),
        "wide": multinode("wide", 65),
        # Ten tags of its own, propagated with the job's (RegisterJobDefinition propagateTags).
        "tagged": multinode(
            "tagged", 3, tags={f"def{i}": "v" for i in range(10)}, propagateTags=True
        ),
        "single": batch.register_job_definition(
            jobDefinitionName="single", type="container", containerProperties=container
        )["jobDefinitionArn"],
        "nodes": nodes,
        "foreign": (foreign["InstanceId"], stray),
        "cluster": cluster,
    }


@pytest.fixture(scope="module")
def aws(moto_server) -> dict:
    """One client per service for the module (a boto3 client costs a second to make)."""
    return {name: moto_server.client(name) for name in ("batch", "ecs", "ec2", "logs", "iam")}


def _ran(
    aws,
    pool,
    hosts,
    codes,
    *,
    retry=True,
    lines=(),
    reasons=None,
    definition="definition",
    **submit,
):
    """A job that ran its one attempt on ``hosts`` and ended with ``codes`` (and the nodes'
    status ``reasons``); the event."""
    batch = aws["batch"]
    job_id = batch.submit_job(
        jobName="t", jobQueue=pool["queue"], jobDefinition=pool[definition], **submit
    )["jobId"]
    moto_gaps.start_job(ACCOUNT, REGION, job_id)
    if lines:
        moto_gaps.put_node_lines(ACCOUNT, REGION, job_id, {0: list(lines)})
    moto_gaps.end_attempt_on_hosts(
        ACCOUNT, REGION, job_id, hosts, codes, retry=retry, reasons=reasons
    )
    return _event(aws, job_id)


def _event(aws, job_id: str) -> dict:
    """Batch's event for the job as it now is: its detail resembles DescribeJobs' JobDetail."""
    (detail,) = aws["batch"].describe_jobs(jobs=[job_id])["jobs"]
    return {**DOCS_EVENT, "resources": [detail["jobArn"]], "detail": detail}


def _instance(aws, instance_id: str) -> dict:
    (reservation,) = aws["ec2"].describe_instances(InstanceIds=[instance_id])["Reservations"]
    return reservation["Instances"][0]


def _state(aws, instance_id: str) -> str:
    return _instance(aws, instance_id)["State"]["Name"]


def _ecs_status(aws, pool, arn: str) -> str:
    (found,) = aws["ecs"].describe_container_instances(
        cluster=pool["cluster"], containerInstances=[arn]
    )["containerInstances"]
    return found["status"]


def _job_tags(aws, job_id: str) -> dict:
    (job,) = aws["batch"].describe_jobs(jobs=[job_id])["jobs"]
    return job.get("tags") or {}


def _fresh(aws, pool, count: int, **launch) -> list[tuple[str, str]]:
    """Nodes of the pool's compute environment that no other test has used."""
    return moto_gaps.launch_nodes(aws, pool["ce"], count, **launch)


@pytest.fixture
def lambda_env(moto_server, monkeypatch):
    """The Lambda entry point's world: the stack's environment, the emulator's endpoint."""
    for key, value in {**moto_server.env, **function_environment(CONFIG)}.items():
        monkeypatch.setenv(key, value)


def test_a_bad_worker_host_is_drained_tagged_terminated_and_said_once(aws, pool, events):
    (_, a), (bad, b), (_, c) = pool["nodes"]
    event = _ran(aws, pool, {0: a, 1: b, 2: c}, {0: 79, 1: 79, 2: 143})
    assert _matches(events, event, pool["queue"])

    done = function.replace_nodes(event["detail"], SETTINGS, aws)

    assert done == {"replaced": [f"node 1 {bad}"], "draining": [], "skipped": []}
    assert _ecs_status(aws, pool, b) == "DRAINING"
    assert _ecs_status(aws, pool, a) == "ACTIVE"  # the main node only passed it on
    instance = _instance(aws, bad)
    assert instance["State"]["Name"] == "terminated"
    job_id = event["detail"]["jobId"]
    assert {t["Key"]: t["Value"] for t in instance["Tags"]}[INSTANCE_TAG] == (
        f"bad host (exit 79): job {job_id} attempt 1 node 1"
    )
    assert replacement_lines(_job_tags(aws, job_id)) == (
        f"attempt 1: node 1 ({bad}) replaced: bad host (exit 79)",
    )
    # EventBridge delivers at least once: the same event again changes nothing.
    again = function.replace_nodes(event["detail"], SETTINGS, aws)
    assert again == {"replaced": [], "draining": [], "skipped": ["attempt 1: already recorded"]}


def test_an_already_terminated_instance_is_recorded_not_terminated_again(aws, pool):
    (main, a), _, _ = pool["nodes"]
    aws["ec2"].terminate_instances(InstanceIds=[main])
    event = _ran(aws, pool, {0: a}, {0: 79}, retry=False)  # out of attempts: FAILED
    done = function.replace_nodes(event["detail"], SETTINGS, aws)
    assert done == {"replaced": [f"node 0 {main}"], "draining": [], "skipped": []}


# ECS's stoppedReason for a task whose host went, as Batch gives it in the job's (and the
# node's) statusReason (calypr/funnel#973: "Host EC2 (instance i-0e234208f6fc9291f) terminated.").
HOST_LOST = "Host EC2 (instance {}) terminated."
LOST_LINE = "launcher: node(s) {} lost: ending with exit code 75 so that the job is tried again"


def test_a_forged_lost_nodes_line_takes_no_instance_out(aws, pool):
    """Issue 43 (8). The main node's log stream is written by the job's own code, and by
    anyone allowed logs:PutLogEvents on the job log group: the nodes' instance role may, on
    every group (AmazonEC2ContainerServiceforEC2Role, as moto carries AWS's document), and
    every single-node job reaches that role through IMDS. A line there naming node 2 lost, when
    node 2's records say it ran to the end (its container's own exit code, its host ACTIVE and
    heard by ECS, its instance running), takes nothing out: the function says which node the
    line named, and that it kept it. Of the line it reads node indexes of the job's workers
    only: not the main node (0), not a node the job has not (7), not a run of 5,000 digits
    (which Python refuses to read as a number past 4,300: int_max_str_digits)."""
    (_, a), (_, b), (kept, c) = _fresh(aws, pool, 3)
    lines = ["training", LOST_LINE.format("0 2 7 " + "9" * 5000)]
    event = _ran(aws, pool, {0: a, 1: b, 2: c}, {0: 75, 1: 143, 2: 143}, lines=lines)

    done = function.replace_nodes(event["detail"], SETTINGS, aws)

    assert done == {
        "replaced": [],
        "draining": [],
        "skipped": [
            "node 2: lost in the main node's log only; Batch, ECS and EC2 show its host well: kept"
        ],
    }
    assert (_state(aws, kept), _ecs_status(aws, pool, c)) == ("running", "ACTIVE")
    assert replacement_lines(_job_tags(aws, event["detail"]["jobId"])) == ()


def test_a_node_batch_says_lost_its_host_is_replaced_with_no_log_line(aws, pool):
    """Batch's record of node 1 (JOB#1) says its host went: "Host EC2 (instance ...)
    terminated." as the attempt's statusReason, no exit code of its own (the node's container
    never reported one). The main node's log names nobody (it may say anything, or nothing):
    node 1 is recorded as replaced, its instance not terminated again."""
    (_, a), (gone, b), (_, c) = _fresh(aws, pool, 3)
    aws["ec2"].terminate_instances(InstanceIds=[gone])
    hosts, reasons = {0: a, 1: b, 2: c}, {1: HOST_LOST.format(gone)}
    event = _ran(aws, pool, hosts, {0: 75, 2: 143}, reasons=reasons, lines=["training"])

    done = function.replace_nodes(event["detail"], SETTINGS, aws)

    assert done == {"replaced": [f"node 1 {gone}"], "draining": [], "skipped": []}
    assert replacement_lines(_job_tags(aws, event["detail"]["jobId"])) == (
        f"attempt 1: node 1 ({gone}) replaced: lost (exit {NODE_LOST_EXIT})",
    )


def test_a_node_whose_host_ecs_no_longer_hears_is_replaced_with_no_log_line(aws, pool):
    """Node 1's container reported no end, and ECS no longer hears its host's agent
    (``agentConnected`` false, "an instance with an agent that may be unhealthy or stopped",
    ContainerInstance) while EC2 still runs it: a host hung or cut off, drained and terminated
    with no word from the main node's log."""
    (_, a), (hung, b), (_, c) = _fresh(aws, pool, 3)
    moto_gaps.lose_agent(ACCOUNT, REGION, pool["cluster"], b)
    event = _ran(aws, pool, {0: a, 1: b, 2: c}, {0: 75, 2: 143})

    done = function.replace_nodes(event["detail"], SETTINGS, aws)

    assert done == {"replaced": [f"node 1 {hung}"], "draining": [], "skipped": []}
    assert (_state(aws, hung), _ecs_status(aws, pool, b)) == ("terminated", "DRAINING")


def test_an_ordinary_failure_touches_nothing(aws, pool):
    _, _, (_, c) = pool["nodes"]
    event = _ran(aws, pool, {0: c}, {0: 1})
    assert function.replace_nodes(event["detail"], SETTINGS, aws) == {
        "replaced": [],
        "draining": [],
        "skipped": [],
    }
    assert replacement_lines(_job_tags(aws, event["detail"]["jobId"])) == ()


def test_an_instance_without_the_cluster_tag_is_not_touched(aws, pool, lambda_env):
    """Through the Lambda entry point, with the environment the stack gives it."""
    foreign, stray = pool["foreign"]
    event = _ran(aws, pool, {0: stray}, {0: 79})
    done = function.handler(event)
    assert done["replaced"] == []
    assert done["skipped"] == [
        f"node 0 {foreign}: not a node of {CONFIG.stack_name} (no {CLUSTER_TAG} tag of its)"
    ]
    assert _state(aws, foreign) == "running"
    assert _ecs_status(aws, pool, stray) == "ACTIVE"


def test_another_jobs_task_on_the_bad_host_is_not_killed(aws, pool, lambda_env):
    """Issue 42 (3). The job's event comes after all its nodes stopped; by then Batch may have
    placed another job on the freed instance, and draining stops only new placements (ECS
    developer guide, container-instance-draining.html). An instance with a task on it
    (ContainerInstance runningTasksCount, ECS API reference) is drained and tagged, not
    terminated; when that task stops, ECS's container instance event (ecs_container_instance_
    events.html) brings the function back, and then it terminates the instance."""
    ecs = aws["ecs"]
    (_, main), (bad, worker) = _fresh(aws, pool, 2)
    event = _ran(aws, pool, {0: main, 1: worker}, {0: 79, 1: 79})
    (task,) = ecs.start_task(
        cluster=pool["cluster"], taskDefinition="another-teams-job", containerInstances=[worker]
    )["tasks"]

    done = function.handler(event)

    assert done["replaced"] == []
    assert done["draining"] == [f"node 1 {bad}: 1 other task(s) on it, terminated when they end"]
    assert _state(aws, bad) == "running"
    assert _ecs_status(aws, pool, worker) == "DRAINING"
    job_id = event["detail"]["jobId"]
    assert replacement_lines(_job_tags(aws, job_id)) == (
        f"attempt 1: node 1 ({bad}) replaced: bad host (exit 79)",
    )
    drained = _ecs_event(pool["cluster"], worker, bad)
    assert function.handle(drained, SETTINGS, aws)["draining"] == [f"{bad}: 1 other task(s) on it"]
    assert _state(aws, bad) == "running"

    ecs.stop_task(cluster=pool["cluster"], task=task["taskArn"], reason="done")
    done = function.handle(drained, SETTINGS, aws)

    why = f"bad host (exit 79): job {job_id} attempt 1 node 1"
    assert done == {"replaced": [f"{bad}: {why}"], "draining": [], "skipped": []}
    assert _state(aws, bad) == "terminated"
    # Delivered again: nothing more to do.
    assert function.handle(drained, SETTINGS, aws)["skipped"] == [f"{bad}: instance gone"]


def test_a_draining_instance_the_replacer_did_not_mark_is_left_alone(aws, pool):
    """Someone else drained a node of the stack (an operator, an update): the function ends
    only instances it tagged itself."""
    ((instance, arn),) = _fresh(aws, pool, 1)
    aws["ecs"].update_container_instances_state(
        cluster=pool["cluster"], containerInstances=[arn], status="DRAINING"
    )
    done = function.handle(_ecs_event(pool["cluster"], arn, instance), SETTINGS, aws)
    assert done["skipped"] == [f"{instance}: not taken out by the node replacer"]
    assert _state(aws, instance) == "running"


def test_the_sweep_ends_a_drained_instance_whose_last_event_was_missed(aws, pool):
    """An instance left DRAINING under another team's task, whose stop event never reached
    the function (an invocation failed past its retries, or read the instance before EC2
    showed the tag: "the result of an API command you run ... might not be immediately
    visible to all subsequent commands you run", EC2 developer guide, eventual-consistency.
    html), would stay idle and paid for. The scheduled sweep lists the compute environments'
    DRAINING container instances (ListContainerInstances ``status``) and ends it; one still
    running a task, and one drained by someone else, stay."""
    ecs, cluster = aws["ecs"], pool["cluster"]
    (_, main), (missed, worker), (_, main2), (busy, worker2), (other, stranger) = _fresh(
        aws, pool, 5
    )
    tasks = {}
    jobs = {}
    for lead, node in ((main, worker), (main2, worker2)):
        event = _ran(aws, pool, {0: lead, 1: node}, {0: 79, 1: 79})
        jobs[node] = event["detail"]["jobId"]
        (tasks[node],) = ecs.start_task(
            cluster=cluster, taskDefinition="another-teams-job", containerInstances=[node]
        )["tasks"]
        assert len(function.handle(event, SETTINGS, aws)["draining"]) == 1
    ecs.stop_task(cluster=cluster, task=tasks[worker]["taskArn"], reason="done")  # event lost
    ecs.update_container_instances_state(
        cluster=cluster, containerInstances=[stranger], status="DRAINING"
    )

    done = function.handle(sweep_input([pool["ce"]]), SETTINGS, aws)

    why = f"bad host (exit 79): job {jobs[worker]} attempt 1 node 1"
    assert f"{missed}: {why}" in done["replaced"]
    assert f"{busy}: 1 other task(s) on it" in done["draining"]
    assert f"{other}: not taken out by the node replacer" in done["skipped"]
    assert [_state(aws, i) for i in (missed, busy, other)] == ["terminated", "running", "running"]


def test_a_workers_own_node_event_drains_its_bad_host_and_tags_no_child(aws, pool):
    """Issue 42 (4). A node of a multi-node job (``JOB#N``) has its own record and events.
    A worker's own 79 takes its instance out at once; the main node's passed-on 79 is the
    job's event to judge; nothing is tagged on a child's ARN, which Batch refuses
    (TagResource: "ARNs for child jobs of array and multi-node parallel (MNP) jobs aren't
    supported"). The job's event, after every node stopped, records it."""
    (_, main), (bad, worker), (_, other) = _fresh(aws, pool, 3)
    event = _ran(aws, pool, {0: main, 1: worker, 2: other}, {0: 79, 1: 79, 2: 143})
    job_id = event["detail"]["jobId"]
    worker_event = _event(aws, f"{job_id}#1")
    assert worker_event["detail"]["jobArn"].endswith(f"{job_id}#1")

    done = function.handle(worker_event, SETTINGS, aws)

    assert done == {"replaced": [f"node 1 {bad}"], "draining": [], "skipped": []}
    assert _state(aws, bad) == "terminated"
    assert _job_tags(aws, job_id).get(JOB_TAG) is None  # the job's own event writes it
    main_event = _event(aws, f"{job_id}#0")
    assert function.handle(main_event, SETTINGS, aws)["skipped"] == [
        "node 0: exit 79, for the job's own event to decide"
    ]
    assert _ecs_status(aws, pool, main) == "ACTIVE"

    assert function.handle(event, SETTINGS, aws)["replaced"] == [f"node 1 {bad}"]
    assert replacement_lines(_job_tags(aws, job_id)) == (
        f"attempt 1: node 1 ({bad}) replaced: bad host (exit 79)",
    )


def test_an_array_childs_bad_host_is_replaced_with_no_tag_on_a_child(aws, pool):
    """Issue 42 (4). An array child (``JOB:N``) is a single-node job with attempts of its
    own: its bad host is replaced like any other, and its record is the instance's tag and the
    function's log, not a tag on the child (Batch refuses one) nor on the parent."""
    ((bad, arn),) = _fresh(aws, pool, 1)
    parent = aws["batch"].submit_job(
        jobName="shards",
        jobQueue=pool["queue"],
        jobDefinition=pool["single"],
        arrayProperties={"size": 2},
    )["jobId"]
    child = f"{parent}:1"
    moto_gaps.start_container_attempt(ACCOUNT, REGION, child)
    moto_gaps.end_attempt_on_hosts(ACCOUNT, REGION, child, {0: arn}, {0: 79}, retry=True)

    done = function.handle(_event(aws, child), SETTINGS, aws)

    assert done == {"replaced": [f"node 0 {bad}"], "draining": [], "skipped": []}
    assert _state(aws, bad) == "terminated"
    tags = {t["Key"]: t["Value"] for t in _instance(aws, bad)["Tags"]}
    assert tags[INSTANCE_TAG] == f"bad host (exit 79): job {child} attempt 1 node 0"
    assert JOB_TAG not in _job_tags(aws, parent)


def test_a_48_tag_job_stays_within_50_tags_through_a_64_node_replacement(aws, pool):
    """Issue 42 (5). Batch holds at most 50 tags on a job (user guide, tag-restrictions.html)
    and fails a job whose job and definition tags exceed 50 when they propagate to its task
    (SubmitJob propagateTags). A job with the 48 tags the launcher allows and its own
    efa-batch:stack loses 64 nodes to bad hosts: one tag records them, and the job, still
    RUNNABLE for its retry, holds 50."""
    nodes = _fresh(aws, pool, 65)
    hosts = {i: arn for i, (_, arn) in enumerate(nodes)}
    user = {f"team{i}": "v" for i in range(MAX_USER_TAGS)}
    event = _ran(
        aws,
        pool,
        hosts,
        dict.fromkeys(range(65), 79),
        definition="wide",
        tags={"efa-batch:stack": CONFIG.stack_name, **user},
        propagateTags=True,
    )

    done = function.handle(event, SETTINGS, aws)

    assert len(done["replaced"]) == 64 and done["skipped"] == []
    ids = [i for i, _ in nodes]
    reservations = aws["ec2"].describe_instances(InstanceIds=ids)["Reservations"]
    states = {i["InstanceId"]: i["State"]["Name"] for r in reservations for i in r["Instances"]}
    assert [states[i] for i in ids] == ["running"] + ["terminated"] * 64
    tags = _job_tags(aws, event["detail"]["jobId"])
    assert len(tags) == MAX_TAGS
    assert replacement_lines(tags) == ("attempt 1: nodes 1-64 replaced: bad host (exit 79)",)
    (job,) = aws["batch"].describe_jobs(jobs=[event["detail"]["jobId"]])["jobs"]
    assert job["status"] == "RUNNABLE"


def test_a_job_without_room_for_the_record_keeps_it_on_the_instance(aws, pool):
    """Issue 42 (5). 40 tags of the job's and 10 of its definition's, propagated: 50 together
    (SubmitJob propagateTags), so the record would fail the retry's task. The instance is
    replaced all the same; its own tag and the function's log keep the record."""
    (_, main), (bad, worker) = _fresh(aws, pool, 2)
    event = _ran(
        aws,
        pool,
        {0: main, 1: worker},
        {0: 79, 1: 79},
        definition="tagged",
        tags={f"team{i}": "v" for i in range(40)},
        propagateTags=True,
    )

    done = function.handle(event, SETTINGS, aws)

    assert done["replaced"] == [f"node 1 {bad}"]
    assert done["skipped"] == ["attempt 1: not recorded on the job (50 tags already)"]
    assert _state(aws, bad) == "terminated"
    assert len(_job_tags(aws, event["detail"]["jobId"])) == 40


def test_in_a_capacity_block_a_lost_nodes_host_stays_and_a_bad_host_goes(aws, pool):
    """Issue 42 (6). A Capacity Block's terminated instance gives its slot back only after
    "several minutes" of clean-up (EC2 user guide, capacity-blocks-launch.html), which a job
    needing the whole block waits for. A lost node (75) says nothing against its host, which
    is kept; a bad host (79) is replaced. EC2 tells the block's instances by their
    InstanceLifecycle, capacity-block (botocore ec2 InstanceLifecycleType)."""
    (_, main), (lost, worker) = _fresh(aws, pool, 2, market_type="capacity-block")
    moto_gaps.lose_agent(ACCOUNT, REGION, pool["cluster"], worker)  # lost, by ECS's record
    event = _ran(aws, pool, {0: main, 1: worker}, {0: 75}, lines=[LOST_LINE.format(1)])

    done = function.handle(event, SETTINGS, aws)

    assert done["replaced"] == []
    assert done["skipped"] == [
        f"node 1 {lost}: kept in its Capacity Block (exit 75 does not say the host is bad)"
    ]
    assert (_state(aws, lost), _ecs_status(aws, pool, worker)) == ("running", "ACTIVE")

    (_, main), (bad, worker) = _fresh(aws, pool, 2, market_type="capacity-block")
    event = _ran(aws, pool, {0: main, 1: worker}, {0: 79, 1: 79})
    assert function.handle(event, SETTINGS, aws)["replaced"] == [f"node 1 {bad}"]
    assert _state(aws, bad) == "terminated"


# --- the template (the session's default synth) ----------------------------------------------


def _of_type(template: dict, type_: str) -> dict[str, dict]:
    found = {k: v for k, v in template["Resources"].items() if v["Type"] == type_}
    return {k: v for k, v in found.items() if k.startswith("NodeReplacer")}


def _resolve(value, refs: dict[str, str]):
    """A CloudFormation expression of Ref, Fn::Join, Fn::Select and Fn::Split, resolved."""
    if isinstance(value, list):
        return [_resolve(v, refs) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) != 1 or not next(iter(value)).startswith(("Ref", "Fn::")):
        return {k: _resolve(v, refs) for k, v in value.items()}
    ((fn, arg),) = value.items()
    if fn == "Ref":
        return refs[arg]
    arg = _resolve(arg, refs)
    if fn == "Fn::Join":
        return arg[0].join(arg[1])
    if fn == "Fn::Select":
        return arg[1][int(arg[0])]
    if fn == "Fn::Split":
        return arg[1].split(arg[0])
    raise AssertionError(value)


def _rules(template: dict) -> dict[str, dict]:
    """The replacer's rules by the source they hear, ``schedule`` for the scheduled one."""
    return {
        r["Properties"]["EventPattern"]["source"][0]
        if "EventPattern" in r["Properties"]
        else "schedule": r
        for r in _of_type(template, "AWS::Events::Rule").values()
    }


def _environments(template: dict) -> dict[str, str]:
    """Each compute environment's logical id -> the ARN its Ref gives once deployed, named
    after the id (CloudFormation names it)."""
    return {
        k: f"arn:aws:batch:us-east-1:123456789012:compute-environment/{k}-a1b2"
        for k, v in template["Resources"].items()
        if v["Type"] == "AWS::Batch::ComputeEnvironment" and not k.startswith("Copy")
    }


def test_the_rules_hear_the_pool_queues_and_their_environments_clusters(synth_default):
    """Batch's job events of the pool queues, ECS's DRAINING container instances of the
    pools' compute environments' clusters (NAME_Batch_UUID), and every 15 minutes the sweep
    of those environments: all three invoke the function."""
    template = synth_default.template()
    rules = _rules(template)
    assert set(rules) == {"aws.batch", "aws.ecs", "schedule"}
    queues = [k for k, v in template["Resources"].items() if v["Type"] == "AWS::Batch::JobQueue"]
    training = [q for q in queues if not q.startswith("Copy")]
    assert rules["aws.batch"]["Properties"]["EventPattern"] == event_pattern(
        [{"Ref": q} for q in training]
    )
    refs = {"AWS::Partition": "aws", **_environments(template)}
    drained = _resolve(rules["aws.ecs"]["Properties"]["EventPattern"], refs)
    assert drained == container_instance_pattern(
        [
            f"arn:aws:ecs:us-east-1:123456789012:cluster/{arn.rsplit('/', 1)[1]}_Batch_"
            for arn in _environments(template).values()
        ]
    )
    sweep = rules["schedule"]["Properties"]
    assert sweep["ScheduleExpression"] == f"rate({function.SWEEP_MINUTES} minutes)"
    (target,) = sweep["Targets"]
    assert json.loads(_resolve(target["Input"], refs)) == sweep_input(
        list(_environments(template).values())
    )
    (function_id,) = _of_type(template, "AWS::Lambda::Function")
    for rule in rules.values():
        (target,) = rule["Properties"]["Targets"]
        assert target["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}


def test_the_function_runs_the_repository_file_on_python_3_12_or_later(synth_default):
    (fn,) = _of_type(synth_default.template(), "AWS::Lambda::Function").values()
    props = fn["Properties"]
    assert props["Code"]["ZipFile"] == function.__loader__.get_source(function.__name__)
    assert props["Handler"] == "index.handler"  # CloudFormation writes ZipFile as index.py
    major, minor = props["Runtime"].removeprefix("python").split(".")
    assert (int(major), int(minor)) >= (3, 12)
    assert props["Environment"]["Variables"] == function_environment(synth_default.config)


def _by_action(template: dict) -> dict[str, dict]:
    (policy,) = _of_type(template, "AWS::IAM::Policy").values()
    by_action: dict[str, dict] = {}
    for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
        actions = statement["Action"]
        for action in [actions] if isinstance(actions, str) else actions:
            by_action[action] = statement
    return by_action


def test_the_role_terminates_and_tags_only_this_clusters_nodes_it_marked(synth_default):
    by_action = _by_action(synth_default.template())
    owned = {f"aws:ResourceTag/{CLUSTER_TAG}": synth_default.config.stack_name}
    for action in ("ec2:TerminateInstances", "ec2:CreateTags"):
        assert by_action[action]["Condition"]["StringEquals"] == owned
    assert by_action["ec2:CreateTags"]["Condition"]["ForAllValues:StringEquals"] == {
        "aws:TagKeys": [INSTANCE_TAG]
    }
    # Terminates only an instance it has tagged first with why (IAM "Null": false = present).
    assert by_action["ec2:TerminateInstances"]["Condition"]["Null"] == {
        f"aws:ResourceTag/{INSTANCE_TAG}": "false"
    }
    assert all(
        not a.startswith(("ec2:", "ecs:"))
        or "Describe" in a
        or a
        in (
            "ec2:TerminateInstances",
            "ec2:CreateTags",
            "ecs:UpdateContainerInstancesState",
            "ecs:ListContainerInstances",
        )
        for a in by_action
    )


def test_the_role_drains_only_its_compute_environments_container_instances(synth_default):
    """Issue 42 (8). ECS's container instance ARN is container-instance/CLUSTER/ID (Service
    Authorization Reference, Amazon ECS), and Batch names a compute environment's cluster
    NAME_Batch_UUID: the role may describe and drain the stack's pools' container instances,
    not another cluster's of the account."""
    template = synth_default.template()
    refs = {"AWS::Partition": "aws", **_environments(template)}
    (name,) = [arn.rsplit("/", 1)[1] for arn in _environments(template).values()]
    ours = f"arn:aws:ecs:us-east-1:123456789012:container-instance/{name}_Batch_0f1e2d3c/5a6b"
    others = [
        "arn:aws:ecs:us-east-1:123456789012:container-instance/web_Batch_0f1e2d3c/5a6b",
        "arn:aws:ecs:us-east-1:123456789012:container-instance/default/5a6b",
        f"arn:aws:ecs:us-east-1:123456789012:container-instance/{name}2_Batch_0f/5a6b",
    ]
    by_action = _by_action(template)
    for action in ("ecs:DescribeContainerInstances", "ecs:UpdateContainerInstancesState"):
        resources = by_action[action]["Resource"]
        patterns = _resolve(resources if isinstance(resources, list) else [resources], refs)
        assert any(fnmatch.fnmatchcase(ours, p) for p in patterns), patterns
        assert not any(fnmatch.fnmatchcase(o, p) for o in others for p in patterns), patterns
    # The sweep lists them: ListContainerInstances' resource is the cluster.
    resources = by_action["ecs:ListContainerInstances"]["Resource"]
    patterns = _resolve(resources if isinstance(resources, list) else [resources], refs)
    clusters = [arn.replace("container-instance/", "cluster/").rsplit("/", 1)[0] for arn in others]
    mine = ours.replace("container-instance/", "cluster/").rsplit("/", 1)[0]
    assert any(fnmatch.fnmatchcase(mine, p) for p in patterns), patterns
    assert not any(fnmatch.fnmatchcase(c, p) for c in clusters for p in patterns), patterns


def test_the_functions_log_group_keeps_the_configured_retention(synth_default):
    template = synth_default.template()
    (group_id, group), *_ = _of_type(template, "AWS::Logs::LogGroup").items()
    assert group["Properties"]["RetentionInDays"] == synth_default.config.log_retention_days
    assert "KmsKeyId" in group["Properties"]
    (fn,) = _of_type(template, "AWS::Lambda::Function").values()
    assert fn["Properties"]["LoggingConfig"]["LogGroup"] == {"Ref": group_id}


def test_the_rules_catch_a_sweep_of_other_environments_and_a_list_of_any_cluster(synth_default):
    """The AWS rules on the sweep (tests/rules/replacer_rules.py) fail a template whose
    scheduled rule sends no compute environment, and a role that may list any cluster's
    container instances."""
    templates = copy.deepcopy(synth_default.templates())
    ok = Deployment(copy.deepcopy(templates), synth_default.config)
    sweeps = replacer_rules.node_replacer_sweeps_its_pools_draining_instances
    scope = replacer_rules.node_replacer_role_drains_its_pools_and_ends_only_what_it_marked
    assert (sweeps(ok), scope(ok)) == ([], [])
    template = templates[synth_default.config.stack_name]
    (rule,) = [r for r in _rules(template).values() if "ScheduleExpression" in r["Properties"]]
    rule["Properties"]["Targets"][0]["Input"] = json.dumps(sweep_input([]))
    listing = _by_action(template)["ecs:ListContainerInstances"]
    listing["Resource"] = "arn:aws:ecs:us-east-1:123456789012:cluster/*"
    broken = Deployment(templates, synth_default.config)
    (problem,) = sweeps(broken)
    assert problem.endswith("input {'sweep': []}, want the pools' compute environments")
    (problem,) = scope(broken)
    assert "ecs:ListContainerInstances on ['arn:aws:ecs:us-east-1:123456789012:cluster/*']" in (
        problem
    )
