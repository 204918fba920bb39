"""Waiting says why: while a job is SUBMITTED, PENDING or RUNNABLE, a follower (``logs -f``,
``run --follow``) and a waiter (``wait``) print one line within 5 s and update it at most every
30 s: how long the job has waited, Batch's reason, its place in the queue, what its compute
environment is doing. One call per update beyond the describes the follower makes anyway.

The emulated stack holds a submitted job RUNNABLE for ever (it has no instances), which is the
case itself: the CLI runs under a pseudo-terminal and piped against it.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time

import pytest

from devenv import moto_gaps
from devenv.emulator import ACCOUNT, REGION
from launcher.cli.console import Console
from launcher.errors import RemoteError
from launcher.job.info import JobInfo, JobState
from launcher.job.waiting import (
    Capacity,
    Facts,
    Place,
    Watch,
    duration_text,
    line,
    pending,
    summary,
)
from launcher.progress import Event, EventKind
from tests.cli.test_commands import IMAGE, LAUNCHER

WITHIN = 5.0  # seconds: the first waiting line's deadline


def info(state: JobState = JobState.RUNNABLE, **fields) -> JobInfo:
    return JobInfo(**{"job_id": "j-1", "name": "train", "state": state, **fields})


# --- the line -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (45.9, "45s"), (185, "3m05s"), (7440, "2h04m")]
)
def test_durations_read_like_a_clock(seconds, text):
    assert duration_text(seconds) == text


def test_the_place_in_the_queue_says_what_the_snapshot_can_say():
    assert Place(1, 3).text(JobState.RUNNABLE) == "1st of 3 in the queue"
    assert Place(12, 12).text(JobState.RUNNABLE) == "12th of 12 in the queue"
    assert Place(None, 100).text(JobState.RUNNABLE) == "behind the queue's first 100"
    assert Place(None, 0).text(JobState.SUBMITTED) == "not in the queue's order yet"


def test_the_line_has_the_state_the_time_the_reason_the_place_and_the_capacity():
    reason = "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - no p4d.24xlarge"
    facts = Facts(
        place=Place(2, 5),
        capacity=(Capacity("gpu", wanted=2, most=4, running=0),),
    )
    text = line(info(reason=reason), facts, 185)
    assert text == (
        f"RUNNABLE for 3m05s · {reason} · 2nd of 5 in the queue · "
        "compute environment gpu: 2 nodes wanted, 0 running, max 4"
    )
    # What a piped console compares: the same without the time waited.
    assert summary(info(reason=reason), facts) == text.replace(" for 3m05s", "")


def test_a_pending_job_says_what_it_waits_for():
    states = {"a": "RUNNING", "b": "SUCCEEDED", "c": "SUCCEEDED"}
    waits = pending(("a", "b", "c:each"), states.__getitem__)
    assert waits == "a (RUNNING), c:each (SUCCEEDED)"
    assert line(info(JobState.PENDING), Facts(waits_for=waits), 12) == (
        f"PENDING for 12s · waiting for {waits}"
    )
    assert pending(("b",), states.__getitem__) is None


def test_compute_environments_are_counted_in_nodes_of_their_instance_type():
    from launcher.aws.batch import capacity_of

    p4d = {
        "computeEnvironmentName": "gpu",
        "state": "ENABLED",
        "status": "VALID",
        "computeResources": {
            "type": "EC2",
            "desiredvCpus": 192,
            "maxvCpus": 384,
            "instanceTypes": ["p4d.24xlarge"],
        },
    }
    assert capacity_of(p4d) == Capacity("gpu", wanted=2, most=4)
    mixed = {**p4d, "computeResources": {**p4d["computeResources"], "instanceTypes": ["optimal"]}}
    assert capacity_of(mixed).text() == "gpu: 192 vCPUs wanted, max 384"
    broken = {**p4d, "status": "INVALID", "statusReason": "CLIENT_ERROR - no such subnet"}
    assert capacity_of(broken).problem == "ENABLED, INVALID: CLIENT_ERROR - no such subnet"


# --- when it is said ------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Turns:
    """A probe that records its turns and says which one it is."""

    def __init__(self, fail: bool = False) -> None:
        self.turns: list[int] = []
        self.fail = fail

    def probe(self, job, turn):
        self.turns.append(turn)
        if self.fail:
            raise RemoteError("AWS GetJobQueueSnapshot failed: 404")
        return Facts(place=Place(turn + 1, 9))


def test_the_first_state_is_said_at_once_then_at_most_every_30_s_then_the_line_ends():
    clock, events, probe = Clock(), [], Turns()
    watch = Watch(probe, events.append, clock=clock, wall=lambda: clock.now)
    job = info(created_at=clock.now - 3)
    watch.observe(job)
    assert [e.text for e in events] == ["RUNNABLE for 3s · 1st of 9 in the queue"]
    for _ in range(5):  # the follower reads the state every poll; no call, nothing said
        clock.now += 5
        watch.observe(job)
    assert len(events) == 1 and probe.turns == [0]
    clock.now += 5  # 30 s since the line
    watch.observe(job)
    assert events[-1].text == "RUNNABLE for 33s · 2nd of 9 in the queue"
    assert probe.turns == [0, 1]
    watch.observe(info(JobState.STARTING))
    watch.observe(info(JobState.RUNNING))
    assert [e.kind for e in events] == [EventKind.WAITING] * 2 + [EventKind.WAITED]


def test_a_retry_that_waits_again_counts_from_when_it_was_seen_waiting():
    clock, events = Clock(), []
    watch = Watch(Turns(), events.append, clock=clock, wall=lambda: clock.now)
    watch.observe(info(JobState.RUNNING, created_at=clock.now - 7200, started_at=clock.now - 60))
    clock.now += 12
    watch.observe(info(created_at=clock.now - 7212, started_at=clock.now - 72))
    assert events[-1].text.startswith("RUNNABLE for 0s")


def test_a_fact_that_cannot_be_read_leaves_the_line_without_it():
    clock, events = Clock(), []
    Watch(Turns(fail=True), events.append, clock=clock, wall=lambda: clock.now).observe(
        info(reason="MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT", created_at=clock.now)
    )
    assert [e.text for e in events] == [
        "RUNNABLE for 0s · MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT"
    ]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_redraws_the_line_in_place_and_a_pipe_gets_it_only_when_it_changes():
    def waiting(text: str, said: str) -> Event:
        return Event(text, EventKind.WAITING, label=said)

    tty = Terminal()
    console = Console(tty)
    console(waiting("RUNNABLE for 1s · 1st of 2 in the queue", "RUNNABLE · 1st of 2"))
    console(waiting("RUNNABLE for 31s · 1st of 2 in the queue", "RUNNABLE · 1st of 2"))
    console(Event("", EventKind.WAITED))
    assert tty.getvalue() == (
        "\rRUNNABLE for 1s · 1st of 2 in the queue\x1b[K"
        "\rRUNNABLE for 31s · 1st of 2 in the queue\x1b[K"
        "\r\x1b[K"
    )
    pipe = io.StringIO()
    console = Console(pipe)
    console(waiting("RUNNABLE for 1s · 2nd of 2 in the queue", "RUNNABLE · 2nd of 2"))
    console(waiting("RUNNABLE for 31s · 2nd of 2 in the queue", "RUNNABLE · 2nd of 2"))
    console(waiting("RUNNABLE for 61s · 1st of 1 in the queue", "RUNNABLE · 1st of 1"))
    console(Event("", EventKind.WAITED))
    assert pipe.getvalue() == (
        "RUNNABLE for 1s · 2nd of 2 in the queue\nRUNNABLE for 61s · 1st of 1 in the queue\n"
    )


def test_a_local_job_says_which_dependency_it_waits_for():
    from launcher.local.backend import LocalBackend, _DependencyProbe

    class Records(LocalBackend):
        def __init__(self) -> None:
            pass

        def describe(self, job_id, nodes=False):
            assert job_id == "local-a"
            return info(JobState.RUNNING, job_id=job_id)

    events: list[Event] = []
    clock = Clock()
    watch = Watch(_DependencyProbe(Records()), events.append, clock=clock, wall=lambda: clock.now)
    watch.observe(info(JobState.PENDING, depends_on=("local-a",), created_at=clock.now - 65))
    assert [e.text for e in events] == ["PENDING for 1m05s · waiting for local-a (RUNNING)"]


# --- against the emulated stack --------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(moto_server, synth_default):
    moto_server.reset()
    moto_server.deploy(synth_default.outdir, synth_default.stack_names)
    return moto_server


def _env(server) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LAUNCHER_STACK", "NO_COLOR")}
    return {**env, **server.env}


def _submit(server) -> str:
    args = ["run", "--no-workspace", "--image", IMAGE, "--nodes", "2", "--", "x"]
    done = subprocess.run(
        [LAUNCHER, *args], env=_env(server), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[-1]


@pytest.fixture(scope="module")
def queued(cluster):
    """Two jobs the emulated queue holds RUNNABLE, in submission order."""
    ids = [_submit(cluster), _submit(cluster)]
    yield ids
    for job_id in ids:
        moto_gaps.finish_job(ACCOUNT, REGION, job_id, success=False)


def test_the_emulated_queue_lists_its_runnable_jobs_in_order(cluster, queued):
    snapshot = cluster.client("batch").get_job_queue_snapshot(jobQueue="EfaBatch-jobs")
    front = [j["jobArn"].rsplit("/", 1)[1] for j in snapshot["frontOfQueue"]["jobs"]]
    assert front[-2:] == queued


def test_each_update_makes_one_call_in_turn_queue_environments_clusters(
    cluster, queued, monkeypatch
):
    from launcher.aws.batch import BatchBackend, QueueProbe
    from launcher.aws.client import Aws

    for key, value in cluster.env.items():
        monkeypatch.setenv(key, value)
    aws = Aws(region=REGION)
    job = BatchBackend(aws).describe(queued[1])
    clock, events = Clock(), []
    watch = Watch(
        QueueProbe(aws, lambda fn: fn()), events.append, clock=clock, wall=lambda: clock.now
    )
    calls = []
    for _ in range(5):
        before = aws.calls
        watch.observe(job)
        calls.append(aws.calls - before)
        clock.now += 30
    # Snapshot; the queue (once) and its environments; their ECS clusters; and again.
    assert calls == [1, 2, 1, 1, 1]
    texts = [e.text for e in events]
    assert "2nd of 2 in the queue" in texts[0]
    # p4d.24xlarge: 96 vCPUs a node; the default stack's environment goes up to 2 nodes.
    assert re.search(r"compute environment EfaBatch-ComputeEnvironment-\w+: max 2$", texts[1])
    assert texts[2].endswith(": 0 running, max 2")


class PseudoTerminal:
    """``launcher ARGS`` with a pseudo-terminal (200 columns) as its stdin, stdout and
    stderr: what a person sees, read as it comes."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.fd, child = pty.openpty()
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [LAUNCHER, *args],
            env={**env, "TERM": "xterm"},
            stdin=child,
            stdout=child,
            stderr=child,
            start_new_session=True,
        )
        os.close(child)
        self.seen = ""

    def until(self, pattern: str, deadline: float) -> re.Match[str] | None:
        """Read until ``pattern`` is seen or ``deadline`` (monotonic) passes."""
        while (match := re.search(pattern, self.seen)) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    self.seen += os.read(self.fd, 65536).decode(errors="replace")
                except OSError:  # the child closed the terminal
                    return None
        return match

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=30)
        os.close(self.fd)


WAITING_LINE = r"\rRUNNABLE for (\d+)s · (\w+) of (\d+) in the queue\x1b\[K"


@pytest.mark.parametrize("command", [["logs", "-f"], ["wait"]])
def test_a_follower_and_a_waiter_say_why_within_5_s_on_a_terminal(cluster, queued, command):
    terminal = PseudoTerminal([*command, queued[1]], _env(cluster))
    try:
        seen = terminal.until(WAITING_LINE, terminal.started + WITHIN)
        took = time.monotonic() - terminal.started
    finally:
        terminal.close()
    assert seen is not None, f"no waiting line within {WITHIN} s: {terminal.seen!r}"
    assert took < WITHIN
    assert seen.group(2, 3) == ("2nd", "2")  # behind the job submitted before it


def test_run_follow_says_why_its_job_waits_within_5_s_of_submitting(cluster, queued):
    args = ["run", "--no-workspace", "--image", IMAGE, "--nodes", "2", "--follow", "--", "x"]
    terminal = PseudoTerminal(args, _env(cluster))
    try:
        submitted = terminal.until(r"submitted x to \S+", terminal.started + 60)
        assert submitted is not None, terminal.seen
        since = time.monotonic()
        seen = terminal.until(WAITING_LINE, since + WITHIN)
        took = time.monotonic() - since
    finally:
        terminal.close()
        for job_id in moto_gaps.held_jobs(
            ACCOUNT, REGION, f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/EfaBatch-jobs"
        ):
            if job_id not in queued:
                moto_gaps.finish_job(ACCOUNT, REGION, job_id, success=False)
    assert seen is not None, f"no waiting line within {WITHIN} s: {terminal.seen!r}"
    assert took < WITHIN
    assert seen.group(2, 3) == ("3rd", "3")


def test_piped_the_waiting_line_is_a_plain_line_said_once_while_nothing_changes(cluster, queued):
    process = subprocess.Popen(
        [LAUNCHER, "logs", "-f", queued[0]],
        env=_env(cluster),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    started = time.monotonic()
    try:
        assert process.stderr is not None
        first = process.stderr.readline().decode()  # blocks until the line (or the end)
        took = time.monotonic() - started
        time.sleep(max(0.0, WITHIN + 2 - took))  # polls go on; nothing has changed
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert took < WITHIN, first
    assert re.fullmatch(r"RUNNABLE for \d+s · 1st of 2 in the queue\n", first)
    assert "\r" not in first and "\x1b" not in first
    assert b"RUNNABLE" not in err  # said once
