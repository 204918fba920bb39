"""A local job's supervisor: ``python -m launcher.local.supervisor STATE_DIR JOB_ID``.

Detached from the launcher that started it, it follows the job as AWS Batch would: a job with
dependencies waits in PENDING until they succeed (and fails when one fails), the job ends with
the main node (its exit code decides, the other nodes are stopped), an attempt ends at the
timeout, a failed attempt is retried as the retry strategy says, and every node's log is saved
with Docker's timestamps. An array's supervisor runs its children, a few at a time, each as
such a job. It is the record's only writer (and its children's) from the moment the launcher
hands the job over (it waits on its stdin for that) to the job's end; SIGTERM is a cancel.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import threading
import time
from typing import Any, Protocol

from launcher.errors import UsageError
from launcher.job.info import CANCEL_REASON, JobState
from launcher.local import engine
from launcher.local.state import Attempt, Owner, Record, Store, now_ms

GO = b"go\n"  # the launcher's word that the record is this supervisor's
TIMEOUT_REASON = "Job attempt duration exceeded timeout"
EXIT_REASON = "Essential container in task exited"
# AWS documents that a dependant fails, not the words of its statusReason: these are ours.
DEPENDENCY_REASON = "Dependency {job_id} {state}: a job this one waits for did not succeed"
ARRAY_REASON = "{failed} of {size} array children failed"
CONCURRENCY_ENV = "LAUNCHER_LOCAL_ARRAY_CONCURRENCY"
DEFAULT_CONCURRENCY = 4  # children at once: enough to show the overlap, few enough for a laptop


class Stop(Protocol):
    """What ends a job early: the supervisor's SIGTERM, or for one child its own request."""

    def is_set(self) -> bool: ...


@dataclasses.dataclass(frozen=True)
class ChildStop:
    """An array child stops when the whole array is cancelled or it alone is
    (``Store.request_cancel``; Batch lets a child be cancelled on its own, which fails it)."""

    whole: threading.Event
    store: Store
    job_id: str

    def is_set(self) -> bool:
        return self.whole.is_set() or self.store.cancel_requested(self.job_id)


def before_exec() -> None:
    """In the child, before exec: a cancel (SIGTERM) waits until the supervisor handles it."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def supervise(store: Store, job_id: str, poll: float = 0.2) -> None:
    """Follow a job to its end: wait for what it depends on, then run it (or its children),
    attempt after attempt as its retry rules say."""
    from launcher.docker_client import docker_client

    cancelled = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: cancelled.set())
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    client = docker_client()
    record = store.load(job_id)
    if record.is_array:
        _make_children(store, record)
    if record.status is JobState.PENDING:
        # A child of an array waits for its counterparts (N_TO_N) on its own, not here.
        whole = [d["jobId"] for d in record.depends_on if d.get("type") != "N_TO_N"]
        reason = _wait_for(store, whole, cancelled, poll)
        if reason is not None:
            if record.is_array:
                _end_children(store, record, reason)
            _end(store, record, reason)
            return
    if record.is_array:
        _run_array(client, store, record, cancelled, poll)
    else:
        _run_job(client, store, record, cancelled, poll)


def _end(store: Store, record: Record, reason: str) -> None:
    """A job that never ran (or a child never started) ends FAILED with ``reason``."""
    record.status, record.status_reason = JobState.FAILED, reason
    record.exit_codes, record.stopped_at = [], now_ms()
    store.save(record, Owner.SUPERVISOR)


def _wait_for(store: Store, job_ids: list[str], cancelled: Stop, poll: float) -> str | None:
    """Until every job in ``job_ids`` succeeded (None), one failed, or a cancel (the reason).
    "If any of the job dependencies fail, the dependent job automatically transitions from
    PENDING to FAILED" (Batch user guide, job_dependencies.html)."""
    waiting = list(job_ids)
    while waiting:
        if cancelled.is_set():
            return CANCEL_REASON
        for job_id in list(waiting):
            try:
                state = store.load(job_id).status
            except UsageError:
                if _not_made_yet(store, job_id):
                    continue
                return DEPENDENCY_REASON.format(job_id=job_id, state="gone")
            if state is JobState.FAILED:
                return DEPENDENCY_REASON.format(job_id=job_id, state="FAILED")
            if state is JobState.SUCCEEDED:
                waiting.remove(job_id)
        if waiting:
            time.sleep(poll)
    return None


def _not_made_yet(store: Store, job_id: str) -> bool:
    """An array child whose record its parent's supervisor has not written yet: the parent is
    an array that has not ended (its supervisor writes the children when it starts, which may
    be after a job that waits for them starts waiting)."""
    parent_id, sep, index = job_id.rpartition(":")
    if not sep or not index.isdigit():
        return False
    try:
        parent = store.load(parent_id)
    except UsageError:
        return False
    return parent.is_array and not parent.status.terminal


def _run_job(client: Any, store: Store, record: Record, cancelled: Stop, poll: float) -> None:
    """One job (or one array child) from its first attempt to its end."""
    from launcher.job.retry import retries

    if not record.containers:  # it waited (or is a child): its nodes start now
        if cancelled.is_set():
            _end(store, record, CANCEL_REASON)
            return
        record.status = JobState.STARTING
        store.save(record, Owner.SUPERVISOR)
        try:
            record.containers, record.ulimit_caps = engine.start_nodes(
                client, record, lambda _: None
            )
        except Exception as exc:
            _end(store, record, f"could not start: {exc}")
            return
        record.status, record.started_at = JobState.RUNNING, now_ms()
        store.save(record, Owner.SUPERVISOR)
    while True:
        reason, main_exit, codes = _run_attempt(client, store, record, cancelled, poll)
        success = reason is None and main_exit == 0
        status_reason = reason or (None if success else EXIT_REASON)
        record.history.append(Attempt(record.attempt, codes, status_reason))
        again = (
            not success
            and reason is None  # a cancel or a timeout ends the job
            and retries(
                record.retry_strategy,
                record.attempt,
                status_reason=status_reason,
                reason=None,
                exit_code=main_exit,
            )
        )
        if not again:
            break
        record.attempt += 1
        store.attempt_dir(record.job_id, record.attempt)
        try:
            record.containers, record.ulimit_caps = engine.start_nodes(
                client, record, lambda _: None
            )
        except Exception as exc:
            status_reason, codes = f"could not start attempt {record.attempt}: {exc}", []
            break
        record.started_at = now_ms()
        store.save(record, Owner.SUPERVISOR)
    record.status = JobState.SUCCEEDED if success else JobState.FAILED
    record.status_reason, record.exit_codes, record.stopped_at = status_reason, codes, now_ms()
    store.save(record, Owner.SUPERVISOR)


# --- arrays -----------------------------------------------------------------------------------


def concurrency() -> int:
    """How many of an array's children run at once on this machine."""
    text = os.environ.get(CONCURRENCY_ENV, "")
    return max(1, int(text)) if text.isdigit() else DEFAULT_CONCURRENCY


def _make_children(store: Store, parent: Record) -> None:
    """The children's records, written by this supervisor (their one writer) before any runs."""
    assert parent.array_size is not None
    each = [d["jobId"] for d in parent.depends_on if d.get("type") == "N_TO_N"]
    for index in range(parent.array_size):
        if store.child(parent, index) is not None:
            continue
        store.create(
            dataclasses.replace(
                parent,
                job_id=f"{parent.job_id}:{index}",
                status=JobState.PENDING,
                array_index=index,
                depends_on=[{"jobId": f"{job_id}:{index}"} for job_id in each],
                containers=[],
                history=[],
                started_at=None,
            )
        )


def _run_array(
    client: Any, store: Store, parent: Record, cancelled: threading.Event, poll: float
) -> None:
    """Every child, in index order, ``concurrency()`` at a time; the parent stays PENDING while
    they run ("Array job parents are updated to PENDING when any child job is updated to
    RUNNABLE and remain in PENDING status while child jobs are running", botocore ListJobs)
    and fails when any child fails ("if a child array job fails ..., the parent job also
    fails", Batch user guide, array jobs)."""
    from concurrent.futures import ThreadPoolExecutor

    assert parent.array_size is not None
    parent.started_at = now_ms()
    store.save(parent, Owner.SUPERVISOR)

    def run_child(index: int) -> None:
        child = store.load(f"{parent.job_id}:{index}")
        if child.status.terminal:
            return
        stop = ChildStop(cancelled, store, child.job_id)
        reason = _wait_for(store, [d["jobId"] for d in child.depends_on], stop, poll)
        if reason is not None:
            _end(store, child, reason)
            return
        _run_job(client, store, child, stop, poll)

    with ThreadPoolExecutor(max_workers=concurrency()) as pool:
        list(pool.map(run_child, range(parent.array_size)))
    states = [store.load(f"{parent.job_id}:{i}").status for i in range(parent.array_size)]
    failed = states.count(JobState.FAILED)
    parent.stopped_at = now_ms()
    if cancelled.is_set():
        parent.status, parent.status_reason = JobState.FAILED, CANCEL_REASON
    elif failed:
        parent.status = JobState.FAILED
        parent.status_reason = ARRAY_REASON.format(failed=failed, size=parent.array_size)
    else:
        parent.status = JobState.SUCCEEDED
    store.save(parent, Owner.SUPERVISOR)


def _end_children(store: Store, parent: Record, reason: str) -> None:
    assert parent.array_size is not None
    for index in range(parent.array_size):
        child = store.child(parent, index)
        if child is not None and not child.status.terminal:
            _end(store, child, reason)


def _run_attempt(
    client: Any, store: Store, record: Record, cancelled: Stop, poll: float
) -> tuple[str | None, int | None, list[int | None]]:
    """One attempt: copy the logs, wait for the main node (or the timeout, or a cancel), stop
    every node, remove the containers; (reason or None, main exit code, every exit code)."""
    containers = record.containers

    def copy_logs(node: int, cid: str) -> None:
        with os.fdopen(store.open_log(record.job_id, node, record.attempt), "ab") as out:
            try:
                stream = client.containers.get(cid).logs(stream=True, follow=True, timestamps=True)
                for chunk in stream:
                    out.write(chunk)
                    out.flush()
            except Exception:
                pass  # container removed: nothing more to copy

    threads = [
        threading.Thread(target=copy_logs, args=(n, c), daemon=True)
        for n, c in enumerate(containers)
    ]
    for t in threads:
        t.start()
    deadline = time.time() + record.timeout if record.timeout else None
    reason = None
    while (main_exit := engine.exit_code(client, containers[0])) is None:
        if cancelled.is_set():
            reason = CANCEL_REASON
            break
        if deadline and time.time() > deadline:
            reason = TIMEOUT_REASON
            break
        time.sleep(poll)
    # The main node ended (or time ran out, or a cancel): stop every node, the workers first,
    # so each gets SIGTERM and its grace, as on Batch, while the main node's network (theirs)
    # is still there.
    for cid in reversed(containers):
        with contextlib.suppress(Exception):
            client.containers.get(cid).stop(timeout=5)
    for t in threads:
        t.join(timeout=10)
    codes = [engine.exit_code(client, cid) for cid in containers]
    for cid in containers:
        engine.remove(client, cid)
    engine.forget_runtime(record)  # its secrets and gate: the next start makes its own
    if cancelled.is_set() and reason is None:
        reason = CANCEL_REASON  # the cancel arrived as the main node ended
    return reason, main_exit, codes


def main(argv: list[str]) -> int:
    root, job_id = argv
    store = Store(root)
    sys.stdin.buffer.readline()  # the hand-over (or EOF: the launcher died before it)
    record = store.load(job_id)
    if (
        record.owner is not Owner.SUPERVISOR
        or record.writer is None
        or (record.writer.pid != os.getpid())
    ):
        print(f"{job_id}: not handed to this supervisor; leaving it", file=sys.stderr)
        return 1
    supervise(store, job_id)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
