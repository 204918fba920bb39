"""Reading a multi-node job's CloudWatch logs: every node's streams in one call, within quota.

CloudWatch Logs quotas are per account and region and shared by everyone in it (GetLogEvents:
25 requests a second by default). Polling each node's stream would cost one call per node per
poll; ``FilterLogEvents`` reads up to 100 streams in one call (CloudWatch Logs API reference,
FilterLogEvents: logStreamNames), so a follower here makes at most one call a second,
whatever the node count: a 64-node job costs what a 1-node job costs.

Each poll asks again from a little before the newest event seen (late ingestion: awslogs
batches, and events can be ingested after later ones from other streams) and drops the events
it has already delivered by their ``eventId``, so nothing is lost or repeated across polls,
pages or events that share a timestamp. Each stream's events come in timestamp order.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

MAX_STREAMS = 100  # FilterLogEvents: at most 100 logStreamNames per call
LOOKBACK_MS = 30_000  # re-read this much before the newest event, for late ingestion
DRAIN_POLLS = 3  # empty polls after the job ends before the follower stops
INTERVAL = 1.0  # seconds from the end of one of a follower's calls to the start of the next


class RateLimit:
    """At most one call per ``interval`` seconds, for everything the follower calls.

    Used as ``with limit: call()``: the next call may start ``interval`` after this one has
    returned, so two requests never leave less than ``interval`` apart, however long the
    first took to be sent (a client's first call spends a while creating it).
    """

    def __init__(
        self,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.interval, self.clock, self.sleep = interval, clock, sleep
        self._next = 0.0
        self.calls = 0

    def __enter__(self) -> RateLimit:
        now = self.clock()
        if now < self._next:
            self.sleep(self._next - now)
        self.calls += 1
        return self

    def __exit__(self, *_: object) -> None:
        self._next = self.clock() + self.interval


@dataclass
class Cursor:
    """Where the reader is: the newest timestamp seen, and the events delivered near it."""

    since_ms: int | None = None
    newest_ms: int = 0
    seen: dict[str, int] = field(default_factory=dict)  # eventId -> timestamp

    @property
    def start_ms(self) -> int | None:
        if not self.seen:
            return self.since_ms
        start = self.newest_ms - LOOKBACK_MS
        return max(start, self.since_ms) if self.since_ms is not None else start

    def take(self, events: list[dict]) -> list[dict]:
        """The events not delivered before, remembered; old entries forgotten."""
        fresh = []
        for event in events:
            if event["eventId"] in self.seen:
                continue
            if self.since_ms is not None and event["timestamp"] < self.since_ms:
                continue
            self.seen[event["eventId"]] = event["timestamp"]
            self.newest_ms = max(self.newest_ms, event["timestamp"])
            fresh.append(event)
        horizon = self.newest_ms - 2 * LOOKBACK_MS
        if len(self.seen) > 10_000:
            self.seen = {k: t for k, t in self.seen.items() if t >= horizon}
        return fresh


Page = Callable[[list[str], int | None, str | None], tuple[list[dict], str | None]]


def read_once(page: Page, streams: list[str], cursor: Cursor, limit: RateLimit) -> list[dict]:
    """Every new event of ``streams``, all pages, in timestamp order (stable per stream)."""
    fresh: list[dict] = []
    for first in range(0, len(streams), MAX_STREAMS):
        chunk = streams[first : first + MAX_STREAMS]
        start, token = cursor.start_ms, None
        while True:
            with limit:
                events, next_token = page(chunk, start, token)
            fresh += cursor.take(events)
            if not next_token or next_token == token:
                break
            token = next_token
    return sorted(fresh, key=lambda e: e["timestamp"])


def follow(
    page: Page,
    refresh: Callable[[], tuple[bool, dict[str, int]]],
    *,
    since_ms: int | None,
    keep_following: bool,
    limit: RateLimit,
    refresh_every: int = 10,
) -> Iterator[tuple[int, dict]]:
    """Yield ``(node, event)``; with ``keep_following``, until the job ends and its last lines
    are read (``DRAIN_POLLS`` empty polls after the end, for the last awslogs batches).

    ``refresh()`` returns whether the job has ended and which stream belongs to which node
    (streams appear as nodes start); it paces each of its calls with the same ``limit`` as
    the pages of events.
    """
    cursor = Cursor(since_ms=since_ms)
    ended, known = refresh()
    drained, rounds = 0, 0
    while True:
        events = read_once(page, sorted(known), cursor, limit) if known else []
        for event in events:
            yield known[event["logStreamName"]], event
        if not keep_following:
            return
        if ended:
            drained = 0 if events else drained + 1
            if drained >= DRAIN_POLLS:
                return
        rounds += 1
        if not ended and (rounds % refresh_every == 0 or not known):
            ended, known = refresh()
