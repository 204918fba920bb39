"""Threads that sleep in virtual time, one running at a time: a deterministic simulation.

Each ``sleep`` hands over to the thread due next (ties in the order they fell asleep) and
moves the clock to its wake-up, so code that paces itself with an injected ``clock`` and
``sleep`` (``launcher.aws.pacing.Limiter``) runs unchanged, many instances side by side, minutes
of their time in a fraction of a second, the same way every run.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable


class VirtualTime:
    def __init__(self) -> None:
        self.now = 0.0
        self._cond = threading.Condition()
        self._due: list[tuple[float, int]] = []  # (wake-up, ticket), a heap
        self._tickets = 0
        self._running: int | None = None  # the ticket of the thread that may run
        self._errors: list[BaseException] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self._cond:
            ticket = self._enqueue(self.now + max(0.0, seconds))
            self._hand_over()
            while self._running != ticket:
                self._cond.wait()

    def run(self, bodies: list[Callable[[], None]]) -> None:
        """Run each body in a thread of its own, from time 0, until all have returned."""
        threads = []
        with self._cond:
            for body in bodies:
                ticket = self._enqueue(self.now)
                threads.append(threading.Thread(target=self._body, args=(body, ticket)))
        for thread in threads:
            thread.start()
        with self._cond:
            self._hand_over()
        for thread in threads:
            thread.join()
        if self._errors:
            raise self._errors[0]

    def _body(self, body: Callable[[], None], ticket: int) -> None:
        with self._cond:
            while self._running != ticket:
                self._cond.wait()
        try:
            body()
        except BaseException as exc:  # reported by run()
            self._errors.append(exc)
        finally:
            with self._cond:
                self._hand_over()

    def _enqueue(self, when: float) -> int:
        self._tickets += 1
        heapq.heappush(self._due, (when, self._tickets))
        return self._tickets

    def _hand_over(self) -> None:
        """Wake the thread due next (the lock held by the one that stops running)."""
        if self._due:
            when, self._running = heapq.heappop(self._due)
            self.now = max(self.now, when)
        else:
            self._running = None
        self._cond.notify_all()
