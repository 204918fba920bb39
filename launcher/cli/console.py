"""The CLI's side of progress events (``launcher.progress``), drawn on stderr.

On a terminal a transfer is a bar with its size, rate and time left (``rich.progress``), and a
waiting job's line is redrawn in place. Piped (a CI log, ``2> file``), everything is plain
lines without carriage returns: a transfer's start and its end with size and rate; a waiting
line only when what it says changes. Messages are plain lines either way. rich is imported on
the first transfer drawn, not with this module (``launcher --help`` stays fast); it follows
``NO_COLOR``.
"""

from __future__ import annotations

import shutil
import sys
from typing import Any, TextIO

from launcher.progress import Event, EventKind, size_text


def rate_text(done: int, elapsed: float) -> str:
    """``1.2 MB/s``; bytes over a transfer too short to time are said as they are."""
    if elapsed <= 0:
        return "instant"
    return f"{size_text(int(done / elapsed))}/s"


def fit(text: str, width: int) -> str:
    """One terminal row: a line redrawn in place must not wrap (a carriage return goes back
    to the start of the last row only)."""
    return text if len(text) < width else text[: max(1, width - 2)] + "…"


class Console:
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self._bars: Any = None  # rich.progress.Progress while transfers are drawn
        self._tasks: dict[str, Any] = {}  # label -> the bar's task id
        self._started: set[str] = set()  # piped: transfers whose start line was printed
        self._waiting_drawn = False  # terminal: the waiting line is on the screen
        self._waiting_said: str | None = None  # piped: what the last waiting line said

    def __call__(self, event: Event) -> None:
        kind = event.kind
        if kind is EventKind.MESSAGE:
            self._message(event.text)
        elif kind in (EventKind.TRANSFER, EventKind.DONE):
            if self.tty:
                self._draw_transfer(event)
            else:
                self._log_transfer(event)
        elif kind is EventKind.WAITING:
            self._waiting(event)
        elif kind is EventKind.WAITED:
            self._waited()
        self.stream.flush()

    # --- messages -------------------------------------------------------------------------

    def _message(self, text: str) -> None:
        if self._bars is not None:
            self._bars.console.print(text, markup=False, highlight=False, soft_wrap=True)
            self._bars.refresh()
            return
        self._end_waiting_line()
        self.stream.write(text + "\n")

    # --- transfers --------------------------------------------------------------------------

    def _draw_transfer(self, event: Event) -> None:
        self._end_waiting_line()
        if self._bars is None:
            self._bars = _progress(self.stream)
            self._bars.start()
        task = self._tasks.get(event.label)
        if task is None:
            task = self._tasks[event.label] = self._bars.add_task(event.label, total=event.total)
        if event.kind is EventKind.DONE:
            # Its end is 100% whether or not its size was known at the start.
            self._bars.update(task, completed=event.done, total=event.total or event.done)
            del self._tasks[event.label]
        else:
            self._bars.update(task, completed=event.done, total=event.total)
        self._bars.refresh()
        if not self._tasks:
            self._bars.stop()
            self._bars = None

    def _log_transfer(self, event: Event) -> None:
        if event.kind is EventKind.TRANSFER:
            if event.label not in self._started:
                self._started.add(event.label)
                size = f" ({size_text(event.total)})" if event.total else ""
                self.stream.write(f"{event.label}: started{size}\n")
            return
        self._started.discard(event.label)
        self.stream.write(
            f"{event.label}: {size_text(event.done)} in {event.elapsed:.1f} s "
            f"({rate_text(event.done, event.elapsed)})\n"
        )

    # --- a waiting job ----------------------------------------------------------------------

    def _waiting(self, event: Event) -> None:
        if self.tty:
            width = shutil.get_terminal_size().columns
            self.stream.write("\r" + fit(event.text, width) + "\x1b[K")
            self._waiting_drawn = True
        elif event.label != self._waiting_said:
            self._waiting_said = event.label
            self.stream.write(event.text + "\n")

    def _waited(self) -> None:
        if self._waiting_drawn:
            self.stream.write("\r\x1b[K")  # gone: the job's lines take its place
            self._waiting_drawn = False
        self._waiting_said = None

    def _end_waiting_line(self) -> None:
        if self._waiting_drawn:
            self.stream.write("\n")
            self._waiting_drawn = False


def _progress(stream: TextIO) -> Any:
    """A rich progress display on ``stream``: label, bar, percentage, bytes, rate, time left.
    Refreshed by the events (no thread of its own), which ``Transfer`` sends ten a second."""
    from rich.console import Console as RichConsole
    from rich.progress import (
        BarColumn,
        Progress,
        ProgressColumn,
        Task,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    from rich.text import Text

    class Size(ProgressColumn):
        """``1.0 MB / 4.2 MB`` in the units messages use; the bytes so far alone while the
        total is unknown (a compressed layer's size is known at its end)."""

        def render(self, task: Task) -> Text:
            done = size_text(int(task.completed))
            if task.total is not None:
                done += f" / {size_text(int(task.total))}"
            return Text(done, style="progress.download")

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        Size(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=RichConsole(file=stream, force_terminal=True),
        auto_refresh=False,
        redirect_stdout=False,
        redirect_stderr=False,
    )
