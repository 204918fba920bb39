"""Following many streams with FilterLogEvents: nothing lost or repeated, one call a second for
the whole process however many follow, slower while a job is quiet or AWS throttles.

Time is a fake clock everywhere (``sleep`` advances it at once), so nothing here waits.
"""

from __future__ import annotations

import http.server
import itertools
import json
import threading
import time

import pytest

from launcher.aws import follow, pacing
from launcher.errors import RemoteError, Throttled, UsageError


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
    """Virtual time; ``sleep`` returns at once, the clock moved on. Safe across threads (the
    latest wake-up wins)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.lock = threading.Lock()
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        with self.lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.sleeps.append(seconds)
            self.now += max(0.0, seconds)

    def advance(self, seconds: float) -> None:
        self.sleep(seconds)


class FakeJob:
    """A job as ``launcher.aws.follow`` sees it (a ``Source``): its state, one stream per node
    (``node-N``), and FakeLogs' pages. ``on_page(n)`` runs before the n-th page (from 1), to
    write lines or change the job while it is followed."""

    def __init__(self, logs: FakeLogs, nodes: int, status: str = "RUNNING", on_page=None):
        self.logs, self.nodes, self.status = logs, nodes, status
        self.started = nodes  # nodes whose streams exist
        self.on_page = on_page or (lambda n: None)
        self.describes = 0

    def state(self, call):
        def describe():
            self.describes += 1
            ended = self.status in ("SUCCEEDED", "FAILED")
            return follow.JobFacts(self.status, ended, self.nodes)

        return call(describe)

    def streams(self, nodes, call):
        def describe():
            self.describes += 1
            return follow.Streams({f"node-{n}": n for n in range(self.started)}, None)

        return call(describe)

    def page(self, streams, start_ms, token):
        self.on_page(self.logs.calls + 1)
        return self.logs.page(streams, start_ms, token)


def hub_for(clock: Clock, **policy) -> follow.Hub:
    limiter = pacing.Limiter(pacing.Policy(**policy), clock=clock, sleep=clock.sleep)
    return follow.Hub(limiter, clock=clock, sleep=clock.sleep)


def lines(subscription) -> list[tuple[int, str]]:
    return [(n, e["message"]) for n, e in subscription]


def complete(got, nodes, per_node) -> bool:
    return all(
        [m for n, m in got if n == node] == [f"{node}:{i}" for i in range(per_node)]
        for node in nodes
    )


# --- reading: pages, shared timestamps, late events, since ----------------------------------


def test_pages_shared_timestamps_and_late_events_are_each_delivered_once():
    logs, clock = FakeLogs(page_size=2), Clock()
    for i in range(5):
        logs.put("node-0", 1000, f"a{i}")  # five events with one timestamp, over three pages

    def on_page(n):
        if n == 4:  # the second poll
            logs.put("node-1", 900, "b-late")  # ingested late, older than what was read
            logs.put("node-0", 2000, "a-next")
            job.status = "SUCCEEDED"

    job = FakeJob(logs, 2, on_page=on_page)
    hub = hub_for(clock)
    got = lines(hub.join("j", None, source=job, label="j", since_ms=None, keep_following=True))
    assert got == [(0, f"a{i}") for i in range(5)] + [(1, "b-late"), (0, "a-next")]


def test_one_call_a_second_whatever_the_node_count():
    logs, clock = FakeLogs(page_size=10_000), Clock()
    for n in range(64):
        for i in range(100):
            logs.put(f"node-{n}", 1000 + i, f"{n}:{i}")
    job = FakeJob(logs, 64, status="SUCCEEDED")
    hub = hub_for(clock)
    got = lines(hub.join("j", None, source=job, label="j", since_ms=None, keep_following=True))
    assert len(got) == 6400 and complete(got, range(64), 100)  # in order per node
    assert logs.calls == 1 + follow.DRAIN_POLLS  # one call per poll for all 64 streams
    assert hub.limiter.calls <= clock.now + 1  # one a second, the first one free


def test_more_than_100_streams_take_one_call_per_100():
    logs = FakeLogs(page_size=10_000)
    streams = [f"s{n}" for n in range(250)]
    follow.read_once(logs.page, streams, follow.Cursor(), lambda fn: fn())
    assert logs.calls == 3


def test_since_drops_older_events():
    logs, clock = FakeLogs(), Clock()
    logs.put("node-0", 10, "old")
    logs.put("node-0", 5000, "new")
    job = FakeJob(logs, 1, status="SUCCEEDED")
    hub = hub_for(clock)
    got = lines(hub.join("j", None, source=job, label="j", since_ms=4000, keep_following=False))
    assert got == [(0, "new")]


def test_a_one_off_read_of_a_finished_job_is_three_calls_at_once():
    """The job, its nodes' records, one page: no waiting (the burst allowance)."""
    logs, clock = FakeLogs(page_size=100), Clock()
    for n in range(2):
        for i in range(50):
            logs.put(f"node-{n}", 1000 + i, f"{n}:{i}")
    job = FakeJob(logs, 2, status="SUCCEEDED")
    hub = hub_for(clock)
    got = lines(hub.join("j", None, source=job, label="j", since_ms=None, keep_following=False))
    assert complete(got, range(2), 50)
    assert (job.describes, logs.calls) == (2, 1)
    assert clock.now == 0.0  # nothing waited


def test_a_node_the_job_does_not_have_is_refused_for_that_follower_only():
    logs, clock = FakeLogs(), Clock()
    logs.put("node-1", 1000, "1:0")
    job = FakeJob(logs, 2, status="SUCCEEDED")
    hub = hub_for(clock)
    bad = hub.join(
        "j", frozenset({5}), source=job, label="job-1", since_ms=None, keep_following=True
    )
    good = hub.join(
        "j", frozenset({1}), source=job, label="job-1", since_ms=None, keep_following=True
    )
    with pytest.raises(UsageError, match=r"--node 5: job job-1 has nodes 0-1"):
        list(bad)
    assert lines(good) == [(1, "1:0")]


# --- the limiter: one process, one call per interval, first come first served ---------------


def test_requests_leave_at_least_a_second_apart_however_slow_a_call_is_to_send():
    clock = Clock()
    limiter = pacing.Limiter(clock=clock, sleep=clock.sleep)
    sent = []

    def send(delay):
        clock.advance(delay)  # a first call that creates its client first
        sent.append(clock.now)

    for delay in (0.3, 0.0, 0.05, 0.0):
        limiter.call(lambda delay=delay: send(delay))
    assert min(b - a for a, b in itertools.pairwise(sent)) >= 1.0


def test_threads_sharing_one_limiter_make_one_call_per_interval_together():
    clock = Clock()
    limiter = pacing.Limiter(clock=clock, sleep=clock.sleep)
    starts: list[float] = []

    def call():
        starts.append(clock())
        clock.advance(0.1)  # the call itself takes a while

    def follower():
        for _ in range(5):
            limiter.call(call)

    threads = [threading.Thread(target=follower) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(starts) == 40 == limiter.calls
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 1.0 + 0.1 - 1e-9
    assert max(sum(1 for s in starts if t <= s < t + 1.0) for t in starts) == 1


def test_a_caller_that_asks_while_another_calls_goes_next():
    """First come, first served: a follower paging through a busy job asks again after each
    page and queues behind one that was already waiting (a plain lock would let it cut in)."""
    clock = Clock()
    limiter = pacing.Limiter(clock=clock, sleep=clock.sleep)
    order: list[str] = []

    def busy_first_page():
        order.append("busy")
        while limiter.waiting < 1:  # the other follower has queued
            time.sleep(0.001)

    def busy():
        limiter.call(busy_first_page)
        for _ in range(3):
            limiter.call(lambda: order.append("busy"))

    first = threading.Thread(target=busy)
    first.start()
    while not order:
        time.sleep(0.001)
    second = threading.Thread(target=lambda: limiter.call(lambda: order.append("quiet")))
    second.start()
    first.join()
    second.join()
    assert order == ["busy", "quiet", "busy", "busy", "busy"]


def test_a_one_off_read_bursts_only_from_the_allowance_the_process_has_not_used():
    clock = Clock()
    limiter = pacing.Limiter(pacing.Policy(burst=4), clock=clock, sleep=clock.sleep)
    for _ in range(4):
        limiter.call(lambda: None, burst=True)
    assert clock.now == 0.0  # four at once
    limiter.call(lambda: None, burst=True)
    assert clock.now == 1.0  # the fifth waits its turn
    for _ in range(3):
        limiter.call(lambda: None)  # a follower's calls use up what refills meanwhile
    limiter.call(lambda: None, burst=True)
    assert clock.now == 5.0


# --- a quiet job: the pause grows, and comes back to 1 s --------------------------------------


def test_the_pause_doubles_while_the_job_is_quiet_and_resets_on_lines_and_on_its_end():
    logs, clock = FakeLogs(), Clock()
    pauses: list[float] = []
    logs.put("node-0", 1000, "0:0")

    def on_page(n):
        if n == 9:
            logs.put("node-0", 2000, "0:1")  # lines again after seven quiet polls
        if n == 12:
            job.status = "SUCCEEDED"

    def tail_sleep(seconds):
        pauses.append(seconds)
        clock.sleep(seconds)

    job = FakeJob(logs, 1, on_page=on_page)
    limiter = pacing.Limiter(clock=clock, sleep=clock.sleep)
    hub = follow.Hub(limiter, clock=clock, sleep=tail_sleep)
    got = lines(hub.join("j", None, source=job, label="j", since_ms=None, keep_following=True))
    assert got == [(0, "0:0"), (0, "0:1")]
    # 1 s after lines, doubling to the 10 s ceiling; 1 s again after the new line; the end,
    # seen at the next refresh (every 30 s while quiet), is drained at 1 s.
    assert pauses == [1, 2, 4, 8, 10, 10, 10, 10, 1, 2, 4, 8, 10, 10, 1, 1]
    # The job's state is read first, on the first quiet poll after lines (twice), and after
    # 30 s (twice): two calls each.
    assert job.describes == 2 * 5
    assert logs.calls == len(pauses) + 1


def test_a_quiet_job_costs_a_tenth_of_a_busy_one():
    logs, clock = FakeLogs(), Clock()
    logs.put("node-0", 1000, "0:0")

    def on_page(n):
        if clock() > 600:
            job.status = "SUCCEEDED"

    job = FakeJob(logs, 1, on_page=on_page)
    hub = hub_for(clock)
    assert lines(hub.join("j", None, source=job, label="j", since_ms=None, keep_following=True))
    quiet_calls = hub.limiter.calls
    # Ten minutes of silence: a poll every 10 s and the state every 30 s, against 600 calls
    # at one a second.
    assert quiet_calls <= 600 / 10 + 2 * 600 / 30 + 10


@pytest.mark.parametrize(
    ("last", "active", "expected"),
    [(1.0, False, 2.0), (8.0, False, 10.0), (10.0, False, 10.0), (10.0, True, 1.0)],
)
def test_next_pause(last, active, expected):
    assert follow.next_pause(follow.Quiet(), last, active) == expected


def test_refresh_is_due_first_while_unknown_periodically_and_when_lines_stop():
    due = dict(first=False, following=True, ended=False, known=True, rounds=1, age=1.0)
    assert follow.refresh_due(**{**due, "first": True}, went_quiet=False)
    assert not follow.refresh_due(**due, went_quiet=False)
    assert follow.refresh_due(**due, went_quiet=True)
    assert follow.refresh_due(**{**due, "known": False}, went_quiet=False)
    assert follow.refresh_due(**{**due, "rounds": follow.REFRESH_ROUNDS}, went_quiet=False)
    assert follow.refresh_due(**{**due, "age": follow.REFRESH_SECONDS}, went_quiet=False)
    assert not follow.refresh_due(**{**due, "ended": True, "known": False}, went_quiet=True)
    assert not follow.refresh_due(**{**due, "following": False}, went_quiet=True)


# --- throttling: back off with jitter, recover, lose nothing ----------------------------------


def test_throttled_calls_back_off_with_jitter_for_every_caller_then_recover():
    """The policy's arithmetic is tested in tests/aws/test_pacing.py; here, that the limiter
    applies it to the gaps between calls."""
    clock = Clock()
    draws = iter([0.5, 0.25, 0.75] + [0.5] * 100)
    policy = pacing.Policy(recovery=0.05)
    limiter = pacing.Limiter(policy, clock=clock, sleep=clock.sleep, draw=lambda: next(draws))
    answers = iter(["throttled"] * 3 + ["ok"] * 100)
    sent: list[float] = []

    def page():
        sent.append(clock())
        if next(answers) == "throttled":
            raise Throttled("AWS FilterLogEvents failed: ThrottlingException: Rate exceeded")
        return "page"

    assert limiter.call(page) == "page"  # tried until it succeeded
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    # The rate halves per throttle (1/2, 1/4, 1/8 calls a second), each gap 1/rate jittered
    # by +-50%: 2 * 1, 4 * 0.75, 8 * 1.25.
    assert gaps == [2.0, 3.0, 10.0]
    assert (limiter.throttles, limiter.rate) == (3, 0.125 + 0.05 / 0.125)
    while limiter.rate < policy.full:
        limiter.call(page)
    # Back to a call a second by steps, not at once: 0.525, 0.62, ... calls a second.
    gaps = [b - a for a, b in itertools.pairwise(sent)][3:]
    assert gaps[0] == pytest.approx(1 / 0.525) and len(gaps) > 5
    assert gaps == sorted(gaps, reverse=True) and gaps[-1] > 1.0
    limiter.call(page)
    assert sent[-1] - sent[-2] == 1.0  # full pace again, no jitter


def test_nothing_is_lost_or_repeated_across_throttling():
    logs, clock = FakeLogs(page_size=2), Clock()
    throttled = {4, 5, 6, 9}  # page calls answered with ThrottlingException
    calls = {"n": 0}

    def on_page(n):
        if n < 12:
            for node in range(3):
                logs.put(f"node-{node}", 1000 + 10 * n, f"{node}:{n - 1}")
        if n == 14:
            job.status = "SUCCEEDED"

    class Throttling(FakeJob):
        def page(self, streams, start_ms, token):
            calls["n"] += 1
            if calls["n"] in throttled:
                raise Throttled("AWS FilterLogEvents failed: ThrottlingException: Rate exceeded")
            return super().page(streams, start_ms, token)

    job = Throttling(logs, 3, on_page=on_page)
    hub = hub_for(clock)
    got = lines(hub.join("j", None, source=job, label="j", since_ms=None, keep_following=True))
    assert hub.limiter.throttles == len(throttled)
    assert len(got) == len(set(got)) == 3 * 11
    assert complete(got, range(3), 11)


# --- many followers in one process: one tail per job ------------------------------------------


def _follow_in_threads(subscriptions) -> list[list[tuple[int, str]]]:
    results: list[list] = [[] for _ in subscriptions]

    def run(i, sub):
        results[i] = lines(sub)

    threads = [threading.Thread(target=run, args=(i, s)) for i, s in enumerate(subscriptions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_a_follower_per_node_in_one_process_costs_what_one_follower_costs():
    """``torchx log`` of a 64-replica role: a thread per replica, each following its node."""

    def run(shared: bool) -> tuple[list, FakeLogs, Clock]:
        logs, clock = FakeLogs(page_size=10_000), Clock()

        def on_page(n):
            if n <= 3:  # the job writes a line per node on each of its first polls
                for node in range(64):
                    logs.put(f"node-{node}", 1000 * n, f"{node}:{n - 1}")
            if n == 4:
                job.status = "SUCCEEDED"

        job = FakeJob(logs, 64, on_page=on_page)
        one = hub_for(clock)
        subs = [
            (one if shared else hub_for(clock)).join(
                "j", frozenset({n}), source=job, label="j", since_ms=None, keep_following=True
            )
            for n in range(64)
        ]
        return _follow_in_threads(subs), logs, clock

    got, logs, _ = run(shared=True)
    for node, mine in enumerate(got):
        assert mine == [(node, f"{node}:{i}") for i in range(3)]  # complete, in order, once
    # Every poll reads all 64 streams at once: three with lines, a quiet one, after which the
    # state is read again and the end drained.
    assert logs.calls == 4 + follow.DRAIN_POLLS
    _, alone, _ = run(shared=False)
    assert alone.calls >= 64 * (1 + follow.DRAIN_POLLS)


def test_followers_of_one_job_in_threads_share_its_polls_and_one_call_a_second():
    logs, clock = FakeLogs(page_size=50), Clock()

    def on_page(n):
        if n <= 20:
            for node in range(8):
                for i in range(5):
                    logs.put(f"node-{node}", 100 * n + i, f"{node}:{5 * (n - 1) + i}")
        if n == 25:
            job.status = "SUCCEEDED"

    job = FakeJob(logs, 8, on_page=on_page)
    hub = hub_for(clock)
    subs = [
        hub.join("j", None, source=job, label="j", since_ms=None, keep_following=True)
        for _ in range(8)
    ]
    for got in _follow_in_threads(subs):
        assert len(got) == len(set(got)) == 8 * 100 and complete(got, range(8), 100)
    assert hub.limiter.calls <= clock.now + 1  # the eight together: one call a second
    assert hub.tails == 1


def test_a_follower_that_joins_late_is_caught_up_and_the_others_see_nothing_twice():
    logs, clock = FakeLogs(page_size=4), Clock()
    for i in range(3):
        for node in range(3):
            logs.put(f"node-{node}", 1000 + i, f"{node}:{i}")
    job = FakeJob(logs, 3)
    hub = hub_for(clock)
    first = iter(hub.join("j", None, source=job, label="j", since_ms=None, keep_following=True))
    got_first = [next(first) for _ in range(9)]  # everything so far
    # Between the first follower's last poll and the next: a line on node 2 that both want.
    logs.put("node-2", 1010, "2:3")
    late = iter(
        hub.join("j", frozenset({2}), source=job, label="j", since_ms=None, keep_following=True)
    )
    got_late = [next(late) for _ in range(4)]  # caught up: node 2 from its start
    logs.put("node-2", 1020, "2:4")
    logs.put("node-0", 1020, "0:3")
    job.status = "SUCCEEDED"
    got_first += list(first)
    got_late += list(late)
    simple = [[(n, e["message"]) for n, e in got] for got in (got_first, got_late)]
    assert [m for n, m in simple[0] if n == 2] == [f"2:{i}" for i in range(5)]
    assert [m for n, m in simple[0] if n == 0] == [f"0:{i}" for i in range(4)]
    assert [m for _, m in simple[1]] == [f"2:{i}" for i in range(5)]
    assert hub.tails == 1


def test_followers_that_join_while_the_job_is_described_share_the_first_read():
    """TorchX's replica threads start within a moment of each other: those that join while
    the first poll reads the job's state are caught up by the same read."""
    logs, clock = FakeLogs(page_size=100), Clock()
    for node in range(4):
        logs.put(f"node-{node}", 1000, f"{node}:0")
    hub = hub_for(clock)
    late = []

    class Joining(FakeJob):
        def state(self, call):
            if not late:  # the other replicas' threads arrive now
                late.extend(
                    hub.join(
                        "j",
                        frozenset({n}),
                        source=self,
                        label="j",
                        since_ms=None,
                        keep_following=False,
                    )
                    for n in (1, 2, 3)
                )
            return super().state(call)

    job = Joining(logs, 4, status="SUCCEEDED")
    first = hub.join(
        "j", frozenset({0}), source=job, label="j", since_ms=None, keep_following=False
    )
    assert lines(first) == [(0, "0:0")]
    assert logs.calls == 1  # one read for the four
    assert [lines(s) for s in late] == [[(n, f"{n}:0")] for n in (1, 2, 3)]
    assert logs.calls == 1


def test_absorbing_a_catch_up_read_returns_only_what_the_cursor_still_owes():
    cursor = follow.Cursor()
    events = [
        {"eventId": str(i), "timestamp": t, "logStreamName": "a"}
        for i, t in enumerate([100_000, 100_001])
    ]
    assert cursor.take(events) == events
    caught = events + [
        {"eventId": "old", "timestamp": 10_000, "logStreamName": "b"},  # before the window
        {"eventId": "new", "timestamp": 100_002, "logStreamName": "a"},
    ]
    assert [e["eventId"] for e in cursor.absorb(caught)] == ["new"]
    assert cursor.take(caught) == []  # all remembered as delivered


def test_different_jobs_share_the_limiter_and_each_is_read_completely():
    logs, clock = FakeLogs(page_size=3), Clock()
    jobs = []
    for j in range(3):
        for i in range(10):
            logs.put(f"node-{j}", 1000 + i, f"{j}:{i}")
        jobs.append(FakeJob(logs, j + 1, status="SUCCEEDED"))
    hub = hub_for(clock)
    subs = [
        hub.join(
            f"job-{j}", frozenset({j}), source=job, label="j", since_ms=None, keep_following=True
        )
        for j, job in enumerate(jobs)
    ]
    results = _follow_in_threads(subs)
    for j, got in enumerate(results):
        assert got == [(j, f"{j}:{i}") for i in range(10)]
    assert hub.limiter.calls <= clock.now + 1


# --- the AWS layer: CloudWatch Logs refusals reach the follower at once ------------------------


class _Refusing(http.server.BaseHTTPRequestHandler):
    answer: tuple[int, str] = (400, "ThrottlingException")
    requests = 0

    def do_POST(self):  # noqa: N802 - the http.server API
        type(self).requests += 1
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        status, code = self.answer
        body = json.dumps({"__type": code, "message": "Rate exceeded"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        pass


@pytest.fixture
def refusing(monkeypatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_port}")
    for key, value in (("AWS_ACCESS_KEY_ID", "x"), ("AWS_SECRET_ACCESS_KEY", "x")):
        monkeypatch.setenv(key, value)
    _Refusing.requests = 0
    yield _Refusing
    server.shutdown()


@pytest.mark.parametrize(
    "answer",
    [
        (400, "ThrottlingException"),
        (400, "RateExceeded"),
        (400, "RequestLimitExceeded"),
        (503, "ServiceUnavailableException"),
    ],
)
def test_a_throttled_filter_log_events_is_sent_once_and_raised_as_throttled(refusing, answer):
    from launcher.aws.client import Aws

    refusing.answer = answer
    with pytest.raises(Throttled, match=answer[1]) as raised:
        Aws(region="us-east-1").filter_log_events("group", ["stream"], None, None)
    assert refusing.requests == 1  # botocore did not retry: the follower's pacing does
    # The one line a one-off read ends with names the quota when it was the quota.
    assert ("5 calls a second for the whole account" in str(raised.value)) == (answer[0] == 400)


def test_other_refusals_are_plain_remote_errors(refusing):
    from launcher.aws.client import Aws

    refusing.answer = (400, "InvalidParameterException")
    with pytest.raises(RemoteError) as raised:
        Aws(region="us-east-1").filter_log_events("group", ["stream"], None, None)
    assert not isinstance(raised.value, Throttled)
