"""Start helper servers on loopback, wait for them, stop them by pid."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(
    ready: Callable[[], bool], timeout: float, what: str, process: subprocess.Popen | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before it was ready")
        if ready():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready after {timeout:.0f} s")


def stop(process: subprocess.Popen, timeout: float = 20) -> None:
    if process.poll() is not None:
        return
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
