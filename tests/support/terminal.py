"""A program run in a terminal, as a person runs it: a pseudo-terminal as its stdin, stdout
and stderr."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time


def under_a_terminal(argv: list[str], env: dict[str, str], columns: int) -> str:
    """What ``argv`` shows in a terminal of ``columns`` columns, read until it exits (60 s at
    most): escape codes and the terminal's ``\\r\\n`` line ends included. It must exit 0."""
    fd, child = pty.openpty()
    process = subprocess.Popen(
        argv, stdin=child, stdout=child, stderr=child, env={**env, "COLUMNS": str(columns)}
    )
    os.close(child)
    seen = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if not ready:
            if process.poll() is not None:
                break
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    assert process.wait(timeout=30) == 0, seen
    os.close(fd)
    return seen.decode()
