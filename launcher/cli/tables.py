"""The CLI's tables: columns under a header, colour on a terminal only.

Drawn with rich, imported here only when a table is printed, so ``launcher --help`` does not
pay for it. Colour follows the stream: on when it is a terminal, off when piped or when
``NO_COLOR`` is set (no-color.org); without colour the table is plain aligned text, the same
columns, every line stripped of trailing blanks. Nothing wraps: a long cell widens its column,
as ``docker ps`` and ``kubectl get`` do. Scripts read ``-o json``, not tables.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TextIO

# A job's state as a colour: done well, done badly, waiting for capacity or dependencies.
STATE_STYLES: Mapping[str, str] = {
    "SUCCEEDED": "green",
    "FAILED": "red",
    "SUBMITTED": "yellow",
    "PENDING": "yellow",
    "RUNNABLE": "yellow",
    "STARTING": "cyan",
    "RUNNING": "cyan",
}

# Wide enough that no table wraps: lines are as long as their cells.
_UNWRAPPED = 10_000


def colour(stream: TextIO) -> bool:
    """Whether to colour what goes to ``stream``: a terminal, and no ``NO_COLOR``."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def render(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    stream: TextIO | None = None,
    *,
    styles: Mapping[int, Mapping[str, str]] | None = None,
) -> None:
    """Print ``rows`` under ``headers``, columns two spaces apart; ``styles`` maps a column's
    index to a style per cell value (``{3: STATE_STYLES}``), used only where colour is on."""
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from launcher.cli.escapes import for_terminal, visible

    out = stream or sys.stdout
    coloured = colour(out)
    escaped = for_terminal(out)  # job names, reasons: a cell must not drive the terminal
    table = Table(
        box=None,
        show_edge=False,
        pad_edge=False,
        padding=(0, 2, 0, 0),
        header_style="bold" if coloured else "",
        expand=False,
    )
    for header in headers:
        table.add_column(header, no_wrap=True, overflow="ignore")
    for row in rows:
        cells = []
        for index, cell in enumerate(row):
            style = (styles or {}).get(index, {}).get(cell, "") if coloured else ""
            shown = visible(cell) if escaped else cell
            cells.append(Text(shown, style=style))  # Text: a cell's brackets are not markup
        table.add_row(*cells)
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=_UNWRAPPED,
        force_terminal=coloured,
        color_system="standard" if coloured else None,
        no_color=not coloured,
        highlight=False,
        emoji=False,
        markup=False,
        soft_wrap=False,
    )
    console.print(table)
    out.write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))
    out.flush()


def span(seconds: float | None) -> str:
    """A duration as a person reads it in a table: ``45s``, ``3m``, ``2h``, ``4d``; ``-`` for
    none."""
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{int(seconds)}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m"
    if seconds < 48 * 3600:
        return f"{int(seconds // 3600)}h"
    return f"{int(seconds // 86400)}d"


def age(since: float | None, now: float | None = None) -> str:
    """How long ago ``since`` (seconds since the epoch) was."""
    if since is None:
        return "-"
    return span((time.time() if now is None else now) - since)


def duration(started: float | None, stopped: float | None, now: float | None = None) -> str:
    """How long a job ran: to its end, or until now while it runs; ``-`` before it starts."""
    if started is None:
        return "-"
    end = stopped if stopped is not None else (time.time() if now is None else now)
    return span(end - started)
