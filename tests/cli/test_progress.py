"""Progress: the library emits events; the CLI's console draws a bar with total, rate and time
left on a terminal, and plain lines (start, end with size and rate) when piped."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time

from launcher.cli.console import Console, fit, rate_text
from launcher.progress import Event, Transfer
from tests.support.terminal import under_a_terminal

# A transfer of 4 MiB in eight pieces, as the CLI's console draws it on stderr.
TRANSFER = """
import time
from launcher.cli.console import Console
from launcher.progress import Event, Transfer

console = Console()
transfer = Transfer("uploading workspace", console, total=4 * 2**20)
transfer.message("step 1/2")
for _ in range(8):
    transfer.update(2**19)
    time.sleep(0.12)
transfer.close()
console(Event("step 2/2"))
"""
COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def _under_a_terminal(code: str, env: dict[str, str]) -> str:
    """What ``python -c CODE`` shows in a terminal (120 columns)."""
    return under_a_terminal(
        [sys.executable, "-c", code], {**env, "TERM": "xterm-256color"}, columns=120
    )


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    return {**env, **extra}


def test_a_transfer_on_a_terminal_is_a_bar_that_reaches_100_with_total_rate_and_time_left():
    seen = _under_a_terminal(TRANSFER, _env())
    plain = COLOUR.sub("", seen)
    assert COLOUR.search(seen)  # coloured on a terminal
    frames = [frame for frame in plain.split("\r") if "━" in frame]  # the bar, redrawn
    last = frames[-1]
    assert re.search(r"uploading workspace ━+ 100% 4\.2 MB / 4\.2 MB [\d.]+ MB/s 0:00:00", last)
    # Before the end: a part done, and time left.
    assert re.search(r" \d{1,2}% [\d.]+ MB / 4\.2 MB [\d.]+ MB/s 0:00:0\d", plain)
    # Messages are lines of their own, above the bar.
    assert "step 1/2\r\n" in plain and plain.endswith("step 2/2\r\n")


def test_no_color_keeps_the_bar_without_colour():
    seen = _under_a_terminal(TRANSFER, _env(NO_COLOR="1"))
    assert not COLOUR.search(seen)
    assert "100% 4.2 MB / 4.2 MB" in seen


def test_piped_a_transfer_is_a_start_line_and_an_end_line_with_size_and_rate():
    done = subprocess.run(
        [sys.executable, "-c", TRANSFER], env=_env(), capture_output=True, text=True, check=True
    )
    lines = done.stderr.splitlines()
    assert lines[0] == "step 1/2"
    assert lines[1] == "uploading workspace: started (4.2 MB)"
    assert re.fullmatch(r"uploading workspace: 4\.2 MB in \d+\.\d s \([\d.]+ MB/s\)", lines[2])
    assert lines[3:] == ["step 2/2"]
    assert "\r" not in done.stderr and "\x1b" not in done.stderr


def test_only_messages_and_a_transfers_ends_reach_a_pipe():
    out = io.StringIO()
    console = Console(out)
    transfer = Transfer("upload", console)
    transfer.update(10)
    transfer.update(10)  # within 0.1 s: not reported
    transfer.close()
    console(Event("submitted"))
    start, end, message = out.getvalue().splitlines()
    assert start == "upload: started"
    assert re.fullmatch(r"upload: 0\.0 MB in \d+\.\d s \(.+\)", end)
    assert message == "submitted"


def test_rates_and_rows():
    assert rate_text(4_000_000, 2.0) == "2.0 MB/s"
    assert rate_text(10, 0.0) == "instant"
    assert fit("x" * 10, 80) == "x" * 10
    assert fit("x" * 100, 80) == "x" * 78 + "…"


def test_the_library_is_silent_without_a_callback(capsys):
    transfer = Transfer("upload", None)
    transfer.update(10)
    transfer.message("nothing printed")
    transfer.close()
    assert capsys.readouterr() == ("", "")


def test_a_count_kept_elsewhere_is_reported_within_the_total():
    events: list[Event] = []
    transfer = Transfer("uploading workspace", events.append, total=100)
    transfer.reach(40)
    time.sleep(0.11)  # reports are ten a second at most
    transfer.reach(150)  # an estimated total fell short: never past 100%
    transfer.close()
    assert [(e.done, e.total) for e in events] == [(40, 100), (100, 100), (100, 100)]
