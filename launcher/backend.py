"""The one interface every place a job can run implements (after TorchX's ``Scheduler``).

The request itself is built without I/O by ``jobdef.build`` (the dry run); a backend only
sends it and reports on what it started. Two implementations: ``batch.BatchBackend`` (AWS
Batch) and ``local.LocalBackend`` (the local Docker engine). Callers (``api``, the CLI, the
TorchX scheduler) never see a backend's own shapes, only the values of ``launcher.job.info``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

from launcher.errors import UsageError
from launcher.job.info import BackendName, CancelOutcome, JobInfo, JobState, LogLine
from launcher.job.jobdef import Requests
from launcher.job.waiting import Watch
from launcher.progress import ProgressFn

Say = Callable[[str], None]  # progress messages, one line each (the CLI prints them)


def newest_first(jobs: Iterable[JobInfo], include_finished: bool) -> list[JobInfo]:
    """What ``list`` returns: the jobs (unfinished only, unless asked), newest first."""
    kept = [j for j in jobs if include_finished or not j.state.terminal]
    return sorted(kept, key=lambda j: j.created_at or 0, reverse=True)


def already_ended(job_id: str, state: JobState) -> UsageError:
    """What cancelling a job that has ended says (``cancel`` raises it, ``cancel_many`` keeps it
    as that job's outcome)."""
    return UsageError(f"job {job_id} already {state}; nothing to cancel")


def no_such_jobs(missing: Sequence[str], where: str) -> UsageError:
    """What a cancel of several jobs says, and stops at, when some of the ids name no job."""
    if len(missing) == 1:
        return UsageError(f"job {missing[0]}: no such job {where}; nothing cancelled")
    return UsageError(f"jobs {', '.join(missing)}: no such jobs {where}; nothing cancelled")


class Backend(Protocol):
    name: BackendName

    def owns(self, job_id: str) -> bool:
        """Whether a job id (or ``QUEUE:JOB_ID``) can be one of this backend's jobs."""
        ...

    def schedule(self, requests: Requests, say: Say) -> str:
        """Start the job the requests describe; return its id."""
        ...

    def describe(self, job_id: str, nodes: bool = False) -> JobInfo:
        """The job's state; with ``nodes``, each node's too (on AWS one more call). UsageError
        for an unknown id. ``JobInfo.cancelled`` says whether a cancel ended it."""
        ...

    def log_iter(
        self,
        job_id: str,
        node: int | None = None,
        since: float | None = None,
        follow: bool = False,
        attempt: int | None = None,
        waiting: ProgressFn | None = None,
    ) -> Iterator[LogLine]:
        """Each node's lines in order; with ``follow``, until the job ends and all are read.
        ``since`` is seconds since the epoch; ``attempt`` (1-based) defaults to the latest.
        ``waiting`` (with ``follow``) hears why the job waits while it does (``watch``)."""
        ...

    def watch(self, progress: ProgressFn) -> Watch:
        """A waiting line (``launcher.job.waiting``) told to ``progress``, fed the states a
        follower or a waiter reads; its probe makes at most one call an update."""
        ...

    def cancel(self, job_id: str) -> JobInfo:
        """Stop the job in any state; return what it was."""
        ...

    def cancel_many(self, job_ids: Sequence[str]) -> list[CancelOutcome]:
        """Stop several jobs in any state, in as few calls as the backend can: one outcome per
        distinct id, in order, a job that had ended or could not be stopped included (with the
        error ``cancel`` would have raised). UsageError, and nothing stopped, when an id names
        no job."""
        ...

    def enter(self, job_id: str, node: int, command: Sequence[str]) -> int:
        """Run ``command`` in node ``node`` of a running job, attached to this terminal; its
        exit status (``launcher exec``). UsageError, and nothing opened, when the job or the
        node is not running."""
        ...

    def resubmit(self, job_id: str, say: Say) -> tuple[str, str]:
        """The job again, resuming from its checkpoint directory; (new id, directory)."""
        ...

    def list(
        self,
        include_finished: bool = False,
        name: str | None = None,
        images: bool = False,
        tags: bool = False,
    ) -> list[JobInfo]:
        """Every job of this backend's queue (or only those named ``name``), newest first
        (complete, not one page); with ``images``, each one's image, and with ``tags`` its tags,
        where a listing lacks them (what it costs a backend to look up is paid only when asked
        for)."""
        ...


class Payloads(Protocol):
    """Where one Python function's call lives (launcher.job.function): the objects the
    launcher and the job's nodes exchange. ``location`` is what the nodes are told
    (``s3://BUCKET/PREFIX/`` or a directory as the nodes see it), ``region`` the bucket's."""

    location: str
    region: str | None

    def put(self, name: str, data: bytes) -> None: ...

    def get(self, name: str) -> bytes | None:
        """The object's bytes; None when there is none yet."""
        ...

    def remove(self, names: Sequence[str]) -> None:
        """The call's objects, once read; one already gone is no error."""
        ...
