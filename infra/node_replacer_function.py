"""The node replacer's Lambda function: a node that ended its attempt with the bad-host or the
lost-node exit code has its instance drained, tagged and terminated, so that the job's retry
is not placed on it again and the compute environment launches a new one.

It runs in Lambda's Python runtime with boto3 alone: CloudFormation writes this file as the
function's index.py (infra/node_replacer.py inlines it). What it knows of the stack (the
cluster tag, the exit codes, the tag names) comes from its environment, set from the
launcher's and the stack's own constants, so nothing here repeats them.

EventBridge delivers an event at least once, so every step is safe to repeat: a node already
recorded on the job is passed over, an instance already shutting down is not terminated
again, and an instance gone from ECS or EC2 is passed over with a log line.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import ClientError

LOG = logging.getLogger(__name__)
LOG.setLevel(logging.INFO)
DESCRIBE_JOBS_MAX = 100  # DescribeJobs takes up to 100 job ids a call
LOG_LINES = 100  # the main node's last lines, where it says which nodes it lost
GONE = ("shutting-down", "terminated")


@dataclass(frozen=True)
class Settings:
    cluster_tag: str  # the tag every node of the stack carries, and its value
    cluster: str
    bad_host_exit: int
    node_lost_exit: int
    lost_nodes_line: re.Pattern[str]
    # On the job, for the launcher: PREFIX + ATTEMPT:NODE = "INSTANCE exit CODE".
    job_tag_prefix: str
    instance_tag: str  # on the instance: why it was terminated

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        return cls(
            cluster_tag=env["CLUSTER_TAG"],
            cluster=env["CLUSTER_NAME"],
            bad_host_exit=int(env["BAD_HOST_EXIT"]),
            node_lost_exit=int(env["NODE_LOST_EXIT"]),
            lost_nodes_line=re.compile(env["LOST_NODES_LINE"]),
            job_tag_prefix=env["JOB_TAG_PREFIX"],
            instance_tag=env["INSTANCE_TAG"],
        )


@dataclass(frozen=True)
class Node:
    index: int
    container_instance_arn: str


def handler(event: Mapping[str, Any], context: object = None) -> dict[str, list[str]]:
    """EventBridge's "Batch Job State Change" event (the rule matched its queue, status and
    exit codes); returns what it did, for the log and the tests."""
    settings = Settings.from_env(os.environ)
    clients = {name: boto3.client(name) for name in ("batch", "ecs", "ec2", "logs")}
    return replace_nodes(event["detail"], settings, clients)


def reason_of(exit_code: object, settings: Settings) -> str | None:
    """Why the attempt's nodes are suspect, or None for any other ending."""
    if exit_code == settings.bad_host_exit:
        return "bad host"
    if exit_code == settings.node_lost_exit:
        return "node lost"
    return None


def replace_nodes(
    detail: Mapping[str, Any], settings: Settings, clients: Mapping[str, Any]
) -> dict[str, list[str]]:
    done: dict[str, list[str]] = {"replaced": [], "skipped": []}
    attempts = detail.get("attempts") or []
    if not attempts:
        return done
    attempt = len(attempts)  # the rule also matches later events that carry this attempt
    code = (attempts[-1].get("container") or {}).get("exitCode")
    reason = reason_of(code, settings)
    if reason is None:
        return done
    batch = clients["batch"]
    (job,) = batch.describe_jobs(jobs=[detail["jobId"]])["jobs"]
    records = node_records(batch, job)
    if code == settings.bad_host_exit:
        nodes = bad_nodes(records, attempt, settings.bad_host_exit)
    else:
        nodes = lost_nodes(clients["logs"], job, records, attempt, settings)
    recorded = job.get("tags") or {}
    clusters: list[str] | None = None
    for node in nodes:
        key = f"{settings.job_tag_prefix}{attempt}:{node.index}"
        if key in recorded:
            done["skipped"].append(f"node {node.index}: already replaced")
            continue
        if clusters is None:
            clusters = queue_clusters(batch, job["jobQueue"])
        found = find_instance(clients["ecs"], clusters, node.container_instance_arn)
        if found is None:
            done["skipped"].append(f"node {node.index}: container instance gone")
            continue
        cluster, instance_id = found
        why = f"{reason} (exit {code}): job {job['jobId']} attempt {attempt} node {node.index}"
        outcome = retire(clients, settings, cluster, node.container_instance_arn, instance_id, why)
        if outcome is not None:
            done["skipped"].append(f"node {node.index} {instance_id}: {outcome}")
            continue
        # Letters, digits, spaces and _.:/=+-@ only: what every service takes in a tag.
        batch.tag_resource(resourceArn=job["jobArn"], tags={key: f"{instance_id} exit {code}"})
        done["replaced"].append(f"node {node.index} {instance_id}")
    LOG.info("job %s attempt %s (%s): %s", job["jobId"], attempt, reason, done)
    return done


def node_records(batch: Any, job: Mapping[str, Any]) -> dict[int, Mapping[str, Any]]:
    """Each node's own record (JOB#N); a single-node job is its own node 0."""
    count = int((job.get("nodeProperties") or {}).get("numNodes", 0))
    if not count:
        return {0: job}
    ids = [f"{job['jobId']}#{n}" for n in range(count)]
    records: dict[int, Mapping[str, Any]] = {}
    for first in range(0, count, DESCRIBE_JOBS_MAX):
        for record in batch.describe_jobs(jobs=ids[first : first + DESCRIBE_JOBS_MAX])["jobs"]:
            records[int(record["jobId"].rsplit("#", 1)[1])] = record
    return records


def _container(record: Mapping[str, Any], attempt: int) -> Mapping[str, Any]:
    attempts = record.get("attempts") or []
    if len(attempts) < attempt:
        return {}
    container: Mapping[str, Any] = attempts[attempt - 1].get("container") or {}
    return container


def _node(records: Mapping[int, Mapping[str, Any]], index: int, attempt: int) -> Node | None:
    arn = _container(records.get(index, {}), attempt).get("containerInstanceArn")
    return Node(index, arn) if arn else None


def bad_nodes(records: Mapping[int, Mapping[str, Any]], attempt: int, code: int) -> list[Node]:
    """The nodes whose own check found their host bad.

    A worker's bad host ends the worker with the code and the main node passes it on (its
    node watch), so the main node's host is suspect only when no worker ended with it.
    """
    ended = [i for i in sorted(records) if _container(records[i], attempt).get("exitCode") == code]
    workers = [i for i in ended if i != 0]
    chosen = workers or ended
    return [n for i in chosen if (n := _node(records, i, attempt)) is not None]


def lost_nodes(
    logs: Any,
    job: Mapping[str, Any],
    records: Mapping[int, Mapping[str, Any]],
    attempt: int,
    settings: Settings,
) -> list[Node]:
    """The workers the main node says it lost, in its last log lines. A node that never
    started is not counted: its image or its mounts may be at fault, not its host."""
    stream = _container(records.get(0, {}), attempt).get("logStreamName")
    group = _log_group(job)
    if not stream or not group:
        return []
    try:
        events = logs.get_log_events(
            logGroupName=group, logStreamName=stream, startFromHead=False, limit=LOG_LINES
        )["events"]
    except ClientError as exc:
        LOG.warning("job %s: cannot read %s %s: %s", job["jobId"], group, stream, exc)
        return []
    indexes: list[int] = []
    for event in events:
        message = event.get("message", "")
        found = settings.lost_nodes_line.match(message)
        if found and found.group(1) == "lost":
            indexes = [int(n) for n in re.findall(r"\d+", message[: found.start(1)])]
    return [n for i in indexes if (n := _node(records, i, attempt)) is not None]


def _log_group(job: Mapping[str, Any]) -> str | None:
    ranges = (job.get("nodeProperties") or {}).get("nodeRangeProperties") or []
    containers = [r.get("container") or {} for r in ranges] or [job.get("container") or {}]
    for container in containers:
        options = (container.get("logConfiguration") or {}).get("options") or {}
        if "awslogs-group" in options:
            return str(options["awslogs-group"])
    return None


def queue_clusters(batch: Any, queue: str) -> list[str]:
    """The ECS clusters of the queue's compute environments, where its nodes registered."""
    (described,) = batch.describe_job_queues(jobQueues=[queue])["jobQueues"]
    environments = [e["computeEnvironment"] for e in described["computeEnvironmentOrder"]]
    found = batch.describe_compute_environments(computeEnvironments=environments)
    return [e["ecsClusterArn"] for e in found["computeEnvironments"] if e.get("ecsClusterArn")]


def find_instance(ecs: Any, clusters: list[str], arn: str) -> tuple[str, str] | None:
    """(cluster, EC2 instance id) of a container instance, or None once ECS forgot it."""
    for cluster in clusters:
        found = ecs.describe_container_instances(cluster=cluster, containerInstances=[arn])
        for instance in found.get("containerInstances", []):
            return cluster, instance["ec2InstanceId"]
    return None


def retire(
    clients: Mapping[str, Any],
    settings: Settings,
    cluster: str,
    container_instance_arn: str,
    instance_id: str,
    why: str,
) -> str | None:
    """Drain, tag and terminate one instance; a reason it was left alone, or None."""
    ec2 = clients["ec2"]
    try:
        (reservation,) = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "InvalidInstanceID.NotFound":
            return "instance gone"
        raise
    (instance,) = reservation["Instances"]
    tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
    if tags.get(settings.cluster_tag) != settings.cluster:
        return f"not a node of {settings.cluster} (no {settings.cluster_tag} tag of its)"
    # Draining first: ECS places no new task on a DRAINING instance, so the retry cannot land
    # here while EC2 terminates it. An instance no longer ACTIVE comes back in `failures`.
    clients["ecs"].update_container_instances_state(
        cluster=cluster, containerInstances=[container_instance_arn], status="DRAINING"
    )
    ec2.create_tags(Resources=[instance_id], Tags=[{"Key": settings.instance_tag, "Value": why}])
    if instance["State"]["Name"] not in GONE:
        ec2.terminate_instances(InstanceIds=[instance_id])
    return None
