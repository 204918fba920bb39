"""Following many streams with FilterLogEvents: nothing lost or repeated, one call a second."""

from __future__ import annotations

from launcher import follow


class FakeLogs:
    """CloudWatch Logs' FilterLogEvents semantics over an in-memory group: events come back
    by timestamp from the given streams, ``page_size`` at a time with a nextToken."""

    def __init__(self, page_size: int = 3) -> None:
        self.events: list[dict] = []
        self.page_size = page_size
        self.calls = 0

    def put(self, stream: str, timestamp: int, message: str) -> None:
        self.events.append(
            {
                "logStreamName": stream,
                "timestamp": timestamp,
                "message": message,
                "eventId": f"{len(self.events):06d}",
            }
        )

    def page(self, streams, start_ms, token):
        self.calls += 1
        matching = sorted(
            (
                e
                for e in self.events
                if e["logStreamName"] in streams and e["timestamp"] >= (start_ms or 0)
            ),
            key=lambda e: e["timestamp"],
        )
        first = int(token or 0)
        chunk = matching[first : first + self.page_size]
        more = first + self.page_size < len(matching)
        return chunk, str(first + self.page_size) if more else None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_pages_shared_timestamps_and_late_events_are_each_delivered_once():
    logs, clock = FakeLogs(page_size=2), Clock()
    limit = follow.RateLimit(1.0, clock, clock.sleep)
    for i in range(5):
        logs.put("a", 1000, f"a{i}")  # five events with one timestamp, over three pages
    state = {"ended": False, "round": 0}

    def refresh():
        with limit:
            state["round"] += 1
        if state["round"] == 2:
            logs.put("b", 900, "b-late")  # ingested late, older than what was read
            logs.put("a", 2000, "a-next")
            state["ended"] = True
        return state["ended"], {"a": 0, "b": 1}

    got = [
        (n, e["message"])
        for n, e in follow.follow(
            logs.page,
            refresh,
            since_ms=None,
            keep_following=True,
            limit=limit,
            refresh_every=1,
        )
    ]
    assert got == [(0, f"a{i}") for i in range(5)] + [(1, "b-late"), (0, "a-next")]
    assert len(got) == len(set(got))


def test_one_call_a_second_whatever_the_node_count():
    logs, clock = FakeLogs(page_size=10_000), Clock()
    limit = follow.RateLimit(1.0, clock, clock.sleep)
    streams = {f"node-{n}": n for n in range(64)}
    for n in range(64):
        for i in range(100):
            logs.put(f"node-{n}", 1000 + i, f"{n}:{i}")
    rounds = {"n": 0}

    def refresh():  # the job, then its nodes: two calls
        for _ in range(2):
            with limit:
                pass
        rounds["n"] += 1
        return rounds["n"] > 3, streams

    got = list(follow.follow(logs.page, refresh, since_ms=None, keep_following=True, limit=limit))
    assert len(got) == 6400
    for n in range(64):
        mine = [e["message"] for node, e in got if node == n]
        assert mine == [f"{n}:{i}" for i in range(100)]  # in order per node
    assert limit.calls <= clock.now + 1  # one a second, the first one free


def test_more_than_100_streams_take_one_call_per_100():
    logs, clock = FakeLogs(page_size=10_000), Clock()
    limit = follow.RateLimit(0.0, clock, clock.sleep)
    streams = [f"s{n}" for n in range(250)]
    follow.read_once(logs.page, streams, follow.Cursor(), limit)
    assert logs.calls == 3


def test_since_drops_older_events():
    logs, clock = FakeLogs(), Clock()
    logs.put("a", 10, "old")
    logs.put("a", 5000, "new")
    limit = follow.RateLimit(0.0, clock, clock.sleep)
    got = list(
        follow.follow(
            logs.page, lambda: (True, {"a": 0}), since_ms=4000, keep_following=False, limit=limit
        )
    )
    assert [e["message"] for _, e in got] == ["new"]


def test_requests_leave_at_least_a_second_apart_however_slow_a_call_is_to_send():
    clock = Clock()
    limit = follow.RateLimit(1.0, clock, clock.sleep)
    sent = []
    for delay in (0.3, 0.0, 0.05, 0.0):  # a first call that creates its client first
        with limit:
            clock.sleep(delay)
            sent.append(clock.now)
    assert min(b - a for a, b in zip(sent, sent[1:], strict=False)) >= 1.0
