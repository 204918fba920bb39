"""The CLI's side of progress: messages as lines on stderr, transfers drawn on a terminal."""

from __future__ import annotations

import sys
from typing import TextIO

from launcher.progress import Event, EventKind


class Console:
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self._drawing = False

    def __call__(self, event: Event) -> None:
        if event.kind is EventKind.MESSAGE:
            self._end_line()
            self.stream.write(event.text + "\n")
        elif self.tty:
            self.stream.write("\r" + event.text)
            self._drawing = event.kind is EventKind.TRANSFER
            if event.kind is EventKind.DONE:
                self.stream.write("\n")
        self.stream.flush()

    def _end_line(self) -> None:
        if self._drawing:
            self.stream.write("\n")
            self._drawing = False
