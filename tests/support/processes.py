"""Ports for jobs the tests run, and what a missing engine means under CI."""

from __future__ import annotations

import os
import socket

from devenv.processes import free_port


def rendezvous_port() -> int:
    """A free port whose successor is free too: a job's rendezvous port (the node watch
    listens on the next one)."""
    for _ in range(100):
        port = free_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two consecutive free ports on 127.0.0.1")


def required_or_skip(message: str) -> None:
    """Under CI a missing engine or registry fails the run; elsewhere the test is skipped."""
    import pytest

    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)
