"""Progress on a terminal (stderr), silence otherwise."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, label: str, total: int | None = None, stream=None) -> None:
        self.label, self.total, self.done = label, total, 0
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self._last = 0.0

    def update(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and now - self._last > 0.1:
            self._last = now
            self._draw()

    def _draw(self, end: str = "") -> None:
        mib = self.done / 2**20
        if self.total:
            pct = 100 * self.done / self.total
            text = f"\r{self.label}: {mib:8.1f} / {self.total / 2**20:.1f} MiB ({pct:3.0f}%)"
        else:
            text = f"\r{self.label}: {mib:8.1f} MiB"
        self.stream.write(text + end)
        self.stream.flush()

    def line(self, text: str) -> None:
        if self.enabled:
            self.stream.write(f"\r{text}\n")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw("\n")
