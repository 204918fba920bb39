"""Progress as events: the library reports, the caller decides what to show.

Nothing in the library prints. A ``ProgressFn`` receives an ``Event`` for each step done
(``kind="message"``: "registered job definition ...") and for transfers under way
(``kind="transfer"``, throttled, then ``"done"``). The CLI draws them on a terminal
(``launcher.console``); a notebook or pipeline passes its own function, or none.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    text: str  # one human-readable line
    kind: str = "message"  # message | transfer | done
    label: str = ""
    done: int = 0  # bytes so far (transfers)
    total: int | None = None


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

    def _event(self, kind: str) -> Event:
        mib = self.done / 2**20
        text = f"{self.label}: {mib:.1f} MiB" + (
            f" / {self.total / 2**20:.1f} MiB" if self.total else ""
        )
        return Event(text, kind, self.label, self.done, self.total)

    def update(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self._last > 0.1:
            self._last = now
            self.emit(self._event("transfer"))

    def message(self, text: str) -> None:
        self.emit(Event(text))

    def close(self) -> None:
        self.emit(self._event("done"))
