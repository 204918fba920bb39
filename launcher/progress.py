"""Progress as events: the library reports, the caller decides what to show.

Nothing in the library prints. A ``ProgressFn`` receives an ``Event`` for each step done
(``kind="message"``: "registered job definition ...") and for transfers under way
(``kind="transfer"``, throttled, then ``"done"``) and for a job that waits
(``kind="waiting"``, then ``"waited"``). The CLI draws them on a terminal
(``launcher.cli.console``); a notebook or pipeline passes its own function, or none.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass


def size_text(n: int) -> str:
    """Bytes as messages say them: GB from 0.1 GB up, else MB."""
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


class EventKind(str, enum.Enum):
    MESSAGE = "message"  # a step done: one line
    TRANSFER = "transfer"  # bytes of a transfer under way (throttled)
    DONE = "done"  # the transfer's end
    WAITING = "waiting"  # why a job waits (``launcher.job.waiting``): one line, redrawn
    WAITED = "waited"  # the job no longer waits: the line is finished


@dataclass(frozen=True)
class Event:
    text: str  # one human-readable line
    kind: EventKind = EventKind.MESSAGE
    label: str = ""
    done: int = 0  # bytes so far (transfers)
    total: int | None = None
    elapsed: float = 0.0  # seconds since the transfer began


ProgressFn = Callable[[Event], None]


def ignore(_: Event) -> None:
    pass


def say(progress: ProgressFn | None) -> Callable[[str], None]:
    """A one-argument function that reports a message (for code that only says things)."""
    emit = progress or ignore
    return lambda text: emit(Event(text))


class Transfer:
    """Counts the bytes of one transfer and reports them at most ten times a second."""

    def __init__(self, label: str, progress: ProgressFn | None, total: int | None = None) -> None:
        self.label, self.total, self.done = label, total, 0
        self.emit = progress or ignore
        self._last = 0.0
        self._began = time.monotonic()

    def _event(self, kind: EventKind) -> Event:
        text = f"{self.label}: {size_text(self.done)}" + (
            f" / {size_text(self.total)}" if self.total else ""
        )
        elapsed = time.monotonic() - self._began
        return Event(text, kind, self.label, self.done, self.total, elapsed)

    def update(self, n: int) -> None:
        self.reach(self.done + n)

    def reach(self, done: int) -> None:
        """``done`` bytes so far (a count kept elsewhere), within the total when one is known."""
        self.done = min(done, self.total) if self.total else done
        now = time.monotonic()
        if now - self._last > 0.1:
            self._last = now
            self.emit(self._event(EventKind.TRANSFER))

    def message(self, text: str) -> None:
        self.emit(Event(text))

    def close(self) -> None:
        self.emit(self._event(EventKind.DONE))
