"""The local backend's records: one writer at a time, held by the code, and writers named so that
a cancel never signals a stranger. No Docker engine needed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from launcher.job.info import JobState
from launcher.local import LOST_REASON, LocalBackend, Owner, Process, Record, Store
from launcher.local.state import OwnershipError


def _record(job_id: str = "local-0000", **changes) -> Record:
    register = {
        "jobDefinitionName": "jd",
        "nodeProperties": {
            "numNodes": 2,
            "mainNode": 0,
            "nodeRangeProperties": [{"targetNodes": "0:", "container": {"image": "img"}}],
        },
    }
    fields = dict(
        job_id=job_id,
        name="train",
        definition="jd",
        queue="local",
        status=JobState.RUNNING,
        created_at=1,
        register=register,
        submit={"jobName": "train"},
        efs_dir=None,
        infiniband=False,
        gpus=False,
        writer=Process.of(os.getpid()),
    )
    return Record(**{**fields, **changes})


def _gone() -> Process:
    """A process that has exited and been reaped."""
    child = subprocess.Popen(["true"])
    process = Process.of(child.pid)
    child.wait()
    return process


def test_a_record_survives_its_file(tmp_path):
    store = Store(tmp_path)
    record = _record()
    store.create(record)
    assert store.load(record.job_id) == record
    assert store.log_path(record.job_id, 1).parent.is_dir()


def test_only_the_owner_writes_and_a_hand_over_moves_the_pen(tmp_path):
    store = Store(tmp_path)
    record = _record()
    store.create(record)
    store.save(record, Owner.SCHEDULER)
    with pytest.raises(OwnershipError):
        store.save(record, Owner.SUPERVISOR)
    handed = store.hand_over(record, Owner.SCHEDULER, Owner.SUPERVISOR, status=JobState.RUNNING)
    assert store.load(record.job_id).owner is Owner.SUPERVISOR
    with pytest.raises(OwnershipError):  # the scheduler lost the pen with the hand-over
        store.save(record, Owner.SCHEDULER)
    store.save(handed, Owner.SUPERVISOR)


def test_a_process_is_its_pid_and_its_start_time():
    """A pid reused by a later process is not the recorded one: no signal reaches it (bug class:
    a pid file read after the supervisor died and the pid went to someone else)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        real = Process.of(child.pid)
        impostor = Process(child.pid, real.started - 100)
        assert real.alive() and not impostor.alive()
        assert impostor.terminate() is False
        time.sleep(0.2)
        assert child.poll() is None  # untouched
        assert real.terminate() is True
        assert child.wait(timeout=10) == -signal.SIGTERM
    finally:
        child.kill()
        child.wait()


def test_an_exited_process_is_not_alive_even_before_it_is_reaped():
    child = subprocess.Popen(["true"])
    process = Process.of(child.pid)
    deadline = time.monotonic() + 10
    while process.alive() and time.monotonic() < deadline:  # a zombie until waited for
        time.sleep(0.05)
    assert not process.alive()
    child.wait()
    assert not _gone().alive()


def test_cancel_ends_a_job_whose_launcher_died_before_the_hand_over(tmp_path):
    """The launcher starting the job died before its supervisor took over: nobody else will
    write the record, so the cancel does, as the canceller."""
    store = Store(tmp_path)
    record = _record(writer=_gone())
    store.create(record)
    info = LocalBackend(store=store).cancel(record.job_id)
    assert info.state == JobState.RUNNING
    after = store.load(record.job_id)
    assert (after.status, after.status_reason, after.owner) == (
        JobState.FAILED,
        LOST_REASON,
        Owner.CANCELLER,
    )
    assert LocalBackend(store=store).describe(record.job_id).cancelled


def test_cancel_waits_for_a_live_launcher_to_hand_over(tmp_path, monkeypatch):
    """While the launcher that schedules the job lives, the cancel does not write: it waits."""
    from launcher.local import backend

    monkeypatch.setattr(backend, "HANDOVER_SECONDS", 0.5)
    store = Store(tmp_path)
    record = _record()  # the scheduler is this (live) process
    store.create(record)
    with pytest.raises(Exception, match="its scheduler did not stop it"):
        LocalBackend(store=store).cancel(record.job_id)
    assert store.load(record.job_id) == record


def test_a_supervisor_leaves_a_job_not_handed_to_it(tmp_path):
    """EOF on its stdin without the word (the launcher died first): it writes nothing."""
    store = Store(tmp_path)
    record = _record()
    store.create(record)
    result = subprocess.run(
        [sys.executable, "-m", "launcher.local.supervisor", str(tmp_path), record.job_id],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "not handed to this supervisor" in result.stderr
    assert store.load(record.job_id) == record


def test_a_job_waiting_for_an_array_child_not_yet_written_waits(tmp_path):
    """The race behind a consumer array failing with "Dependency ...:N gone" at random: its
    children start waiting before the producer's supervisor has written the producer's
    children. A child that its array has not written yet is waited for; a child of an array
    that ended without it, or of no array, is gone."""
    import threading

    from launcher.local import supervisor

    store = Store(tmp_path)
    store.create(_record("local-1111", status=JobState.PENDING, array_size=2))
    later = threading.Timer(
        0.5,
        lambda: store.create(
            _record("local-1111:0", status=JobState.SUCCEEDED, array_size=2, array_index=0)
        ),
    )
    later.start()
    started = time.monotonic()
    assert supervisor._wait_for(store, ["local-1111:0"], threading.Event(), 0.05) is None
    assert time.monotonic() - started >= 0.4
    store.create(_record("local-2222", status=JobState.FAILED, array_size=2))
    gone = supervisor._wait_for(store, ["local-2222:1"], threading.Event(), 0.05)
    assert gone is not None and "gone" in gone
    assert "gone" in (supervisor._wait_for(store, ["local-3333:0"], threading.Event(), 0.05) or "")
