"""A local job's supervisor: ``python -m launcher.local.supervisor STATE_DIR JOB_ID``.

Detached from the launcher that started it, it follows the job as AWS Batch would: the job
ends with the main node (its exit code decides, the other nodes are stopped), an attempt ends
at the timeout, a failed attempt is retried as the retry strategy says, and every node's log is
saved with Docker's timestamps. It is the record's only writer from the moment the launcher
hands the job over (it waits on its stdin for that) to the job's end; SIGTERM is a cancel.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from typing import Any

from launcher.job import CANCEL_REASON, JobState
from launcher.local import engine
from launcher.local.state import Attempt, Owner, Record, Store, now_ms

GO = b"go\n"  # the launcher's word that the record is this supervisor's
TIMEOUT_REASON = "Job attempt duration exceeded timeout"
EXIT_REASON = "Essential container in task exited"


def before_exec() -> None:
    """In the child, before exec: a cancel (SIGTERM) waits until the supervisor handles it."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def supervise(store: Store, job_id: str, poll: float = 0.2) -> None:
    """Follow a started job to its end, attempt after attempt as its retry rules say."""
    from launcher.docker_client import docker_client
    from launcher.retry import retries

    cancelled = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: cancelled.set())
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    client = docker_client()
    record = store.load(job_id)
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
        store.log_path(job_id, 0, record.attempt).parent.mkdir(parents=True, exist_ok=True)
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


def _run_attempt(
    client: Any, store: Store, record: Record, cancelled: threading.Event, poll: float
) -> tuple[str | None, int | None, list[int | None]]:
    """One attempt: copy the logs, wait for the main node (or the timeout, or a cancel), stop
    every node, remove the containers; (reason or None, main exit code, every exit code)."""
    containers = record.containers

    def copy_logs(node: int, cid: str) -> None:
        with open(store.log_path(record.job_id, node, record.attempt), "ab") as out:
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
    for cid in containers:  # the main node ended (or time ran out): stop every node
        with contextlib.suppress(Exception):
            client.containers.get(cid).stop(timeout=5)
    for t in threads:
        t.join(timeout=10)
    codes = [engine.exit_code(client, cid) for cid in containers]
    for cid in containers:
        engine.remove(client, cid)
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
