"""A program run in a terminal, as a person runs it: a pseudo-terminal as its stdin, stdout
and stderr, and, for ``Terminal``, its controlling terminal, where Ctrl-C is typed."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import subprocess
import termios
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


class Terminal:
    """A program in a terminal of its own, which a test reads and types Ctrl-C into: the
    pseudo-terminal is its controlling terminal, so Ctrl-C is SIGINT to its foreground process
    group (the program and the children it did not set apart), as in a person's shell.

    Its stderr is the terminal, and its stdin; its stdout too unless ``stdout`` names a pipe
    (``JOB=$(launcher run ...)`` typed at a terminal)."""

    def __init__(
        self, argv: list[str], env: dict[str, str], columns: int = 200, stdout: int | None = None
    ) -> None:
        self.fd, child = pty.openpty()
        self.process = subprocess.Popen(
            argv,
            stdin=child,
            stdout=child if stdout is None else stdout,
            stderr=child,
            env={**env, "COLUMNS": str(columns)},
            start_new_session=True,  # a session whose terminal this is (TIOCSCTTY below)
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(child)
        self.seen = b""

    def _read(self, wait: float) -> bool:
        """Read what the program wrote within ``wait`` seconds; False when nothing came."""
        if not select.select([self.fd], [], [], wait)[0]:
            return False
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # every writer closed it
            return False
        self.seen += chunk
        return bool(chunk)

    def wait_for(self, pattern: str, timeout: float = 120) -> re.Match[str]:
        """The first match of ``pattern`` in what the terminal showed, waiting for it."""
        deadline = time.monotonic() + timeout
        while (found := re.search(pattern, self.text)) is None:
            if not self._read(1):
                gone = self.process.poll() is not None
                assert not gone and time.monotonic() < deadline, (pattern, self.text)
        return found

    def ctrl_c(self) -> None:
        os.write(self.fd, b"\x03")  # the terminal's line discipline makes it SIGINT

    def exit_status(self, timeout: float = 60) -> int:
        """Its exit status, reading what it shows until it exits."""
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            self._read(0.2)
        while self._read(0.1):
            pass  # what it wrote last
        status = self.process.wait(timeout=1)
        os.close(self.fd)
        return status

    @property
    def text(self) -> str:
        return self.seen.decode(errors="replace").replace("\r\n", "\n")

    def rows(self) -> list[str]:
        """The rows as the screen shows them: a carriage return goes back to the row's start,
        ``ESC [K`` erases to its end, a character overwrites the one under the cursor."""
        shown = []
        for written in self.text.split("\n"):
            row, column = "", 0
            for part in re.split(r"(\r|\x1b\[K)", written):
                if part == "\r":
                    column = 0
                elif part == "\x1b[K":
                    row = row[:column]
                else:
                    row = row[:column] + part + row[column + len(part) :]
                    column += len(part)
            shown.append(row)
        return shown
