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


# Set by `make test`, which installs every service the tiers need: a missing one is a failure
# there as under CI, so a developer's run cannot look green with skip lines only.
REQUIRE_ALL = "EFA_BATCH_TESTS_REQUIRE_ALL"


def required_or_skip(message: str) -> None:
    """Under CI or `make test` a missing engine, registry, venv or tool fails the run;
    elsewhere (a developer's own pytest) the test is skipped."""
    import pytest

    if os.environ.get("CI") == "true" or os.environ.get(REQUIRE_ALL) == "1":
        pytest.fail(message)
    pytest.skip(message)
