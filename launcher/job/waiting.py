"""Why a job waits: one line while it is SUBMITTED, PENDING or RUNNABLE, kept up to date.

A follower (``logs -f``, ``run --follow``) and a waiter (``Job.wait``) already read the job's
state; a ``Watch`` takes each state they read and, at most every ``EVERY`` seconds, asks the
backend's ``Probe`` for one more fact (one call on AWS: the queue's order, its compute
environments, or their ECS clusters, in turn) and reports the line as a ``WAITING`` progress
event. The line says how long the job has waited, the reason its backend gives, its place in
the queue, what its compute environment is doing, and what it waits for. The console draws it
in place on a terminal and prints it again only when it changes when piped.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Protocol

from launcher.errors import LauncherError
from launcher.job.info import JobInfo, JobState
from launcher.progress import Event, EventKind, ProgressFn

EVERY = 30.0  # seconds between updates of the line (and between the probe's calls)
WAITING_STATES = frozenset({JobState.SUBMITTED, JobState.PENDING, JobState.RUNNABLE})


def duration_text(seconds: float) -> str:
    """``45s``, ``3m05s``, ``2h04m``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass(frozen=True)
class Place:
    """The job's place among its queue's RUNNABLE jobs (GetJobQueueSnapshot's frontOfQueue,
    which lists the first 100 in the order Batch will dispatch them)."""

    position: int | None  # 1-based; None: not among those listed
    listed: int  # how many the snapshot listed

    def text(self, state: JobState) -> str:
        if self.position is not None:
            return f"{ordinal(self.position)} of {self.listed} in the queue"
        if state is not JobState.RUNNABLE:
            return "not in the queue's order yet"
        if self.listed >= 100:
            return "behind the queue's first 100"
        return "not in the queue's snapshot yet"


@dataclass(frozen=True)
class Capacity:
    """What one compute environment is doing: nodes (instances) it wants and has."""

    name: str
    wanted: int | None = None  # desiredvCpus in nodes (or vCPUs, ``unit``)
    most: int | None = None  # maxvCpus likewise
    running: int | None = None  # instances registered with its ECS cluster
    unit: str = "nodes"
    problem: str | None = None  # the environment is not ENABLED/VALID: its statusReason

    def text(self) -> str:
        parts = []
        if self.wanted is not None:
            parts.append(f"{self.wanted} {self.unit} wanted")
        if self.running is not None:
            parts.append(f"{self.running} running")
        if self.most is not None:
            parts.append(f"max {self.most}")
        body = ", ".join(parts) or "no figures yet"
        return f"{self.name}: {body}" + (f" ({self.problem})" if self.problem else "")


@dataclass(frozen=True)
class Facts:
    """What a probe found; None: not known (yet)."""

    place: Place | None = None
    capacity: tuple[Capacity, ...] | None = None
    waits_for: str | None = None  # dependencies not yet done, with their states
    # The EC2 side (""  = read, nothing to say): the pool's latest launch when it failed,
    # instances that never joined the cluster, and the last line of one's console.
    launch: str | None = None
    joining: str | None = None
    console: str | None = None

    def merged(self, newer: Facts) -> Facts:
        """These facts with whatever ``newer`` knows in their place."""
        return Facts(
            **{
                f.name: getattr(newer, f.name)
                if getattr(newer, f.name) is not None
                else getattr(self, f.name)
                for f in fields(Facts)
            }
        )


def pending(depends_on: Sequence[str], state_of: Callable[[str], str]) -> str | None:
    """The dependencies (``ID`` or ``ID:each``) a job still waits for, with their states:
    each one not SUCCEEDED, and every ``:each`` one (its children pair off one by one)."""
    from launcher.job.shapes import parse_after

    waits = []
    for text in depends_on:
        dependency = parse_after(text)
        state = state_of(dependency.job_id)
        if state != "SUCCEEDED" or dependency.each:
            waits.append(f"{dependency} ({state})")
    return ", ".join(waits) or None


class Probe(Protocol):
    """A backend's look at why a job waits: ``probe`` makes at most one call of its own per
    ``turn`` (a backend that reads local files makes none)."""

    def probe(self, info: JobInfo, turn: int) -> Facts: ...

    def look(self, info: JobInfo) -> Facts:
        """Every fact at once (``launcher status``), however many calls it takes."""
        ...


def summary(info: JobInfo, facts: Facts) -> str:
    """The line without the time waited: what a piped console compares."""
    parts = [str(info.state)]
    if info.reason:
        parts.append(info.reason)
    if facts.waits_for:
        parts.append(f"waiting for {facts.waits_for}")
    if facts.place is not None and info.state is not JobState.PENDING:
        parts.append(facts.place.text(info.state))
    if facts.capacity:
        noun = "compute environment" if len(facts.capacity) == 1 else "compute environments"
        parts.append(f"{noun} " + "; ".join(c.text() for c in facts.capacity))
    if facts.launch:
        parts.append(facts.launch)
    if facts.joining:
        parts.append(facts.joining)
        if facts.console:
            parts.append(f"its console's last line: {facts.console}")
    return " · ".join(parts)


def line(info: JobInfo, facts: Facts, waited: float) -> str:
    """``RUNNABLE for 1m05s · REASON · 1st of 3 in the queue · compute environment ...``"""
    state, sep, rest = summary(info, facts).partition(" · ")
    return f"{state} for {duration_text(waited)}" + (f" · {rest}" if sep else "")


class Watch:
    """One follower's waiting line: fed every state the follower reads (``observe``), it
    reports at once on the first waiting state, then at most every ``every`` seconds, each
    update with one probe call; and says when the job stops waiting."""

    def __init__(
        self,
        probe: Probe,
        progress: ProgressFn,
        *,
        every: float = EVERY,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.probe, self.progress, self.every = probe, progress, every
        self.clock, self.wall = clock, wall
        self.facts = Facts()
        self.turn = 0
        self._last: float | None = None  # when the line was last reported
        self._waiting = False
        self._since: float | None = None  # when this process first saw it waiting (wall)

    def observe(self, info: JobInfo) -> None:
        if info.state not in WAITING_STATES:
            if self._waiting:
                self._waiting = False
                self.progress(Event("", EventKind.WAITED, label=info.job_id))
            return
        now = self.clock()
        if self._waiting and self._last is not None and now - self._last < self.every:
            return
        if not self._waiting:
            self._since = self.wall()  # first seen waiting (again: a retry waits anew)
        self._waiting, self._last = True, now
        # A fact not read this time (a refusal, an endpoint without the call): the line goes
        # on with what is known.
        with contextlib.suppress(LauncherError):
            self.facts = self.facts.merged(self.probe.probe(info, self.turn))
        self.turn += 1
        # Waited since its submission; a job that has run before (a retry) since this process
        # saw it wait again, as Batch keeps no time for an attempt's wait.
        start = info.created_at if info.created_at and info.started_at is None else self._since
        waited = self.wall() - (start or self.wall())
        facts = (
            self.facts if info.state is JobState.PENDING else replace(self.facts, waits_for=None)
        )
        self.progress(
            Event(line(info, facts, waited), EventKind.WAITING, label=summary(info, facts))
        )
