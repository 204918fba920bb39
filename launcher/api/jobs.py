"""A job on one backend (``Job``), and what acts on jobs by their ids alone, without reading
any stack: ``attach``, ``cancel_jobs``, ``local_jobs``.

Every ``Job`` method is one round of calls to its backend (``launcher.backend.Backend``); a
job never asks which backend it holds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from launcher.api.backends import backends, local_store
from launcher.backend import Backend
from launcher.errors import UsageError
from launcher.job.info import CancelOutcome, JobInfo, LogLine
from launcher.job.shapes import Dependency
from launcher.progress import ProgressFn, say

if TYPE_CHECKING:
    from launcher.aws.client import Aws
    from launcher.job.lost_nodes import LostNodes
    from launcher.job.waiting import Facts


def attach(
    job_ids: Sequence[str],
    *,
    profile: str | None = None,
    region: str | None = None,
    aws: Aws | None = None,
) -> list[Job]:
    """Jobs by their ids, without reading any stack: each id's backend is the first that owns
    it, and jobs of one kind share one backend (one AWS session). UsageError for an id no
    backend owns; no I/O but making the backends."""
    made: list[Backend] = []
    more = backends(profile, region, aws)
    jobs = []
    for job_id in job_ids:
        owner = next((b for b in made if b.owns(job_id)), None)
        while owner is None and (backend := next(more, None)) is not None:
            made.append(backend)
            owner = backend if backend.owns(job_id) else None
        if owner is None:
            raise UsageError(f"job {job_id!r}: not a job id of AWS Batch or of the local engine")
        jobs.append(Job(job_id, owner))
    return jobs


def cancel_jobs(jobs: Sequence[Job]) -> list[CancelOutcome]:
    """Cancel several jobs of one backend together (``Backend.cancel_many``: on AWS, 50 to a
    TerminateJobs call); one outcome per job. UsageError, and nothing cancelled, for jobs of
    two backends or an id that names no job."""
    kinds = {job.backend.name for job in jobs}
    if len(kinds) > 1:
        raise UsageError(
            "local and AWS Batch jobs in one cancel; cancel each kind with a command of its own"
        )
    if not jobs:
        return []
    return jobs[0].backend.cancel_many([job.job_id for job in jobs])


def local_jobs(*, all: bool = False) -> list[JobInfo]:  # noqa: A002
    """Jobs run on the local Docker engine (no stack needed), newest first."""
    from launcher.local import LocalBackend

    return LocalBackend(store=local_store()).list(include_finished=all)


def local_jobs_elsewhere() -> str | None:
    """Why a local listing may be empty, when ``./.demo/env`` keeps its jobs in another state
    directory than the one read (``launcher.api.elsewhere``): ``read from DIR; the demo's jobs
    are in ...``; else None."""
    from launcher.api.elsewhere import local_state_hint

    base = local_store().base
    hint = local_state_hint(base)
    return f"read from {base}; {hint}" if hint else None


@dataclass
class Job:
    """A job on one backend; every method is one round of calls to it."""

    job_id: str
    backend: Backend

    def each(self) -> Dependency:
        """This array as a dependency child by child (``N_TO_N``): ``after=[job.each()]``."""
        return Dependency(self.job_id, each=True)

    def child(self, index: int) -> Job:
        """Child ``index`` of this array (``ID:INDEX``, as Batch names it)."""
        (child,) = self.children([index], str(index))
        return child

    def children(self, indexes: Sequence[int], flag: str | None = None) -> list[Job]:
        """Children ``indexes`` of this array, one status call; UsageError naming ``--index
        FLAG`` (default: the indexes) unless this is an array that has them all."""
        info = self.status()
        flag = flag if flag is not None else ",".join(map(str, indexes))
        if info.array_size is None or info.array_index is not None:
            raise UsageError(f"--index {flag}: job {self.job_id} is not an array job")
        if any(not 0 <= index < info.array_size for index in indexes):
            raise UsageError(
                f"--index {flag}: job {self.job_id} has children 0-{info.array_size - 1}"
            )
        return [Job(f"{info.job_id}:{index}", self.backend) for index in indexes]

    @classmethod
    def attach(
        cls,
        job_id: str,
        *,
        profile: str | None = None,
        region: str | None = None,
        aws: Aws | None = None,
    ) -> Job:
        """A job by its id, without reading any stack (``status`` costs one call): the backend
        that owns the id is found by asking each. ``aws``: a session to share."""
        (job,) = attach([job_id], profile=profile, region=region, aws=aws)
        return job

    def status(self) -> JobInfo:
        return self.backend.describe(self.job_id)

    def describe(self) -> JobInfo:
        """The job and each node's state (one more call on AWS)."""
        return self.backend.describe(self.job_id, nodes=True)

    def logs(
        self,
        *,
        node: int | None = None,
        since: float | None = None,
        follow: bool = False,
        attempt: int | None = None,
        waiting: ProgressFn | None = None,
    ) -> Iterator[LogLine]:
        """Each node's lines; ``since`` in seconds since the epoch; ``follow`` until the end;
        ``attempt`` (1-based) one attempt's, default the latest. ``waiting`` (with ``follow``):
        why the job waits, while it does (``launcher.job.waiting``; the CLI passes its console)."""
        return self.backend.log_iter(
            self.job_id, node=node, since=since, follow=follow, attempt=attempt, waiting=waiting
        )

    def waiting_for(self, info: JobInfo) -> str | None:
        """What a waiting job waits for: each dependency not yet succeeded, with its state
        (one describe each); None for a job that waits for nothing."""
        from launcher.job.waiting import pending

        if info.state.value not in ("SUBMITTED", "PENDING") or not info.depends_on:
            return None

        def state_of(job_id: str) -> str:
            try:
                return self.backend.describe(job_id).state.value
            except UsageError:
                return "unknown"

        return pending(info.depends_on, state_of)

    def ec2_side(self, info: JobInfo) -> Facts | None:
        """Why a RUNNABLE job's nodes have not come, as EC2 tells it (the pool's latest failed
        launch, instances that never joined, one's console); None for a job in another state.
        Several calls; a fact the caller may not read is left out."""
        from launcher.job.info import JobState

        if info.state is not JobState.RUNNABLE:
            return None
        return self.backend.watch(lambda _: None).probe.look(info)

    def resubmit(self, progress: ProgressFn | None = None) -> Job:
        """The same job again, continuing from this one's checkpoint directory."""
        new_id, _ = self.backend.resubmit(self.job_id, say(progress))
        return Job(new_id, self.backend)

    def cancel(self) -> JobInfo:
        return self.backend.cancel(self.job_id)

    def enter(self, node: int = 0, command: Sequence[str] = ()) -> int:
        """Run ``command`` (default: a shell) in node ``node`` of a running job, attached to
        this terminal (or to plain pipes when stdin is not one); its exit status (on AWS, the
        Session Manager plugin's). UsageError, and nothing opened, for a job or node that is
        not running, or a job submitted without ECS Exec."""
        from launcher.job.enterable import DEFAULT_COMMAND

        return self.backend.enter(self.job_id, node, list(command) or list(DEFAULT_COMMAND))

    def lost_nodes(self, info: JobInfo) -> LostNodes | None:
        """Which nodes a job that ended with the node watch's exit code lost or never saw
        start: by the nodes' own records, and apart, labelled, what the main node's last lines
        claim beyond them (``launcher.job.lost_nodes``: the job writes that log). A few more calls
        (the nodes' records unless ``info`` has them, the main node's log)."""
        from launcher.job.lost_nodes import lost_nodes
        from launcher.node.prelude import NODE_LOST_EXIT

        if not info.state.terminal or info.last_exit_code != NODE_LOST_EXIT:
            return None
        if not info.node_status:
            info = self.describe()
        since = info.stopped_at - 600 if info.stopped_at else None
        lines = (line.message for line in self.logs(node=0, since=since))
        return lost_nodes(info.node_status, info.nodes, lines)

    def wait(
        self,
        timeout: float | None = None,
        poll: float = 5.0,
        waiting: ProgressFn | None = None,
    ) -> JobInfo:
        """Until the job ends, or ``timeout`` seconds pass (then its state at that moment).
        ``waiting``: why the job waits, while it does (``launcher.job.waiting``)."""
        end = time.monotonic() + timeout if timeout is not None else None
        watch = self.backend.watch(waiting) if waiting is not None else None
        while not (info := self.status()).state.terminal:
            if watch is not None:
                watch.observe(info)
            if end is not None and time.monotonic() >= end:
                return info
            time.sleep(poll if end is None else max(0.0, min(poll, end - time.monotonic())))
        if watch is not None:
            watch.observe(info)  # the line, if drawn, is finished
        return info
