"""Job operations on a discovered cluster: submit, status, describe, logs, cancel, list.

The decisions live in pure functions (``jobdef``, ``cluster``); this module sequences the AWS
calls through ``launcher.aws`` and keeps each command to the fewest calls it can.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from launcher import cluster as cluster_mod
from launcher.aws import Aws
from launcher.cluster import ClusterInfo
from launcher.errors import UsageError
from launcher.jobdef import Requests

TERMINAL = frozenset({"SUCCEEDED", "FAILED"})
ACTIVE = ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING")


@dataclass(frozen=True)
class Submitted:
    job_id: str
    job_definition_arn: str
    registered: bool  # False when an identical job definition already existed


def discover(aws: Aws, stack_name: str) -> ClusterInfo:
    return cluster_mod.from_stack(aws.describe_stack(stack_name))


def submit(aws: Aws, requests: Requests) -> Submitted:
    name = requests.register["jobDefinitionName"]
    arn = aws.find_job_definition(name)
    registered = arn is None
    if arn is None:
        arn = aws.register_job_definition(requests.register)
    return Submitted(aws.submit_job(requests.submit), arn, registered)


def job_id_of(handle: str) -> str:
    """A handle is a job id, optionally prefixed with its queue (``QUEUE:JOB_ID``)."""
    job_id = handle.rsplit(":", 1)[-1].strip()
    if not job_id:
        raise UsageError(f"job {handle!r}: expected a Batch job id (or QUEUE:JOB_ID)")
    return job_id


def describe(aws: Aws, handle: str) -> dict:
    job_id = job_id_of(handle)
    jobs = aws.describe_jobs([job_id])
    if not jobs:
        raise UsageError(f"job {job_id}: no such job in this account and region")
    return jobs[0]


def status_line(job: dict) -> str:
    line = f"{job['jobId']} {job['jobName']} {job['status']}"
    if job.get("statusReason"):
        line += f" ({job['statusReason']})"
    return line


def cancel(aws: Aws, handle: str) -> dict:
    """Terminate in any state (CancelJob only reaches jobs that have not started)."""
    job = describe(aws, handle)
    if job["status"] in TERMINAL:
        raise UsageError(f"job {job['jobId']} already {job['status']}; nothing to cancel")
    aws.terminate_job(job["jobId"], "cancelled with launcher cancel")
    return job


def list_jobs(aws: Aws, cluster: ClusterInfo, include_finished: bool) -> list[dict]:
    jobs = aws.list_jobs(cluster.job_queue_arn)
    if not include_finished:
        jobs = [j for j in jobs if j.get("status") not in TERMINAL]
    return sorted(jobs, key=lambda j: j.get("createdAt", 0), reverse=True)


def node_count(job: dict) -> int:
    return int(job.get("nodeProperties", {}).get("numNodes", 1))


def node_streams(aws: Aws, job: dict, nodes: list[int]) -> dict[int, str | None]:
    """Log stream of each node, from the node-level job ids (``JOB_ID#N``), in one call."""
    ids = {f"{job['jobId']}#{n}": n for n in nodes}
    found = {d["jobId"]: d for d in aws.describe_jobs(list(ids))}
    streams: dict[int, str | None] = {}
    for node_job_id, index in ids.items():
        container = found.get(node_job_id, {}).get("container", {})
        streams[index] = container.get("logStreamName")
    return streams


def iter_logs(
    aws: Aws,
    cluster: ClusterInfo,
    handle: str,
    node: int | None,
    since_seconds: int | None,
    follow: bool,
    poll_seconds: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[tuple[int, str]]:
    """Yield ``(node, message)``; with ``follow``, until the job ends and its logs drained."""
    job = describe(aws, handle)
    count = node_count(job)
    if node is not None and not 0 <= node < count:
        raise UsageError(f"--node {node}: job {job['jobId']} has nodes 0-{count - 1}")
    nodes = [node] if node is not None else list(range(count))
    start_ms = int((time.time() - since_seconds) * 1000) if since_seconds is not None else None
    tokens: dict[int, str | None] = {}
    streams: dict[int, str | None] = {}
    while True:
        missing = [n for n in nodes if not streams.get(n)]
        if missing:
            streams.update(node_streams(aws, job, missing))
        for index in nodes:
            stream = streams.get(index)
            if not stream:
                continue
            while True:
                events, token = aws.log_events(
                    cluster.log_group_name, stream, start_ms, tokens.get(index)
                )
                for event in events:
                    yield index, event["message"]
                more = token != tokens.get(index) and events
                tokens[index] = token
                if not more:
                    break
        if not follow or job["status"] in TERMINAL:
            return
        sleep(poll_seconds)
        job = describe(aws, job["jobId"])
