"""The process's budget of calls for reading logs: one limiter, shared by every follower in it.

CloudWatch Logs' read quotas belong to the account and region, are shared by everyone in it,
and cannot be raised: "FilterLogEvents | 5 transactions per second (TPS)/account/Region. This
quota can't be changed." (CloudWatch Logs quotas, docs.aws.amazon.com/AmazonCloudWatch/latest/
logs/cloudwatch_limits_cwl.html); "These API calls have a hard limit, and they don't qualify for
a limit increase." (AWS knowledge center, repost.aws/knowledge-center/cloudwatch-logs-throttling).

Every follower in a process (each ``log_iter`` of the Batch backend, each TorchX replica
thread, each job followed) makes its calls through one ``Limiter``:

- Calls start one at a time, at least ``Policy.interval`` apart (from the end of one to the
  start of the next), in the order they were asked for. A follower paging through a busy job
  asks again after each page and so queues behind every follower already waiting: with k
  followers waiting, each gets one call in k. First come, first served is the whole fairness
  rule; nobody is starved and nobody is favoured (a busy job's follower does not get more
  turns than a quiet one's, only more pages per turn it has asked for).
- A throttled answer (``Throttled``) slows every caller in the process, since the quota it hit
  is the account's, and the process slows as a TCP sender does (additive increase,
  multiplicative decrease; Chiu and Jain, 1989): each throttle multiplies its call rate by
  ``Policy.decrease`` (down to one call per ``Policy.ceiling``), and each success raises it
  by ``Policy.recovery`` calls a second for every second that call's spacing allowed, back
  to one per interval. Recovering by a step rather than by a factor is what lets processes
  on several machines, which do not know of each other, settle under the account's quota
  together: halving the spacing on each success (this module before) came back to full pace
  in a few calls and met the quota again, so ten followers kept a sixth of their calls
  throttled. Below full pace the spacing is jittered by ``Policy.jitter`` around its mean
  (AWS Architecture Blog, "Exponential Backoff And Jitter"), so that processes throttled at
  the same moment do not come back in step. The throttled call is tried again in its turn.
  A process nobody throttles keeps its pace: one call per interval, no jitter.
- A one-off read may start up to ``Policy.burst`` calls without waiting, from an allowance
  that refills at one call per interval and that every call draws on, so the process stays at
  one call a second on average; beyond the allowance a one-off read waits like a follower.

Processes do not coordinate (no lock file): see docs/logs.md, "Logs of many nodes, within
CloudWatch's quota".
"""

from __future__ import annotations

import enum
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from launcher.errors import Throttled

T = TypeVar("T")


@dataclass(frozen=True)
class Policy:
    interval: float = 1.0  # seconds from the end of one call to the start of the next, at least
    ceiling: float = 30.0  # the longest spacing repeated throttling backs off to
    decrease: float = 0.5  # a throttle multiplies the call rate by this
    recovery: float = 0.01  # calls/s the rate regains per second of calls at it (see above)
    jitter: float = 0.5  # below full pace, the spacing is its mean times 1 +- this
    burst: int = 4  # calls a one-off read may start at once: a 2-node job's logs take 3
    attempts: int = 5  # tries of one throttled call in a one-off read (a follower keeps trying)

    @property
    def full(self) -> float:
        """Calls a second at full pace, when nothing is throttled."""
        return 1.0 / self.interval

    @property
    def floor(self) -> float:
        """Calls a second after repeated throttling."""
        return 1.0 / self.ceiling


class Outcome(enum.Enum):
    OK = "ok"
    THROTTLED = "throttled"
    FAILED = "failed"  # any other error: no evidence either way about the quota


def next_rate(policy: Policy, rate: float, outcome: Outcome) -> float:
    """The call rate (calls a second) after a call at ``rate`` ended with ``outcome``: cut by
    the decrease factor when throttled, raised by ``recovery / rate`` when it succeeded (a
    call a spacing apart: ``recovery`` calls a second per second, as TCP's window grows by
    one segment a round trip), within [floor, full]."""
    if outcome is Outcome.THROTTLED:
        return max(policy.floor, rate * policy.decrease)
    if outcome is Outcome.OK:
        return min(policy.full, rate + policy.recovery / rate)
    return rate


def spacing(policy: Policy, rate: float, draw: float) -> float:
    """Seconds from the end of a call to the start of the next at ``rate``, with ``draw`` in
    [0, 1): the interval at full pace; below it 1/rate, jittered by +-``jitter`` of itself
    (its mean unchanged), never below the interval."""
    if rate >= policy.full:
        return policy.interval
    return max(policy.interval, (1.0 + policy.jitter * (2.0 * draw - 1.0)) / rate)


class Limiter:
    """At most one call per interval for a whole process, first come first served, slowed
    for everyone when AWS throttles. Thread-safe; ``clock``, ``sleep`` and ``draw`` (the jitter's
    random numbers) are injectable for tests."""

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.policy = policy or Policy()
        self.clock, self.sleep, self.draw = clock, sleep, draw
        self._cond = threading.Condition()
        self._queue: deque[object] = deque()  # callers waiting for their turn, in order
        self._busy = False  # a paced call is under way
        self._next = 0.0  # when the next paced call may start
        self._rate = self.policy.full
        self._allowance = float(self.policy.burst)
        self._refilled = clock()
        self.calls = 0  # calls started, retries included
        self.throttles = 0

    @property
    def rate(self) -> float:
        """Calls a second the process allows itself now (``Policy.full`` unless throttled)."""
        return self._rate

    @property
    def waiting(self) -> int:
        """Callers queued for their turn (not counting the call under way)."""
        with self._cond:
            return len(self._queue)

    def call(self, fn: Callable[[], T], *, burst: bool = False, attempts: int | None = None) -> T:
        """``fn()`` in its turn. When it raises ``Throttled`` every caller slows down and
        ``fn`` is tried again in a later turn, up to ``attempts`` tries in all (then the error
        is raised; None: until it succeeds). ``burst``: a one-off read's call, which may start
        at once while the burst allowance lasts."""
        tries = 0
        while True:
            tries += 1
            paced = self._acquire(burst)
            try:
                result = fn()
            except Throttled:
                self._release(paced, Outcome.THROTTLED)
                if attempts is not None and tries >= attempts:
                    raise
                continue
            except BaseException:
                self._release(paced, Outcome.FAILED)
                raise
            self._release(paced, Outcome.OK)
            return result

    def _draw_allowance(self) -> bool:
        """Take one call from the burst allowance (it refills at one per interval); none
        while throttling lasts."""
        now = self.clock()
        refill = (now - self._refilled) / self.policy.interval
        self._allowance = min(float(self.policy.burst), self._allowance + refill)
        self._refilled = now
        if self._rate < self.policy.full or self._allowance < 1.0:
            return False
        self._allowance -= 1.0
        return True

    def _acquire(self, burst: bool) -> bool:
        """Wait for this call's turn; False when it starts at once from the burst allowance."""
        with self._cond:
            if burst and self._draw_allowance():
                self.calls += 1
                return False
            me = object()
            self._queue.append(me)
            try:
                while self._busy or self._queue[0] is not me:
                    self._cond.wait()
            except BaseException:  # interrupted while queued: let the next caller through
                self._queue.remove(me)
                self._cond.notify_all()
                raise
            self._queue.popleft()
            self._busy = True
        try:
            # _next can move while this caller sleeps (a throttled burst call): look again.
            while (delay := self._next - self.clock()) > 0:
                self.sleep(delay)
        except BaseException:
            with self._cond:
                self._busy = False
                self._cond.notify_all()
            raise
        with self._cond:
            # Paced calls spend the allowance too, as they start: bursts come only from calls
            # the process has not made, and it stays at one call per interval on average.
            self._draw_allowance()
            self.calls += 1
        return True

    def _release(self, paced: bool, outcome: Outcome) -> None:
        with self._cond:
            self._rate = next_rate(self.policy, self._rate, outcome)
            if outcome is Outcome.THROTTLED:
                self.throttles += 1
                self._allowance = 0.0
            gap = spacing(self.policy, self._rate, self.draw())
            self._next = max(self._next, self.clock() + gap)
            if paced:
                self._busy = False
            self._cond.notify_all()
