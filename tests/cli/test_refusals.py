"""Refusals the CLI makes from its arguments alone: exit 2 and one line, before it reads a
stack or calls AWS (``python -m launcher`` in a child process, as a user runs it)."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest

from tests.support import cli

JOB = "00000000-0000-0000-0000-000000000000"


@pytest.fixture
def aws_endpoint() -> Iterator[tuple[dict[str, str], list[tuple[str, int]]]]:
    """An environment whose every AWS call goes to a listener on 127.0.0.1 that records the
    connection and closes it, and the list of connections it saw."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[tuple[str, int]] = []

    def accept() -> None:
        while True:
            try:
                connection, peer = listener.accept()
            except OSError:  # closed at the end of the test
                return
            seen.append(peer)
            connection.close()

    threading.Thread(target=accept, daemon=True).start()
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{listener.getsockname()[1]}",
        "AWS_MAX_ATTEMPTS": "1",
    }
    yield env, seen
    listener.close()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["logs", JOB, "--attempt", "0"], "--attempt 0: attempts count from 1"),
        (["logs", JOB, "--attempt", "-1", "--node", "0"], "--attempt -1: attempts count from 1"),
        (["check", "--nodes", "0"], "--nodes 0: a check needs at least 1 node"),
        (["check", "--nodes", "-2", "-o", "json"], "--nodes -2: a check needs at least 1 node"),
    ],
)
def test_out_of_range_counts_exit_2_with_one_line_and_no_aws_call(aws_endpoint, args, line):
    """Attempts count from 1 (Batch's ``attempts`` of a job, DescribeJobs) and a check runs on
    at least one node: a 0 is a typo, told at once, not after the stack has been read or a job
    looked up (or a check job submitted for no node)."""
    env, seen = aws_endpoint
    result = cli.launcher(*args, env=env, timeout=60)
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert result.stderr == f"launcher: error: {line}\n"
    assert seen == []
