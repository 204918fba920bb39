"""Start helper servers on loopback, wait for them, stop them by pid; say which may start."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable

SERVICES = "DEVENV_SERVICES"


class NotAllowed(Exception):
    """A service this process tree may not start (not a RuntimeError: callers that treat a
    missing engine as a skip must not swallow it)."""


def allowed(service: str) -> None:
    """Raise NotAllowed unless ``$DEVENV_SERVICES`` (comma-separated; unset: every service)
    names ``service`` (``moto``, ``registry``, ``docker``, or ``cdk`` for a synth). The tests
    set it from each test's markers, so a test that reaches a service it is not marked for
    fails, in this process and in the processes it starts."""
    names = os.environ.get(SERVICES)
    if names is not None and service not in names.split(","):
        raise NotAllowed(f"{service} may not start here ({SERVICES}={names!r})")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_until(
    ready: Callable[[], bool],
    timeout: float,
    what: str,
    process: subprocess.Popen[bytes] | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before it was ready")
        if ready():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready after {timeout:.0f} s")


def stop(process: subprocess.Popen[bytes], timeout: float = 20) -> None:
    if process.poll() is not None:
        return
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
