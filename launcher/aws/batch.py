"""The AWS Batch backend: registers and submits the requests, reads jobs back as ``JobInfo``.

All AWS calls go through ``launcher.aws.client``; this module turns Batch's dicts into the typed
values of ``launcher.job.info`` and keeps each operation to the fewest calls it can.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from launcher.aws.client import BULK_JOBS, Aws
from launcher.aws.follow import PROCESS, Call, Hub, JobFacts, Nodes, Streams
from launcher.backend import Say, already_ended, newest_first, no_such_jobs
from launcher.errors import LauncherError, RemoteError, UsageError
from launcher.job import readiness
from launcher.job.enterable import node_refusal, refusal
from launcher.job.info import (
    CANCEL_REASON,
    BackendName,
    CancelOutcome,
    JobInfo,
    JobState,
    LogLine,
    NodeFate,
    NodeStatus,
)
from launcher.job.jobdef import Requests, watch_token
from launcher.job.node_ranges import groups_of, node_overrides, node_ranges
from launcher.job.replacements import HOST_LOST_REASON, replacement_lines
from launcher.job.resumption import resumption
from launcher.job.shapes import Dependency, is_single, parse_after
from launcher.job.waiting import Capacity, Facts, Place, Watch, pending
from launcher.progress import Event, ProgressFn
from launcher.stack.teams import TEAM_TAG

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
# A job, a node of a multi-node job (``#N``) or an array's child (``:N``, "the array index for
# the child job is appended to the end of the parent ID, such as example_job_ID:0",
# array_jobs.html), optionally after its queue (``QUEUE:JOB_ID``).
BATCH_JOB_ID = re.compile(rf"(?:^|:)({_UUID}(?:#\d+|:\d+)?)$")


# "A list of up to 100 job IDs" (botocore DescribeJobsRequest.jobs).
DESCRIBE_JOBS = 100
T = TypeVar("T")


def chunks(items: Sequence[T], size: int) -> list[Sequence[T]]:
    """``items`` in order, ``size`` at a time (the last may be shorter)."""
    return [items[first : first + size] for first in range(0, len(items), size)]


def terminate_requests(job_ids: Sequence[str], reason: str = CANCEL_REASON) -> list[dict[str, Any]]:
    """The TerminateJobs requests that end ``job_ids``, BULK_JOBS ids each (the API's limit);
    TerminateJob "cancels" jobs that have not started and terminates the others, so one call
    reaches every state (CancelJobs would leave STARTING and RUNNING jobs as they are)."""
    return [{"jobs": list(chunk), "reason": reason} for chunk in chunks(job_ids, BULK_JOBS)]


def job_id_of(handle: str) -> str:
    """A handle is a job id, optionally prefixed with its queue (``QUEUE:JOB_ID``)."""
    match = BATCH_JOB_ID.search(handle.strip())
    if match:
        return match.group(1)
    job_id = handle.rsplit(":", 1)[-1].strip()
    if not job_id:
        raise UsageError(f"job {handle!r}: expected a Batch job id (or QUEUE:JOB_ID)")
    return job_id


def _seconds(ms: int | None) -> float | None:
    return ms / 1000 if ms else None


def node_fate(record: dict[str, Any], attempt: int) -> NodeFate | None:
    """What a node's own record (``JOB#N``) says became of it in ``attempt`` (1-based): LOST when
    Batch says its host went (the attempt's or, for its latest, the node's statusReason, or its
    container's reason), NEVER_STARTED when it has no such attempt or the attempt's container
    has no log stream ("Each container attempt receives a log stream name when they reach the
    RUNNING status", AttemptContainerDetail); None otherwise. Batch and ECS write these fields;
    the job writes only its exit code."""
    attempts = record.get("attempts") or []
    if attempt < 1:
        return None
    if len(attempts) < attempt:
        return NodeFate.NEVER_STARTED
    detail = attempts[attempt - 1]
    container = detail.get("container") or {}
    reasons = [detail.get("statusReason"), container.get("reason")]
    if attempt == len(attempts):
        reasons.append(record.get("statusReason"))
    if any(HOST_LOST_REASON.search(r) for r in reasons if r):
        return NodeFate.LOST
    return None if container.get("logStreamName") else NodeFate.NEVER_STARTED


def job_info(job: dict[str, Any], nodes: list[dict[str, Any]] | None = None) -> JobInfo:
    """A DescribeJobs (or ListJobs) entry, and optionally its node-level entries."""
    props = job.get("nodeProperties", {})
    ranges = props.get("nodeRangeProperties", [])
    # A multi-node job's image is its first range's; a container job's (a copy job) its own.
    container = ranges[0].get("container", {}) if ranges else job.get("container", {})
    image = container.get("image")
    attempts = job.get("attempts", [])
    # The nodes' fates are of the latest attempt that ended: none while one runs.
    ended = 0 if job["status"] in ("STARTING", "RUNNING") else len(attempts)
    node_status = tuple(
        sorted(
            (
                NodeStatus(
                    index=int(n.get("nodeDetails", {}).get("nodeIndex", n["jobId"].split("#")[-1])),
                    state=JobState(n["status"]),
                    reason=n.get("statusReason"),
                    exit_code=n.get("container", {}).get("exitCode"),
                    fate=node_fate(n, ended),
                )
                for n in nodes or []
            ),
            key=lambda n: n.index,
        )
    )
    last = attempts[-1].get("container", {}) if attempts else job.get("container", {})
    detail = last.get("reason")
    array = job.get("arrayProperties") or {}
    return JobInfo(
        job_id=job["jobId"],
        name=job["jobName"],
        state=JobState(job["status"]),
        reason=job.get("statusReason"),
        detail=detail,
        nodes=int(props.get("numNodes", 1)),
        queue=job.get("jobQueue"),
        definition=job.get("jobDefinition"),
        image=image,
        attempts=len(job.get("attempts", [])),
        created_at=_seconds(job.get("createdAt")),
        started_at=_seconds(job.get("startedAt")),
        stopped_at=_seconds(job.get("stoppedAt")),
        node_status=node_status,
        # A container job's one group carries its TorchX role's name (LAUNCHER_GROUP) too.
        groups=groups_of(job) if ranges or "container" in job else (),
        backend=BackendName.AWS,
        cancelled=job.get("statusReason") == CANCEL_REASON,
        last_exit_code=last.get("exitCode"),
        array_size=array.get("size"),
        array_index=array.get("index"),
        children={k: int(v) for k, v in (array.get("statusSummary") or {}).items()},
        depends_on=tuple(str(Dependency.from_batch(d)) for d in job.get("dependsOn") or []),
        replacements=replacement_lines(job.get("tags")),
        tags=dict(job.get("tags") or {}),  # DescribeJobs gives them; ListJobs' summaries do not
        # Both DescribeJobs and ListJobs give shareIdentifier (JobDetail, JobSummary).
        share=job.get("shareIdentifier"),
        team=(job.get("tags") or {}).get(TEAM_TAG),
    )


def with_tags(aws: Aws, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ListJobs' summaries with each job's tags, which only DescribeJobs gives (one call per
    DESCRIBE_JOBS jobs); a job gone between the two calls keeps its summary, without tags."""
    described = {
        d["jobId"]: d.get("tags") or {}
        for chunk in chunks([j["jobId"] for j in found], DESCRIBE_JOBS)
        for d in aws.describe_jobs(list(chunk))
    }
    return [{**j, "tags": described.get(j["jobId"], {})} for j in found]


class BatchBackend:
    name = BackendName.AWS

    def __init__(self, aws: Aws, queue_arn: str | None = None, logs: Hub = PROCESS) -> None:
        self.aws = aws
        self.queue_arn = queue_arn  # only list() needs it
        self.logs = logs  # the process's log tails and its one limiter, unless given others

    def owns(self, job_id: str) -> bool:
        """A Batch job id (a UUID), optionally after its queue (``QUEUE:JOB_ID``)."""
        return bool(BATCH_JOB_ID.search(job_id.strip()))

    # --- scheduling ---------------------------------------------------------------------

    def schedule(self, requests: Requests, say: Say = lambda _: None) -> str:
        name = requests.register["jobDefinitionName"]
        arn = self.aws.find_job_definition(name)
        if arn is None:
            arn = self.aws.register_job_definition(requests.register)
            say(f"registered job definition {arn}")
        else:
            say(f"reusing job definition {arn}")
        return self.aws.submit_job(requests.submit)

    # --- reading back -------------------------------------------------------------------

    def _describe_raw(self, job_id: str) -> dict[str, Any]:
        found = self.aws.describe_jobs([job_id_of(job_id)])
        if not found:
            raise UsageError(f"job {job_id_of(job_id)}: no such job in this account and region")
        return found[0]

    def _nodes(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        count = int(job.get("nodeProperties", {}).get("numNodes", 0))
        if not count:
            return []
        return self.aws.describe_jobs([f"{job['jobId']}#{n}" for n in range(count)])

    def describe(self, job_id: str, nodes: bool = False) -> JobInfo:
        """One DescribeJobs call; ``nodes=True`` adds one more for every node's state."""
        job = self._describe_raw(job_id)
        return job_info(job, self._nodes(job) if nodes else None)

    def cancel(self, job_id: str) -> JobInfo:
        """Terminate in any state (CancelJob only reaches jobs that have not started)."""
        info = self.describe(job_id)
        if info.state.terminal:
            raise already_ended(info.job_id, info.state)
        self.aws.terminate_job(info.job_id, CANCEL_REASON)
        return info

    def cancel_many(self, job_ids: Sequence[str]) -> list[CancelOutcome]:
        """Every job described first (100 a call: unknown ids stop it here), then the ones
        still going terminated with TerminateJobs, 50 a call (``Aws.terminate_jobs`` falls
        back to one TerminateJob a job where the API is absent)."""
        ids = list(dict.fromkeys(job_id_of(j) for j in job_ids))
        found = {
            job["jobId"]: job_info(job)
            for chunk in chunks(ids, DESCRIBE_JOBS)
            for job in self.aws.describe_jobs(list(chunk))
        }
        missing = [i for i in ids if i not in found]
        if missing:
            raise no_such_jobs(missing, "in this account and region")
        infos = [found[i] for i in ids]
        refused: dict[str, LauncherError] = {}
        for request in terminate_requests([i.job_id for i in infos if not i.state.terminal]):
            try:
                reasons = self.aws.terminate_jobs(request)
            except RemoteError as exc:  # the whole call: every job of it, the others go on
                reasons = dict.fromkeys(request["jobs"], str(exc))
            refused.update({j: RemoteError(f"job {j}: {why}") for j, why in reasons.items()})
        return [
            CancelOutcome(
                info,
                already_ended(info.job_id, info.state)
                if info.state.terminal
                else refused.get(info.job_id),
            )
            for info in infos
        ]

    def resubmit(self, job_id: str, say: Say = lambda _: None) -> tuple[str, str]:
        """The job again (same definition, queue, name, tags, share), with the first job's
        checkpoint directory; (new job id, directory)."""
        job = self._describe_raw(job_id)
        self._require_images(job)
        checkpoint, tags = resumption(job, job["jobId"])
        environment = [{"name": "LAUNCHER_CHECKPOINT_DIR", "value": checkpoint}]
        request: dict[str, Any] = {
            "jobName": job["jobName"],
            "jobQueue": job["jobQueue"],
            "jobDefinition": job["jobDefinition"],
            "propagateTags": True,
            "tags": tags,
        }
        if is_single(job):
            request["containerOverrides"] = {"environment": environment}
        else:
            environment.append(watch_token())  # a new job: the node watch's new token
            request["nodeOverrides"] = node_overrides(job, environment)
        size = (job.get("arrayProperties") or {}).get("size")
        if size:  # the whole array again (its dependencies are behind it: not repeated)
            request["arrayProperties"] = {"size": size}
        if job.get("shareIdentifier"):
            request["shareIdentifier"] = job["shareIdentifier"]
        if job.get("schedulingPriority") is not None:
            request["schedulingPriorityOverride"] = job["schedulingPriority"]
        new_id = self.aws.submit_job(request)
        say(f"resubmitted {job['jobId']} as {new_id}")
        return new_id, checkpoint

    def _require_images(self, job: dict[str, Any]) -> None:
        """The images a resubmission pulls must still be there: the cluster's repository expires
        workspace images some days after their push (its lifecycle policy)."""
        from launcher.image.build import image_exists

        for image in sorted({container["image"] for _, container in node_ranges(job)}):
            if not image_exists(image, self.aws):
                raise UsageError(
                    f"job {job['jobId']}: its image {image} is no longer in its repository "
                    "(the cluster expires workspace images workspace_image_days after their "
                    "push); run the job again with launcher run, which builds it anew"
                )

    def enter(self, job_id: str, node: int, command: Sequence[str]) -> int:
        from launcher.aws import node_shell

        node_shell.check_plugin()
        found = self.aws.describe_jobs([job_id_of(job_id)])
        if not found:
            raise UsageError(f"job {job_id_of(job_id)}: no such job in this account and region")
        job = found[0]
        info = job_info(job)
        if (refused := refusal(info, node)) is not None:
            raise refused
        detail = job
        if "nodeProperties" in job:  # a multi-node job: each node is a job of its own, JOB#N
            (detail,) = self.aws.describe_jobs([f"{info.job_id}#{node}"]) or [{}]
            if (refused := node_refusal(info.job_id, node, str(detail.get("status")))) is not None:
                raise refused
        container = detail.get("container") or {}
        return node_shell.aws_session(
            self.aws, job["jobQueue"], info.job_id, node, container, command
        )

    def list(
        self,
        include_finished: bool = False,
        name: str | None = None,
        images: bool = False,
        tags: bool = False,
    ) -> list[JobInfo]:
        if self.queue_arn is None:
            raise UsageError("listing jobs needs the cluster's queue (from its stack)")
        found = self.aws.list_jobs(self.queue_arn, name)
        if tags:
            found = with_tags(self.aws, found)
        if not images:
            return newest_first(map(job_info, found), include_finished)
        # ListJobs' summaries name the definition, not the image: the definitions say it (one
        # DescribeJobDefinitions per 100 of them), as DescribeJobs does for status.
        by_arn = self.aws.definition_images(
            sorted({j["jobDefinition"] for j in found if j.get("jobDefinition")})
        )
        jobs = (
            dataclasses.replace(info, image=by_arn.get(j.get("jobDefinition", "")))
            if info.image is None
            else info
            for j, info in ((j, job_info(j)) for j in found)
        )
        return newest_first(jobs, include_finished)

    # --- logs ---------------------------------------------------------------------------

    def watch(self, progress: ProgressFn) -> Watch:
        """A waiting line for ``progress``, its calls paced with the followers' (one a turn)."""
        return Watch(QueueProbe(self.aws, self.logs.limiter.call), progress)

    def log_iter(
        self,
        job_id: str,
        node: int | None = None,
        since: float | None = None,
        follow: bool = False,
        attempt: int | None = None,
        waiting: ProgressFn | None = None,
    ) -> Iterator[LogLine]:
        """Every node's lines, read with FilterLogEvents over all streams (``launcher.aws.follow``);
        followers of one job in a process share its reads, and every follower in the process
        shares one call a second (``self.logs``).

        Each attempt of a node writes its own stream; ``attempt`` picks one (1-based),
        default the latest. ``waiting`` (with ``follow``) hears why the job waits while it does
        (``launcher.job.waiting``), from the state each poll reads anyway.
        """
        job = job_id_of(job_id)
        session = self.aws.session
        watch = self.watch(waiting) if waiting is not None and follow else None
        with self.logs.join(
            (session.profile_name, session.region_name, job, attempt),
            None if node is None else frozenset({node}),
            source=JobLogs(self.aws, job, attempt, self._describe_raw, watch),
            label=job,
            since_ms=int(since * 1000) if since is not None else None,
            keep_following=follow,
        ) as followed:
            for index, event in followed:
                yield LogLine(index, event["message"], event["timestamp"] / 1000)


class JobLogs:
    """One Batch job's CloudWatch logs, as ``launcher.aws.follow`` reads them: its state, its
    nodes' streams (from their records, ``JOB#N``), pages of their events."""

    def __init__(
        self,
        aws: Aws,
        job_id: str,
        attempt: int | None,
        describe: Callable[[str], dict[str, Any]],
        watch: Watch | None = None,
    ) -> None:
        self.aws, self.job_id, self.attempt, self.describe = aws, job_id, attempt, describe
        self.watch = watch
        self.job: dict[str, Any] = {}
        self.group = ""
        self._checked = False
        self._told: set[str] = set()  # replacement lines already said

    def state(self, call: Call) -> JobFacts:
        self.job = call(functools.partial(self.describe, self.job_id))
        array = self.job.get("arrayProperties") or {}
        if array.get("size") and array.get("index") is None:
            raise UsageError(
                f"job {self.job_id} is an array of {array['size']}: its children have the logs; "
                f"pass --index 0-{array['size'] - 1}"
            )
        self.group = _log_group(self.job)
        if self.watch is not None:
            info = job_info(self.job)
            self.watch.observe(info)
            # A node the stack replaced after an attempt: said once, as the retry begins.
            for line in (r for r in info.replacements if r not in self._told):
                self._told.add(line)
                self.watch.progress(Event(line))
        return JobFacts(
            state=self.job["status"],
            ended=JobState(self.job["status"]).terminal,
            nodes=int(self.job.get("nodeProperties", {}).get("numNodes", 1)),
        )

    def streams(self, nodes: Nodes, call: Call) -> Streams:
        job = self.job
        if "nodeProperties" not in job:
            records = [job]  # a container job (a copy job) is its own one node
            described: Nodes = None
        else:
            count = int(job["nodeProperties"]["numNodes"])
            # DescribeJobs takes 100 ids a call: a job of up to 100 nodes is described whole
            # for the price of one node, so followers that join later need no call for it.
            wanted = (
                list(range(count))
                if nodes is None or count <= 100
                else sorted(n for n in nodes if 0 <= n < count)
            )
            ids = [f"{job['jobId']}#{n}" for n in wanted]
            records = []
            for first in range(0, len(ids), 100):
                records += call(functools.partial(self.aws.describe_jobs, ids[first : first + 100]))
            described = None if len(wanted) == count else frozenset(wanted)
        if self.attempt is not None and not self._checked:
            available = max((len(r.get("attempts", [])) for r in records), default=0)
            if not 1 <= self.attempt <= max(available, 1):
                raise UsageError(
                    f"--attempt {self.attempt}: job {job['jobId']} has "
                    + (f"attempts 1-{available}" if available > 1 else "one attempt so far")
                )
            self._checked = True
        streams = {}
        for record in records:
            stream = _stream_of(record, self.attempt)
            if stream:
                index = record["jobId"].rsplit("#", 1)[1] if "#" in record["jobId"] else 0
                streams[stream] = int(index)
        return Streams(streams, described)

    def page(
        self, streams: list[str], start_ms: int | None, token: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        return self.aws.filter_log_events(self.group, streams, start_ms, token)


def _stream_of(record: dict[str, Any], attempt: int | None) -> str | None:
    """A node's log stream for one attempt (1-based), or the latest."""
    attempts = record.get("attempts", [])
    if attempt is not None:
        if attempt > len(attempts):
            return None
        return _stream_name(attempts[attempt - 1])
    current = _stream_name(record)
    if current:
        return current
    return _stream_name(attempts[-1]) if attempts else None


def _stream_name(record: dict[str, Any]) -> str | None:
    """The log stream of a job's (or an attempt's) container, once it has one."""
    name: str | None = record.get("container", {}).get("logStreamName")
    return name


def _log_group(job: dict[str, Any]) -> str:
    """The job's own awslogs group, from its containers (no stack lookup needed)."""
    ranges = job.get("nodeProperties", {}).get("nodeRangeProperties", [])
    for container in [r.get("container", {}) for r in ranges] or [job.get("container", {})]:
        options: dict[str, str] = container.get("logConfiguration", {}).get("options", {})
        if "awslogs-group" in options:
            return options["awslogs-group"]
    raise UsageError(f"job {job['jobId']} does not log to CloudWatch Logs (no awslogs group)")


class QueueProbe:
    """Why a Batch job waits (``launcher.job.waiting.Probe``), one call a turn.

    A PENDING job with dependencies: their states (one DescribeJobs, 100 ids a call). Any other
    waiting job, in turn: its place in the queue (GetJobQueueSnapshot), the queue's compute
    environments (DescribeComputeEnvironments; the first time one DescribeJobQueues before it,
    to name them) and their ECS clusters (DescribeClusters: instances running, which Batch's
    own API does not count). Calls go through ``call`` (the process's limiter)."""

    SOURCES = ("queue", "environments", "clusters", "launches", "instances", "console")
    EC2_SOURCES = frozenset({"groups", "launches", "instances", "console"})
    # A RUNNABLE job's EC2 side is read after this long: scaling out takes a minute or two.
    EC2_GRACE_SECONDS = 90.0

    def __init__(self, aws: Aws, call: Call, clock: Callable[[], float] = time.time) -> None:
        self.aws, self.call, self.clock = aws, call, clock
        self._environments: list[str] | None = None  # the queue's, in its order
        self._clusters: dict[str, str] = {}  # environment name -> its ECS cluster
        self._capacity: dict[str, Capacity] = {}
        self._groups: dict[str, str] | None = None  # environment name -> its Auto Scaling group
        self._launches = 0  # launches read so far: the next one reads the next group
        self._unjoined: str | None = None  # an instance that never joined, its console unread

    def probe(self, info: JobInfo, turn: int) -> Facts:
        if info.state is JobState.PENDING and info.depends_on:
            return Facts(waits_for=self._dependencies(info) or "")
        if not info.queue:
            return Facts()
        source = self.SOURCES[turn % len(self.SOURCES)]
        if self._groups is None and self._ec2_due(info):
            source = "groups"  # once, as soon as the EC2 side is due
        if source in self.EC2_SOURCES and not self._ec2_due(info):
            source = "environments"
        if source == "console" and self._unjoined is None:
            source = "environments"
        if source == "clusters" and not self._clusters:
            source = "environments"
        return self._read(info, source)

    def _read(self, info: JobInfo, source: str) -> Facts:
        """One source's facts, with at most one call."""
        assert info.queue
        if source in self.EC2_SOURCES and not self._ec2_due(info):
            return Facts()
        if source == "clusters" and not self._clusters:
            return Facts()
        if source == "queue":
            return Facts(place=self._place(info.job_id, info.queue))
        if source == "groups":
            self._groups = {}  # read once: a refusal (no permission) is not asked again
            found = self.call(functools.partial(self.aws.scaling_groups, []))
            self._groups = readiness.scaling_groups(list(self._capacity), found)
            return Facts()
        if source == "launches":
            return Facts(launch=self._launch())
        if source == "instances":
            joining = self._instances()
            return Facts(joining=joining, console="" if not joining else None)
        if source == "console":
            return Facts(console=self._console())
        if source == "environments":
            self._read_environments(info.queue)
        else:
            self._read_clusters()
        return Facts(capacity=tuple(self._capacity.values()))

    def look(self, info: JobInfo) -> Facts:
        """Every fact at once, for ``launcher status``: the queue's order, the environments
        and their clusters, then (RUNNABLE past the grace) the groups' latest launch, the
        instances that never joined and one's console; a fact it may not read is left out."""
        facts = Facts()
        if not info.queue:
            return facts
        # At once, not paced: no follower shares this process's calls (botocore still retries
        # what AWS throttles).
        paced, self.call = self.call, lambda fn: fn()
        try:
            for source in ("queue", "environments", "clusters", "groups", "launches"):
                with contextlib.suppress(LauncherError):
                    facts = facts.merged(self._read(info, source))
            if self._ec2_due(info):
                for source in ("instances", "console"):
                    if source == "console" and self._unjoined is None:
                        break
                    with contextlib.suppress(LauncherError):
                        facts = facts.merged(self._read(info, source))
        finally:
            self.call = paced
        return facts

    def _ec2_due(self, info: JobInfo) -> bool:
        """RUNNABLE past the grace (since its submission), its compute environments known."""
        if info.state is not JobState.RUNNABLE or not self._capacity:
            return False
        return not info.created_at or self.clock() - info.created_at >= self.EC2_GRACE_SECONDS

    def _launch(self) -> str | None:
        """The newest scaling activity of one environment's group, in turn, when it failed
        ("": read, none failed; None: the groups are not known yet)."""
        if self._groups is None:
            return None
        if not self._groups:
            return ""
        names = list(self._groups)
        name = names[self._launches % len(names)]
        self._launches += 1
        activities = self.call(functools.partial(self.aws.scaling_activities, self._groups[name]))
        return readiness.failed_launch(activities, self.clock()) or ""

    def _instances(self) -> str | None:
        """Instances of the environments' groups that never joined their ECS cluster."""
        if not self._groups:
            return None
        found = self.call(functools.partial(self.aws.group_instances, list(self._groups.values())))
        for name, group in self._groups.items():
            mine = readiness.in_group(found, group)
            registered = self._capacity[name].running if name in self._capacity else None
            text, oldest = readiness.unjoined(mine, registered, self.clock())
            if text:
                self._unjoined = oldest
                return text
        self._unjoined = None
        return ""

    def _console(self) -> str:
        assert self._unjoined is not None
        instance, self._unjoined = self._unjoined, None  # once is enough: the line keeps it
        output = self.call(functools.partial(self.aws.console_output, instance))
        return readiness.console_tail(output) or ""

    def _dependencies(self, info: JobInfo) -> str | None:
        ids = [parse_after(d).job_id for d in info.depends_on][:DESCRIBE_JOBS]
        found = self.call(functools.partial(self.aws.describe_jobs, ids))
        states = {j["jobId"]: j["status"] for j in found}
        return pending(info.depends_on, lambda job_id: states.get(job_id, "unknown"))

    def _place(self, job_id: str, queue: str) -> Place:
        snapshot = self.call(functools.partial(self.aws.job_queue_snapshot, queue))
        front = [j["jobArn"] for j in (snapshot.get("frontOfQueue") or {}).get("jobs") or []]
        position = next((i for i, arn in enumerate(front, 1) if arn.endswith(f"/{job_id}")), None)
        return Place(position, len(front))

    def _read_environments(self, queue: str) -> None:
        if self._environments is None:
            found = self.call(functools.partial(self.aws.describe_job_queue, queue)) or {}
            order = sorted(found.get("computeEnvironmentOrder") or [], key=lambda e: e["order"])
            self._environments = [e["computeEnvironment"] for e in order]
        if not self._environments:
            return
        found = self.call(
            functools.partial(self.aws.describe_compute_environments, self._environments)
        )
        for environment in found:
            name = environment["computeEnvironmentName"]
            before = self._capacity.get(name)
            capacity = capacity_of(environment)
            if before is not None and capacity.running is None:
                capacity = dataclasses.replace(capacity, running=before.running)
            self._capacity[name] = capacity
            if environment.get("ecsClusterArn") and capacity.unit == "nodes":
                self._clusters[name] = environment["ecsClusterArn"]

    def _read_clusters(self) -> None:
        by_arn = {arn: name for name, arn in self._clusters.items()}
        found = self.call(functools.partial(self.aws.describe_ecs_clusters, list(by_arn)))
        for cluster in found:
            name = by_arn.get(cluster.get("clusterArn", ""))
            if name is not None and name in self._capacity:
                running = int(cluster.get("registeredContainerInstancesCount", 0))
                self._capacity[name] = dataclasses.replace(self._capacity[name], running=running)


def capacity_of(environment: dict[str, Any]) -> Capacity:
    """A DescribeComputeEnvironments entry in nodes: vCPUs over the vCPUs of its one instance
    type (the catalog's); in vCPUs where it has several types, or runs on Fargate."""
    from launcher.stack.catalog import lookup

    resources = environment.get("computeResources") or {}
    types = resources.get("instanceTypes") or []
    known = lookup(types[0]) if len(types) == 1 else None
    fargate = str(resources.get("type", "")).startswith("FARGATE")
    per_node = known.vcpus if known is not None and not fargate else None

    def count(vcpus: Any) -> int | None:
        if vcpus is None:
            return None
        return int(vcpus) // per_node if per_node else int(vcpus)

    problem = None
    if environment.get("state") != "ENABLED" or environment.get("status") != "VALID":
        problem = f"{environment.get('state')}, {environment.get('status')}"
        if environment.get("statusReason"):
            problem += f": {environment['statusReason']}"
    return Capacity(
        name=environment["computeEnvironmentName"],
        wanted=None if fargate else count(resources.get("desiredvCpus")),
        most=count(resources.get("maxvCpus")),
        unit="nodes" if per_node else "vCPUs",
        problem=problem,
    )
