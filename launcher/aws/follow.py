"""Reading a multi-node job's CloudWatch logs: every node's streams in one call, one reader per
job in a process, within the account's quota.

``FilterLogEvents`` reads up to 100 streams in one call (CloudWatch Logs API reference,
FilterLogEvents: logStreamNames), so a 64-node job costs what a 1-node job costs. Its quota is
5 calls a second for the whole account and region (``launcher.aws.pacing``), so a process also
reads each job once, however many follow it: followers of one job join its ``Tail`` (TorchX's
``log`` starts a thread per replica, each following one node), whose polls read the nodes they
all want. A follower that joins a tail already under way is caught up with one read of its own
nodes from its start, then shares the tail's polls. Every call of every tail goes through the
process's one ``pacing.Limiter``.

The pause between a tail's polls grows while the job is quiet (no new lines, no change of
state or streams): 1 s doubling up to 10 s (``Quiet``), back to 1 s when lines come or the job
changes. While the job runs, its state and streams are read again every ``REFRESH_ROUNDS``
polls or ``REFRESH_SECONDS``, and on the first quiet poll after lines (the job may have ended).

Each poll asks again from a little before the newest event seen (late ingestion: awslogs
batches, and events can be ingested after later ones from other streams) and drops the events
it has already delivered by their ``eventId``, so nothing is lost or repeated across polls,
pages, events that share a timestamp, or followers that join late. Each stream's events come
in timestamp order.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from launcher.aws import pacing
from launcher.errors import UsageError

MAX_STREAMS = 100  # FilterLogEvents: at most 100 logStreamNames per call
LOOKBACK_MS = 30_000  # re-read this much before the newest event, for late ingestion
DRAIN_POLLS = 3  # empty polls after the job ends before the follower stops
REFRESH_ROUNDS = 10  # a running job's state and streams are read again every so many polls...
REFRESH_SECONDS = 30.0  # ... or this often, whichever comes first

Nodes = frozenset[int] | None  # the nodes a follower wants; None: every node of the job
Call = Callable[[Callable[[], Any]], Any]  # makes one AWS call in its turn (Limiter.call)
Page = Callable[[list[str], int | None, str | None], tuple[list[dict[str, Any]], str | None]]
Event = tuple[int, dict[str, Any]]  # (node, FilterLogEvents event)


def union(*sets: Nodes) -> Nodes:
    if any(s is None for s in sets):
        return None
    return frozenset().union(*sets)  # type: ignore[arg-type]


def wants(nodes: Nodes, node: int) -> bool:
    return nodes is None or node in nodes


def missing(wanted: Nodes, described: Nodes) -> Nodes:
    """The wanted nodes whose records are not read yet (None: every node)."""
    if described is None:
        return frozenset()
    return None if wanted is None else wanted - described


@dataclass(frozen=True)
class Quiet:
    """Pauses between a tail's polls: ``base`` after lines or a change, doubling while the job
    is quiet, up to ``ceiling``."""

    base: float = 1.0
    ceiling: float = 10.0


def next_pause(quiet: Quiet, last: float, active: bool) -> float:
    """The pause before a tail's next poll, after one that saw lines or a change (``active``)
    or did not."""
    return quiet.base if active else min(quiet.ceiling, max(quiet.base, last * 2))


def refresh_due(
    *,
    first: bool,
    following: bool,
    ended: bool,
    known: bool,
    rounds: int,
    age: float,
    went_quiet: bool,
) -> bool:
    """Whether a poll reads the job's state and streams again before reading events: always
    the first; for a follower of a job that has not ended, while none of its streams is known
    (nodes not started), every REFRESH_ROUNDS polls or REFRESH_SECONDS (``age``), and on the
    first quiet poll after lines."""
    if first:
        return True
    if not following or ended:
        return False
    return not known or rounds >= REFRESH_ROUNDS or age >= REFRESH_SECONDS or went_quiet


@dataclass(frozen=True)
class JobFacts:
    state: str  # the job's state, compared between refreshes
    ended: bool
    nodes: int  # how many nodes the job has


@dataclass(frozen=True)
class Streams:
    by_name: dict[str, int]  # stream -> node
    described: Nodes  # the nodes whose records were read (None: all of them)


class Source(Protocol):
    """One job's logs: what a backend gives a tail. ``state`` and ``streams`` make their calls
    through ``call``; the tail calls ``page`` through it."""

    def state(self, call: Call) -> JobFacts: ...

    def streams(self, nodes: Nodes, call: Call) -> Streams: ...

    def page(
        self, streams: list[str], start_ms: int | None, token: str | None
    ) -> tuple[list[dict[str, Any]], str | None]: ...


@dataclass
class Cursor:
    """Where a reader is: the newest timestamp seen, and the events delivered near it."""

    since_ms: int | None = None
    newest_ms: int = 0
    seen: dict[str, int] = field(default_factory=dict)  # eventId -> timestamp

    @property
    def start_ms(self) -> int | None:
        if not self.seen:
            return self.since_ms
        start = self.newest_ms - LOOKBACK_MS
        return max(start, self.since_ms) if self.since_ms is not None else start

    def take(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The events not delivered before, remembered; old entries forgotten."""
        fresh = []
        for event in events:
            if event["eventId"] in self.seen:
                continue
            if self.since_ms is not None and event["timestamp"] < self.since_ms:
                continue
            fresh.append(event)
        self._remember(fresh)
        return fresh

    def absorb(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Events another reader took (a follower catching up, over these streams or others),
        remembered as delivered; returns those this cursor had not delivered and would still
        read (its window), for the followers it already serves. Older ones it has either
        delivered and forgotten, or would never read (more than LOOKBACK_MS late)."""
        start = self.start_ms
        new = [
            e
            for e in events
            if e["eventId"] not in self.seen and (start is None or e["timestamp"] >= start)
        ]
        self._remember(events)
        return new

    def _remember(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            self.seen[event["eventId"]] = event["timestamp"]
            self.newest_ms = max(self.newest_ms, event["timestamp"])
        if len(self.seen) > 10_000:
            horizon = self.newest_ms - 2 * LOOKBACK_MS
            self.seen = {k: t for k, t in self.seen.items() if t >= horizon}


def read_once(page: Page, streams: list[str], cursor: Cursor, call: Call) -> list[dict[str, Any]]:
    """Every new event of ``streams``, all pages, in timestamp order (stable per stream)."""
    fresh: list[dict[str, Any]] = []
    for first in range(0, len(streams), MAX_STREAMS):
        chunk = streams[first : first + MAX_STREAMS]
        start, token = cursor.start_ms, None
        while True:
            events, next_token = call(functools.partial(page, chunk, start, token))
            fresh += cursor.take(events)
            if not next_token or next_token == token:
                break
            token = next_token
    return sorted(fresh, key=lambda e: e["timestamp"])


@dataclass(eq=False)
class Follower:
    """One follower's place in a tail: the nodes it wants and the events read for it."""

    nodes: Nodes
    queue: list[Event] = field(default_factory=list)
    error: BaseException | None = None


class Tail:
    """One job's logs read for every follower of it in a process.

    There is no thread of its own: whichever follower needs events while nobody is reading
    makes the next poll, and every follower gets its share of what it read. A follower that
    joins is caught up in the next poll (one read of its nodes from ``since_ms``); the events
    that read finds and the tail had not delivered go to the others too. ``keep_following``
    False: one poll for the followers there, then the tail is done (a one-off read).
    """

    def __init__(
        self,
        source: Source,
        *,
        label: str,
        since_ms: int | None,
        keep_following: bool,
        call: Call,
        quiet: Quiet | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.source, self.label, self.call = source, label, call
        self.since_ms, self.keep_following = since_ms, keep_following
        self.quiet = quiet or Quiet()
        self.clock, self.sleep = clock, sleep
        self._cond = threading.Condition()
        self._following: list[Follower] = []  # caught up: served by the tail's polls
        self._joining: list[Follower] = []  # waiting for their catch-up read
        self._reading = False
        self._done = False
        self._error: BaseException | None = None
        # State of the polls, touched only by the follower making one (``_reading``):
        self._cursor = Cursor(since_ms)
        self._covered: Nodes = frozenset()  # nodes the polls read (the followers' union)
        self._facts: JobFacts | None = None
        self._streams: dict[str, int] = {}
        self._described: Nodes = frozenset()
        self._refreshed_at = 0.0
        self._rounds = 0  # polls since the last refresh
        self._pause = self.quiet.base
        self._next_poll = 0.0
        self._quiet_polls = 0  # polls in a row without lines
        self._had_lines = False
        self._drained = 0

    # --- followers (any thread) ------------------------------------------------------------

    def join(self, nodes: Nodes) -> Follower | None:
        """A new follower, caught up at the next poll; None once the tail is done."""
        with self._cond:
            if self._done:
                return None
            follower = Follower(nodes)
            self._joining.append(follower)
            self._cond.notify_all()
            return follower

    def leave(self, follower: Follower) -> None:
        with self._cond:
            for group in (self._following, self._joining):
                if follower in group:
                    group.remove(follower)

    @property
    def idle(self) -> bool:
        """Done, or nobody follows it any more."""
        with self._cond:
            return self._done or not (self._following or self._joining)

    def serve(self, follower: Follower) -> Iterator[Event]:
        """``(node, event)`` for one follower, until the tail is done."""
        while True:
            batch = self._next_batch(follower)
            if batch is None:
                return
            yield from batch

    def _next_batch(self, follower: Follower) -> list[Event] | None:
        while True:
            with self._cond:
                while True:
                    if follower.error is not None:
                        raise follower.error
                    if follower.queue:
                        batch, follower.queue = follower.queue, []
                        return batch
                    if self._error is not None:
                        raise self._error
                    if self._done:
                        return None
                    if not self._reading:
                        self._reading = True
                        break
                    self._cond.wait()
            try:
                self._poll()
            except BaseException as exc:
                # Every follower hears of it: nobody is left waiting, nobody misses lines.
                with self._cond:
                    self._error, self._done = exc, True
                raise
            finally:
                with self._cond:
                    self._reading = False
                    self._cond.notify_all()

    # --- a poll (one follower at a time) ---------------------------------------------------

    def _poll(self) -> None:
        """Pause (quiet job), refresh when due, read the covered nodes, catch up the joiners,
        hand the events out."""
        with self._cond:
            waiting = bool(self._joining)
        if self.keep_following and not waiting:
            delay = self._next_poll - self.clock()
            if delay > 0:
                self.sleep(delay)  # a follower joining now waits at most this pause
        with self._cond:
            joiners = list(self._joining)
        changed = self._refresh(union(self._covered, *(j.nodes for j in joiners)))
        with self._cond:  # and those that joined while the state was read (torchx's threads)
            joiners = list(self._joining)
        self._describe_missing(union(self._covered, *(j.nodes for j in joiners)))
        joiners = self._admit(joiners)
        main: list[dict[str, Any]] = []
        if streams := self._streams_of(self._covered):
            main = read_once(self.source.page, streams, self._cursor, self.call)
        caught: list[dict[str, Any]] = []
        new: list[dict[str, Any]] = []
        theirs = union(*(j.nodes for j in joiners)) if joiners else frozenset()
        if joiners and (streams := self._streams_of(theirs)):
            caught = read_once(self.source.page, streams, Cursor(self.since_ms), self.call)
            new = self._cursor.absorb(caught)
        self._rounds += 1
        lines = bool(main or new)
        self._quiet_polls = 0 if lines else self._quiet_polls + 1
        self._had_lines = self._had_lines or lines
        assert self._facts is not None
        ended = self._facts.ended
        self._pause = next_pause(self.quiet, self._pause, lines or changed or ended)
        self._next_poll = self.clock() + self._pause
        if ended:
            self._drained = 0 if (main or new or caught) else self._drained + 1
        everyone = sorted(main + new, key=lambda e: e["timestamp"])
        with self._cond:
            for follower in self._following:
                follower.queue += self._share(everyone, follower.nodes)
            for follower in joiners:
                follower.queue += self._share(caught, follower.nodes)
                if follower in self._joining:  # not left meanwhile
                    self._joining.remove(follower)
                    self._following.append(follower)
            self._covered = union(self._covered, theirs)
            if not self._joining and (
                not self.keep_following or (ended and self._drained >= DRAIN_POLLS)
            ):
                self._done = True

    def _refresh(self, wanted: Nodes) -> bool:
        """The job's state and streams read again when due; whether the state changed or
        streams appeared."""
        now = self.clock()
        due = refresh_due(
            first=self._facts is None,
            following=self.keep_following,
            ended=self._facts is not None and self._facts.ended,
            known=bool(self._streams_of(self._covered)),
            rounds=self._rounds,
            age=now - self._refreshed_at,
            went_quiet=self._had_lines and self._quiet_polls == 1,
        )
        if due:
            before, known = self._facts, set(self._streams)
            self._facts = self.source.state(self.call)
            found = self.source.streams(wanted, self.call)
            self._streams, self._described = dict(found.by_name), found.described
            self._refreshed_at, self._rounds = now, 0
            appeared = bool(set(found.by_name) - known)
            return before is None or before.state != self._facts.state or appeared
        return False

    def _describe_missing(self, wanted: Nodes) -> None:
        """The records of wanted nodes not described yet (only jobs of over 100 nodes: a
        smaller one is described whole)."""
        if (more := missing(wanted, self._described)) != frozenset():
            found = self.source.streams(more, self.call)
            self._streams.update(found.by_name)
            self._described = union(self._described, found.described)

    def _admit(self, joiners: list[Follower]) -> list[Follower]:
        """The joiners whose nodes the job has; the others leave with a UsageError."""
        assert self._facts is not None
        count, admitted = self._facts.nodes, []
        for follower in joiners:
            bad = sorted(n for n in follower.nodes or () if not 0 <= n < count)
            if not bad:
                admitted.append(follower)
                continue
            with self._cond:
                follower.error = UsageError(
                    f"--node {bad[0]}: job {self.label} has nodes 0-{count - 1}"
                )
                if follower in self._joining:
                    self._joining.remove(follower)
        return admitted

    def _streams_of(self, nodes: Nodes) -> list[str]:
        return sorted(s for s, n in self._streams.items() if wants(nodes, n))

    def _share(self, events: list[dict[str, Any]], nodes: Nodes) -> list[Event]:
        return [
            (self._streams[e["logStreamName"]], e)
            for e in events
            if wants(nodes, self._streams[e["logStreamName"]])
        ]


class Subscription:
    """A follower's handle: iterate for ``(node, event)``; ``close()`` (or the end of a
    ``with`` block) leaves the tail."""

    def __init__(self, hub: Hub, key: Hashable, tail: Tail, follower: Follower) -> None:
        self._hub, self._key, self.tail, self._follower = hub, key, tail, follower

    def __iter__(self) -> Iterator[Event]:
        return self.tail.serve(self._follower)

    def close(self) -> None:
        self.tail.leave(self._follower)
        self._hub._forget(self._key, self.tail)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class Hub:
    """The tails a process reads, one per job (and attempt, start, and kind of read), and the
    one limiter every call of every tail goes through."""

    def __init__(
        self,
        limiter: pacing.Limiter | None = None,
        *,
        quiet: Quiet | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.limiter = limiter or pacing.Limiter(clock=clock, sleep=sleep)
        self.quiet = quiet or Quiet(base=self.limiter.policy.interval)
        self.clock, self.sleep = clock, sleep
        self._tails: dict[Hashable, Tail] = {}
        self._lock = threading.Lock()

    def join(
        self,
        key: Hashable,
        nodes: Nodes,
        *,
        source: Source,
        label: str,
        since_ms: int | None,
        keep_following: bool,
    ) -> Subscription:
        """Follow ``nodes`` of the job ``key`` names: the job's tail if one is being read
        (``source`` unused), else a new one reading ``source``."""
        full = (key, since_ms, keep_following)
        with self._lock:
            tail = self._tails.get(full)
            follower = tail.join(nodes) if tail is not None else None
            if tail is None or follower is None:
                call: Call = self.limiter.call
                if not keep_following:
                    # A one-off read: a quick burst, and a bounded wait when throttled.
                    policy = self.limiter.policy
                    call = functools.partial(
                        self.limiter.call, burst=True, attempts=policy.attempts
                    )
                tail = Tail(
                    source,
                    label=label,
                    since_ms=since_ms,
                    keep_following=keep_following,
                    call=call,
                    quiet=self.quiet,
                    clock=self.clock,
                    sleep=self.sleep,
                )
                self._tails[full] = tail
                follower = tail.join(nodes)
                assert follower is not None
        return Subscription(self, full, tail, follower)

    def _forget(self, key: Hashable, tail: Tail) -> None:
        with self._lock:
            if self._tails.get(key) is tail and tail.idle:
                del self._tails[key]

    @property
    def tails(self) -> int:
        """How many tails are open (each stream is read by one, whoever follows it)."""
        with self._lock:
            return len(self._tails)


PROCESS = Hub()  # every follower in this process, unless given another hub
