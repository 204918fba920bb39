"""The node replacer's Lambda function: when an attempt ended with the bad-host exit code, the
nodes that ended with it, and when it ended with the lost-node code, the nodes whose records
(Batch's, ECS's, EC2's; never the job's log) say their host went, have their instances taken
out of the pool (drained at once, terminated once they run nothing), so that the job's retry
is not placed on them again and the compute environment launches new ones.

It runs in Lambda's Python runtime with boto3 alone: CloudFormation writes this file as the
function's index.py (infra/node_replacer.py inlines it). What it knows of the stack (the
cluster tag, the exit codes, the tag names) comes from its environment, set from the
launcher's and the stack's own constants, so nothing here repeats them.

Three kinds of event reach it:

- "Batch Job State Change" of a job in the stack's queues whose attempt ended with 79 or 75.
  The instance is drained first: ECS then places nothing new on it (container-instance-
  draining.html), but Batch's tasks are not service tasks and keep running, and by the time
  a job's event arrives Batch may already have placed the retry, or another job, there. So
  the instance is tagged ``efa-batch:replaced`` (why) and terminated only when ECS counts no
  task on it (``runningTasksCount`` + ``pendingTasksCount``, DescribeContainerInstances);
  otherwise it stays DRAINING.
- "ECS Container Instance State Change" of a DRAINING instance in the stack's compute
  environments: ECS sends one whenever a task stops on an instance (its resources change,
  ecs_container_instance_events.html). An instance that the function tagged and that now
  runs nothing is terminated; one it did not tag is never touched.
- Every ``SWEEP_MINUTES``, the stack's compute environments (``{"sweep": [ARN, ...]}``, the
  scheduled rule's input): every DRAINING container instance of theirs is judged as the
  previous kind judges one. It finishes an instance whose last event was lost (a failed
  invocation out of retries) or came before its tag could be read (EC2's API is eventually
  consistent: "the result of an API command you run ... might not be immediately visible to
  all subsequent commands you run", ec2/latest/devguide/eventual-consistency.html), which
  would otherwise stay, idle and paid for, holding its compute environment's capacity.

EventBridge delivers an event at least once, so every step is safe to repeat: draining a
DRAINING instance and tagging it again change nothing, an instance already shutting down is
not terminated again, an attempt already on the job's record is passed over, and an instance
gone from ECS or EC2 is passed over with a log line.

It stays one file, however long, because of how it ships: ``lambda.Code.from_inline`` puts it
in the template's ``Code.ZipFile``, and from that CloudFormation "places it in a file named
index and zips it" (CloudFormation user guide, aws-properties-lambda-function-code.html): one
module, so a second one could not be imported. Not the size: ZipFile's old 4096-character cap
is gone (aws-cdk PR 20624), the zip may reach 4 MB. A package of modules would have to ship as
an asset uploaded to the bootstrap bucket, which this stack avoids (infra/node_replacer.py).
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
DESCRIBE_INSTANCES_MAX = 100  # DescribeContainerInstances: "A list of up to 100"
DRAIN_MAX = 10  # UpdateContainerInstancesState: "A list of up to 10"
LOG_LINES = 100  # the main node's last lines, where it says which nodes it lost
TAG_VALUE_MAX = 256  # Batch: "Maximum value length - 256" (user guide, tag-restrictions.html)
GONE = ("shutting-down", "terminated")
CAPACITY_BLOCK = "capacity-block"  # EC2 Instance.InstanceLifecycle of a Capacity Block's instance
CONTAINER_INSTANCE_EVENT = "ECS Container Instance State Change"
SWEEP = "sweep"  # the scheduled rule's input: {"sweep": [compute environment ARN, ...]}
SWEEP_MINUTES = 15  # how long a tagged, empty instance may stay DRAINING at worst
MORE = "more"  # the record's last entry when not every node fitted (launcher.job.replacements)
INDEX_DIGITS = 4  # a node index's digits at most (Batch: up to 1,000 nodes a job)


@dataclass(frozen=True)
class Settings:
    cluster_tag: str  # the tag every node of the stack carries, and its value
    cluster: str
    bad_host_exit: int
    node_lost_exit: int
    lost_nodes_line: re.Pattern[str]
    host_lost_reason: re.Pattern[str]  # Batch's status reason of a node whose host went
    job_tag: str  # on the job, for the launcher: every attempt's replaced nodes
    job_tag_prefix: str  # the previous replacer's per-node tags, read as recorded attempts
    instance_tag: str  # on the instance: why it was taken out
    max_job_tags: int  # job and job definition tags together (SubmitJob propagateTags)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        return cls(
            cluster_tag=env["CLUSTER_TAG"],
            cluster=env["CLUSTER_NAME"],
            bad_host_exit=int(env["BAD_HOST_EXIT"]),
            node_lost_exit=int(env["NODE_LOST_EXIT"]),
            lost_nodes_line=re.compile(env["LOST_NODES_LINE"]),
            host_lost_reason=re.compile(env["HOST_LOST_REASON"]),
            job_tag=env["JOB_TAG"],
            job_tag_prefix=env["JOB_TAG_PREFIX"],
            instance_tag=env["INSTANCE_TAG"],
            max_job_tags=int(env["MAX_JOB_TAGS"]),
        )


@dataclass(frozen=True)
class Node:
    index: int
    container_instance_arn: str


def handler(event: Mapping[str, Any], context: object = None) -> dict[str, list[str]]:
    """An event of any of its rules (infra/node_replacer.py); returns what it did, for the log
    and the tests."""
    settings = Settings.from_env(os.environ)
    clients = {name: boto3.client(name) for name in ("batch", "ecs", "ec2", "logs")}
    return handle(event, settings, clients)


def handle(
    event: Mapping[str, Any], settings: Settings, clients: Mapping[str, Any]
) -> dict[str, list[str]]:
    """The event to the step its rule asks for."""
    if SWEEP in event:
        return sweep(event[SWEEP], settings, clients)
    if event.get("detail-type") == CONTAINER_INSTANCE_EVENT:
        return finish_draining(event["detail"], settings, clients)
    return replace_nodes(event["detail"], settings, clients)


def reason_of(exit_code: object, settings: Settings) -> str | None:
    """Why the attempt's nodes are suspect, or None for any other ending."""
    if exit_code == settings.bad_host_exit:
        return "bad host"
    if exit_code == settings.node_lost_exit:
        return "node lost"
    return None


def _outcomes() -> dict[str, list[str]]:
    # replaced: terminated (or found already gone); draining: drained and tagged, to be
    # terminated when its other tasks end; skipped: left alone, and why.
    return {"replaced": [], "draining": [], "skipped": []}


def replace_nodes(
    detail: Mapping[str, Any], settings: Settings, clients: Mapping[str, Any]
) -> dict[str, list[str]]:
    """A job's attempt ended with 79 or 75: take its blamed nodes' instances out of the pool.

    Three kinds of job send this event. A job (single-node or multi-node) is the one writer of
    its record. A node of a multi-node job (``JOB#N``) whose own check found its host bad
    (79) has that instance drained at once, before the job's own event (which comes only after
    every node stopped), narrowing the time in which Batch can place the retry there. An
    array child (``JOB:N``) is a single-node job of its own; its instance is replaced like
    any other, but Batch takes no tag on a child's ARN (TagResource: "ARNs for child jobs of
    array and multi-node parallel (MNP) jobs aren't supported"), and the parent's one tag
    cannot take every child's attempts without losing concurrent writes, so the instance's
    tag and this function's log are its record.
    """
    done = _outcomes()
    attempts = detail.get("attempts") or []
    if not attempts:
        return done
    attempt = len(attempts)  # the rule also matches later events that carry this attempt
    exit_code = (attempts[-1].get("container") or {}).get("exitCode")
    reason = reason_of(exit_code, settings)
    if reason is None or not isinstance(exit_code, int):
        return done
    code = exit_code
    batch = clients["batch"]
    job_id = str(detail["jobId"])
    if "#" in job_id:
        return _node_ended(detail, attempt, code, reason, settings, clients)
    (job,) = batch.describe_jobs(jobs=[job_id])["jobs"]
    child = ":" in job_id
    if not child and attempt in recorded_attempts(job.get("tags") or {}, settings):
        done["skipped"].append(f"attempt {attempt}: already recorded")
        return done
    records = node_records(batch, job)
    clusters = queue_clusters(batch, job["jobQueue"])
    if code == settings.bad_host_exit:
        nodes = bad_nodes(records, attempt, settings.bad_host_exit)
    else:
        nodes = lost_nodes(clients, job, records, attempt, clusters, settings, done)
    if not nodes:
        LOG.info("job %s attempt %s (%s): %s", job_id, attempt, reason, done)
        return done
    whys = {
        n.index: f"{reason} (exit {code}): job {job_id} attempt {attempt} node {n.index}"
        for n in nodes
    }
    taken = retire(clients, settings, clusters, nodes, whys, code, done)
    if child:
        LOG.info("array child %s: no tag on a child job; the instances carry the record", job_id)
    elif taken:
        outcome = record(batch, job, attempt, code, taken, settings)
        if outcome:
            done["skipped"].append(outcome)
    LOG.info("job %s attempt %s (%s): %s", job_id, attempt, reason, done)
    return done


def _node_ended(
    detail: Mapping[str, Any],
    attempt: int,
    code: int,
    reason: str,
    settings: Settings,
    clients: Mapping[str, Any],
) -> dict[str, list[str]]:
    """A node of a multi-node job ended: a worker's own 79 takes its instance out now; the
    job's event (its single writer of the record) decides everything else, since the main
    node passes a worker's 79 on and names lost workers in its log."""
    done = _outcomes()
    parent, _, index_text = str(detail["jobId"]).partition("#")
    node = detail.get("nodeDetails") or {}  # JobDetail.nodeDetails: nodeIndex, isMainNode
    index = int(node.get("nodeIndex", index_text))
    if code != settings.bad_host_exit or node.get("isMainNode", index == 0):
        done["skipped"].append(f"node {index}: exit {code}, for the job's own event to decide")
        return done
    arn = (detail["attempts"][-1].get("container") or {}).get("containerInstanceArn")
    if not arn:
        return done
    why = f"{reason} (exit {code}): job {parent} attempt {attempt} node {index}"
    clusters = queue_clusters(clients["batch"], detail["jobQueue"])
    retire(clients, settings, clusters, [Node(index, arn)], {index: why}, code, done)
    LOG.info("job %s node %s attempt %s (%s): %s", parent, index, attempt, reason, done)
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
    clients: Mapping[str, Any],
    job: Mapping[str, Any],
    records: Mapping[int, Mapping[str, Any]],
    attempt: int,
    clusters: list[str],
    settings: Settings,
    done: dict[str, list[str]],
) -> list[Node]:
    """The nodes the attempt lost by the records (``_lost_by_records``: Batch's, ECS's and
    EC2's, which the job cannot write). The main node's log line naming lost workers is read
    only to say, in ``done`` and this function's log, which nodes it names that the records do
    not: its stream is written by the job's code and by anyone allowed logs:PutLogEvents on the
    job log group (the nodes' instance role may, on every group, and every single-node job
    reaches that role through IMDS), so it never takes an instance out. A job that knows a
    host of its is bad ends that node with the bad-host code, in the node's own record."""
    placed = {i: n for i in sorted(records) if (n := _node(records, i, attempt)) is not None}
    known = _container_instances(
        clients["ecs"], clusters, [n.container_instance_arn for n in placed.values()]
    )
    instances = _instances(clients["ec2"], [d["ec2InstanceId"] for _, d in known.values()])
    lost: list[Node] = []
    for index, node in placed.items():
        _, container_instance = known.get(node.container_instance_arn, ("", None))
        instance = instances.get((container_instance or {}).get("ec2InstanceId", ""))
        why = _lost_by_records(records[index], attempt, container_instance, instance, settings)
        if why:
            LOG.info("job %s attempt %s node %s lost: %s", job["jobId"], attempt, index, why)
            lost.append(node)
    named = {n.index for n in lost}
    for index in claimed_nodes(clients["logs"], job, records, attempt, settings):
        if index not in named:
            done["skipped"].append(
                f"node {index}: lost in the main node's log only; Batch, ECS and EC2 show "
                "its host well: kept"
            )
    return lost


def _lost_by_records(
    record: Mapping[str, Any],
    attempt: int,
    container_instance: Mapping[str, Any] | None,
    instance: Mapping[str, Any] | None,
    settings: Settings,
) -> str | None:
    """Why the records say the node's host went under it in ``attempt``, or None.

    Batch says so in the node's status reason ("Host EC2 (instance ...) terminated.", ECS's
    stoppedReason for a task whose host went). Otherwise a node whose container never reported
    an exit code of its own (ECS's agent reports a container's end, which the job can choose
    but not withhold while its host is up) is lost when ECS no longer hears its host
    (``agentConnected`` false: "An instance with an agent that may be unhealthy or stopped
    return false", ContainerInstance), no longer holds it ACTIVE or DRAINING (INACTIVE once
    deregistered), or EC2 says it is not running. A node whose container ended with a code,
    however it ended, ran on a host that carried it to the end."""
    attempts = record.get("attempts") or []
    if len(attempts) < attempt:
        return None
    detail = attempts[attempt - 1]
    container = detail.get("container") or {}
    reasons = [detail.get("statusReason"), container.get("reason")]
    if attempt == len(attempts):
        reasons.append(record.get("statusReason"))
    for reason in reasons:
        if reason and settings.host_lost_reason.search(str(reason)):
            return f"Batch: {reason}"
    if container.get("exitCode") is not None:
        return None
    if container_instance is None:
        return "ECS: container instance gone"
    if container_instance.get("agentConnected") is False:
        return "ECS: agent disconnected"
    if container_instance.get("status") not in ("ACTIVE", "DRAINING"):
        return f"ECS: container instance {container_instance.get('status')}"
    state = (instance or {}).get("State", {}).get("Name", "gone")
    return None if state in ("pending", "running") else f"EC2: {state}"


def claimed_nodes(
    logs: Any,
    job: Mapping[str, Any],
    records: Mapping[int, Mapping[str, Any]],
    attempt: int,
    settings: Settings,
) -> list[int]:
    """The workers the main node's last log lines say it lost (its last such line): node
    indexes of the job only, whatever else a line holds."""
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
        message = str(event.get("message", ""))
        found = settings.lost_nodes_line.match(message)
        if found and found.group(1) == "lost":
            words = message[: found.start(1)].split()
            # A node index is short; a run of thousands of digits is none (and past 4,300
            # Python refuses to read it: int_max_str_digits).
            numbers = {int(w) for w in words if w.isdigit() and len(w) <= INDEX_DIGITS}
            indexes = sorted(n for n in numbers if 0 < n < len(records))
    return indexes


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


def _container_instances(
    ecs: Any, clusters: list[str], arns: list[str]
) -> dict[str, tuple[str, Mapping[str, Any]]]:
    """arn -> (cluster, ECS's ContainerInstance) for each of ``arns`` ECS still knows."""
    found: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for cluster in clusters:
        wanted = [a for a in arns if a not in found]
        for first in range(0, len(wanted), DESCRIBE_INSTANCES_MAX):
            chunk = wanted[first : first + DESCRIBE_INSTANCES_MAX]
            answer = ecs.describe_container_instances(cluster=cluster, containerInstances=chunk)
            for instance in answer.get("containerInstances", []):
                found[instance["containerInstanceArn"]] = (cluster, instance)
    return found


def _instances(ec2: Any, ids: list[str]) -> dict[str, Mapping[str, Any]]:
    """EC2's Instance for each of ``ids`` EC2 still knows (one unknown id fails a call for
    them all: then they are asked one by one)."""
    found: dict[str, Mapping[str, Any]] = {}
    batches = [ids] if ids else []
    while batches:
        chunk = batches.pop()
        try:
            reservations = ec2.describe_instances(InstanceIds=chunk)["Reservations"]
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "InvalidInstanceID.NotFound":
                raise
            if len(chunk) > 1:
                batches.extend([i] for i in chunk)
            continue
        for reservation in reservations:
            for instance in reservation["Instances"]:
                found[instance["InstanceId"]] = instance
    return found


def _tags(instance: Mapping[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags", [])}


def _busy(instance: Mapping[str, Any]) -> int:
    """Tasks ECS has placed on a container instance and not stopped: "tasks ... that have a
    desired status (desiredStatus) of RUNNING" plus those "in the PENDING status" (ECS API
    reference, ContainerInstance runningTasksCount and pendingTasksCount)."""
    return int(instance.get("runningTasksCount", 0)) + int(instance.get("pendingTasksCount", 0))


def retire(
    clients: Mapping[str, Any],
    settings: Settings,
    clusters: list[str],
    nodes: list[Node],
    whys: Mapping[int, str],
    code: int,
    done: dict[str, list[str]],
) -> list[tuple[int, str]]:
    """Take the nodes' instances out of the pool: drain, tag, and terminate the empty ones.
    Fills ``done``; returns (node, instance id) of each instance taken out (terminated or left
    draining), for the job's record.

    Draining comes first, so that nothing new is placed while the instance is looked at; the
    tag comes before the task count, so that a task stopping after the count sends an event
    (the container instance rule) that finds the tag and finishes the job.
    """
    ecs, ec2 = clients["ecs"], clients["ec2"]
    arns = [n.container_instance_arn for n in nodes]
    known = _container_instances(ecs, clusters, arns)
    instances = _instances(ec2, [known[a][1]["ec2InstanceId"] for a in arns if a in known])
    taken: list[tuple[int, str]] = []
    chosen: list[tuple[Node, str, str]] = []  # node, cluster, instance id
    for node in nodes:
        if node.container_instance_arn not in known:
            done["skipped"].append(f"node {node.index}: container instance gone")
            continue
        cluster, described = known[node.container_instance_arn]
        instance_id = described["ec2InstanceId"]
        instance = instances.get(instance_id)
        if instance is None:
            done["skipped"].append(f"node {node.index} {instance_id}: instance gone")
        elif _tags(instance).get(settings.cluster_tag) != settings.cluster:
            done["skipped"].append(
                f"node {node.index} {instance_id}: not a node of {settings.cluster} "
                f"(no {settings.cluster_tag} tag of its)"
            )
        elif instance["State"]["Name"] in GONE:  # terminated already: not again
            done["replaced"].append(f"node {node.index} {instance_id}")
            taken.append((node.index, instance_id))
        elif instance.get("InstanceLifecycle") == CAPACITY_BLOCK and code != settings.bad_host_exit:
            # A lost node's host may be healthy, and a Capacity Block's terminated instance
            # gives its slot back only after "several minutes" of clean-up (EC2 user guide,
            # capacity-blocks-launch.html), which a job needing the whole block waits for.
            done["skipped"].append(
                f"node {node.index} {instance_id}: kept in its Capacity Block (exit {code} "
                "does not say the host is bad)"
            )
        else:
            chosen.append((node, cluster, instance_id))
    _drain(ecs, [(cluster, node.container_instance_arn) for node, cluster, _ in chosen])
    for node, _, instance_id in chosen:
        tag = {"Key": settings.instance_tag, "Value": whys[node.index]}
        ec2.create_tags(Resources=[instance_id], Tags=[tag])
    after = _container_instances(ecs, clusters, [n.container_instance_arn for n, _, _ in chosen])
    empty: list[str] = []
    for node, _, instance_id in chosen:
        found = after.get(node.container_instance_arn)
        busy = _busy(found[1]) if found else 0
        if busy:
            done["draining"].append(
                f"node {node.index} {instance_id}: {busy} other task(s) on it, terminated "
                "when they end"
            )
        else:
            empty.append(instance_id)
            done["replaced"].append(f"node {node.index} {instance_id}")
        taken.append((node.index, instance_id))
    if empty:
        # The role may end only instances carrying the tag written above (infra/node_replacer.py);
        # should EC2 not show it yet, the call fails, and Lambda's retry of the invocation
        # repeats every step, which is safe.
        ec2.terminate_instances(InstanceIds=empty)
    return sorted(taken)


def _drain(ecs: Any, targets: list[tuple[str, str]]) -> None:
    """DRAINING: ECS "prevents new tasks from being scheduled for placement on the container
    instance" (developer guide, container-instance-draining.html). An instance no longer
    ACTIVE comes back in ``failures``, which is no error here."""
    by_cluster: dict[str, list[str]] = {}
    for cluster, arn in targets:
        by_cluster.setdefault(cluster, []).append(arn)
    for cluster, arns in by_cluster.items():
        for first in range(0, len(arns), DRAIN_MAX):
            ecs.update_container_instances_state(
                cluster=cluster,
                containerInstances=arns[first : first + DRAIN_MAX],
                status="DRAINING",
            )


def finish_draining(
    detail: Mapping[str, Any], settings: Settings, clients: Mapping[str, Any]
) -> dict[str, list[str]]:
    """ECS says a container instance of the stack's compute environments changed while
    DRAINING (a task stopped on it): terminate it if the function took it out and it now
    runs nothing. The event's own fields are only a hint; ECS and EC2 are read again."""
    done = _outcomes()
    arn = str(detail.get("containerInstanceArn", ""))
    cluster = str(detail.get("clusterArn", ""))
    found = _container_instances(clients["ecs"], [cluster], [arn]) if arn and cluster else {}
    if arn not in found:
        done["skipped"].append(f"{arn}: container instance gone")
    else:
        end_if_empty(clients, settings, [found[arn][1]], done)
    LOG.info("container instance %s: %s", arn, done)
    return done


def sweep(
    environments: list[str], settings: Settings, clients: Mapping[str, Any]
) -> dict[str, list[str]]:
    """Every DRAINING container instance of these compute environments' clusters, judged as
    ``finish_draining`` judges one (ListContainerInstances' ``status`` filter: "if you specify
    the DRAINING status, the results include only container instances that have been set to
    DRAINING")."""
    done = _outcomes()
    ecs = clients["ecs"]
    found = clients["batch"].describe_compute_environments(computeEnvironments=environments)
    clusters = [e["ecsClusterArn"] for e in found["computeEnvironments"] if e.get("ecsClusterArn")]
    for cluster in clusters:
        pages = ecs.get_paginator("list_container_instances").paginate(
            cluster=cluster, status="DRAINING"
        )
        arns = [a for page in pages for a in page["containerInstanceArns"]]
        described = _container_instances(ecs, [cluster], arns)
        end_if_empty(clients, settings, [d for _, d in described.values()], done)
    LOG.info("sweep of %s: %s", clusters, done)
    return done


def end_if_empty(
    clients: Mapping[str, Any],
    settings: Settings,
    described: list[Mapping[str, Any]],
    done: dict[str, list[str]],
) -> None:
    """Of these container instances (DescribeContainerInstances' ContainerInstance), terminate
    the DRAINING ones this function took out (its tag on a node of the stack) that run
    nothing; fill ``done``. Any other instance is never touched."""
    ec2 = clients["ec2"]
    instances = _instances(ec2, [d["ec2InstanceId"] for d in described])
    empty: list[str] = []
    for container_instance in described:
        instance_id = container_instance["ec2InstanceId"]
        instance = instances.get(instance_id)
        tags = _tags(instance or {})
        ours = tags.get(settings.cluster_tag) == settings.cluster and settings.instance_tag in tags
        status = container_instance.get("status")
        if status != "DRAINING":
            done["skipped"].append(f"{instance_id}: {status}, not draining")
        elif instance is None or instance["State"]["Name"] in GONE:
            done["skipped"].append(f"{instance_id}: instance gone")
        elif not ours:
            done["skipped"].append(f"{instance_id}: not taken out by the node replacer")
        elif busy := _busy(container_instance):
            done["draining"].append(f"{instance_id}: {busy} other task(s) on it")
        else:
            empty.append(instance_id)
            done["replaced"].append(f"{instance_id}: {tags[settings.instance_tag]}")
    if empty:
        ec2.terminate_instances(InstanceIds=empty)


# --- the job's record: one tag for every attempt (launcher/job/replacements.py reads it) --------


def recorded_attempts(tags: Mapping[str, str], settings: Settings) -> set[int]:
    """The attempts the job's record already holds, this replacer's or the previous one's."""
    found = {
        int(entry.split("/", 1)[0])
        for entry in tags.get(settings.job_tag, "").split()
        if entry.split("/", 1)[0].isdigit()
    }
    for key in tags:
        attempt = key.removeprefix(settings.job_tag_prefix).partition(":")[0]
        if key.startswith(settings.job_tag_prefix) and attempt.isdigit():
            found.add(int(attempt))
    return found


def _ranges(indexes: list[int]) -> list[str]:
    runs: list[list[int]] = []
    for i in sorted(set(indexes)):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return [f"{a}" if a == b else f"{a}-{b}" for a, b in runs]


def append_record(value: str, attempt: int, code: int, taken: list[tuple[int, str]]) -> str:
    """The record with this attempt's entry added, within Batch's 256 characters: with the
    instance ids if they fit, else the node ranges, else as many ranges as fit and ``more``.
    Earlier entries are never rewritten, so a line the launcher has said stays the same."""
    words = value.split()
    more = MORE in words
    entries = [w for w in words if w != MORE]
    room = TAG_VALUE_MAX - len(f" {MORE}")  # ``more`` always fits after the entries
    head = f"{attempt}/{code}:"
    with_ids = head + "+".join(f"{n}={i}" for n, i in sorted(taken))
    ranges = _ranges([n for n, _ in taken])
    entry = None
    for candidate in (with_ids, head + "+".join(ranges)):
        if len(" ".join([*entries, candidate])) <= room:
            entry = candidate
            break
    else:
        more = True
        for count in range(len(ranges) - 1, 0, -1):
            candidate = head + "+".join(ranges[:count])
            if len(" ".join([*entries, candidate])) <= room:
                entry = candidate
                break
    return " ".join([*entries, *([entry] if entry else []), *([MORE] if more else [])])


def record(
    batch: Any,
    job: Mapping[str, Any],
    attempt: int,
    code: int,
    taken: list[tuple[int, str]],
    settings: Settings,
) -> str | None:
    """Add the attempt to the job's one tag; why not, if it was not added.

    A job holds at most 50 tags (Batch user guide, tag-restrictions.html), and with
    ``propagateTags`` "If the total number of combined tags from the job and job definition is
    over 50, the job is moved to the FAILED state" (SubmitJob), which would fail its retry. A
    job without the tag gets it only while it has room; tags starting with ``aws:`` do not
    count ("Tags with this prefix do not count against your tags-per-resource limit").
    """
    tags: Mapping[str, str] = job.get("tags") or {}
    current = tags.get(settings.job_tag)
    if current is None:
        keys = set(tags)
        (definition,) = batch.describe_job_definitions(jobDefinitions=[job["jobDefinition"]])[
            "jobDefinitions"
        ]
        # The job's setting overrides its definition's (SubmitJob propagateTags): either one
        # on counts the definition's tags, the safe side.
        if job.get("propagateTags") or definition.get("propagateTags"):
            keys |= set(definition.get("tags") or {})
        counted = [k for k in keys if not k.lower().startswith("aws:")]
        if len(counted) >= settings.max_job_tags:
            LOG.warning(
                "job %s attempt %s: %s tags already, no room for %s; the instances' %s tags "
                "and this log keep the record: %s",
                job["jobId"],
                attempt,
                len(counted),
                settings.job_tag,
                settings.instance_tag,
                taken,
            )
            return f"attempt {attempt}: not recorded on the job ({len(counted)} tags already)"
    value = append_record(current or "", attempt, code, taken)
    if value != current:
        batch.tag_resource(resourceArn=job["jobArn"], tags={settings.job_tag: value})
    return None
