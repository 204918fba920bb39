"""Refusals the CLI makes from its arguments alone: exit 2 and one line, before it reads a
stack or calls AWS (``python -m launcher`` in a child process, as a user runs it)."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest

from launcher.cli.main import COMMANDS
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


def _refused_in_one_line(aws_endpoint, args: list[str], line: str) -> None:
    """``launcher ARGS`` exits 2 with ``line`` alone on stderr, having called no AWS API."""
    env, seen = aws_endpoint
    result = cli.launcher(*args, env=env, timeout=60)
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert result.stderr == f"launcher: error: {line}\n"
    assert seen == []


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
    _refused_in_one_line(aws_endpoint, args, line)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["statsu", JOB], "unknown command 'statsu'; did you mean status? (see launcher --help)"),
        (
            ["run", "--node", "2", "--", "true"],
            "unrecognized arguments: --node; did you mean --nodes? (see launcher run --help)",
        ),
        (
            ["run", "--nodes=2", "--folow", "--", "true"],
            "unrecognized arguments: --folow; did you mean --follow? (see launcher run --help)",
        ),
        (
            ["list", "--al", "--pol=cpu"],
            "unrecognized arguments: --al --pol=cpu; --al: did you mean --all?; "
            "--pol: did you mean --pool? (see launcher list --help)",
        ),
        (
            ["list", "-o", "jsn"],
            "argument -o/--output: invalid choice: 'jsn'; did you mean json? "
            "(see launcher list --help)",
        ),
        (
            ["completion", "bsh"],
            "argument shell: invalid choice: 'bsh'; did you mean bash? "
            "(see launcher completion --help)",
        ),
        (
            ["run", "--stack", "Dev", "--", "true"],
            "unrecognized arguments: --stack; --stack is an option of launcher itself: put it "
            "before 'run' (see launcher run --help)",
        ),
        # Before the command, argparse would take Dev for an unknown command 'Dev'.
        (
            ["--stak", "Dev", "run", "--", "true"],
            "unrecognized arguments: --stak; did you mean --stack? (see launcher --help)",
        ),
        (
            ["--stack=Dev", "--regoin", "us-east-1", "list"],
            "unrecognized arguments: --regoin; did you mean --region? (see launcher --help)",
        ),
    ],
)
def test_a_misspelt_name_is_refused_with_the_one_it_looks_like(aws_endpoint, args, line):
    """``launcher statsu`` and ``run --node 2`` say what was meant, as the job file does for a
    misspelt key, and still refuse: a guess never runs a command or submits a job (no
    prefix matching either: ``--node`` is not taken for ``--nodes``)."""
    _refused_in_one_line(aws_endpoint, args, line)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["xyz"],
            "unknown command 'xyz'; allowed: "
            + ", ".join(command.name for command in COMMANDS)
            + " (see launcher --help)",
        ),
        (
            ["list", "-o", "yaml"],
            "argument -o/--output: invalid choice: 'yaml'; allowed: table, json "
            "(see launcher list --help)",
        ),
        # The dashes every option shares are not likeness: --gpu is not --output.
        (
            ["run", "--gpu", "4", "--", "true"],
            "unrecognized arguments: --gpu (see launcher run --help)",
        ),
    ],
)
def test_a_name_like_none_gets_no_guess(aws_endpoint, args, line):
    """Nothing close: a command or choice is told with every name allowed, an option with
    none (the command's --help lists them)."""
    _refused_in_one_line(aws_endpoint, args, line)
