"""A shell without the demo's environment, or with an old one: `launcher status`, `list` and
every AWS call say where the demo's jobs and endpoint are (launcher.api.elsewhere) in the one
line a person reads, from the ``.demo/env`` that `make demo` writes (demo.write_env_file)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from demo.__main__ import HANDOVER, write_env_file
from launcher.api import elsewhere
from launcher.cli import main
from launcher.job.info import JobState
from launcher.local import Record, Store
from tests.support import cli

JOB = "local-00000000-0000-4000-8000-00000000e15e"


@pytest.fixture(autouse=True)
def _fresh_settings():
    elsewhere.settings.cache_clear()  # read once a process; the tests change directory
    yield
    elsewhere.settings.cache_clear()


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def demo_here(directory: Path, endpoint: str) -> Path:
    """``DIRECTORY/.demo/env`` as `make demo` writes it, and the demo's state directory, which
    holds one finished job."""
    workdir = directory / ".demo"
    workdir.mkdir()
    state = workdir / "state"
    values = {name: f"demo-{name.lower()}" for name in HANDOVER}
    values |= {"AWS_ENDPOINT_URL": endpoint, "LAUNCHER_LOCAL_STATE": str(state)}
    write_env_file(workdir, values)
    now = int(time.time() * 1000)
    Store(state).create(
        Record(
            job_id=JOB,
            name="train",
            definition="jd",
            queue="local",
            status=JobState.SUCCEEDED,
            created_at=now - 60_000,
            register={
                "jobDefinitionName": "jd",
                "nodeProperties": {
                    "numNodes": 1,
                    "mainNode": 0,
                    "nodeRangeProperties": [{"targetNodes": "0:", "container": {"image": "img"}}],
                },
            },
            submit={"jobName": "train"},
            efs_dir=None,
            infiniband=False,
            gpus=False,
            started_at=now - 50_000,
            stopped_at=now - 40_000,
        )
    )
    return state


def shell(home: Path, **extra: str) -> dict[str, str]:
    """A new shell's environment that never sourced the demo's file: no AWS_*, no LAUNCHER_*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LAUNCHER_"))}
    return {**env, "HOME": str(home), "AWS_EC2_METADATA_DISABLED": "true", **extra}


def test_status_of_a_demo_job_in_a_shell_without_the_demos_environment(tmp_path):
    state = demo_here(tmp_path, f"http://127.0.0.1:{closed_port()}")
    env = shell(tmp_path / "home")

    result = cli.launcher("status", JOB, env=env, cwd=tmp_path, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line == (
        f"launcher: error: no such local job {JOB!r} in {tmp_path / 'home/.local/state/efa-batch'}"
        "; the demo's jobs are in .demo/state (.demo/env): run 'source .demo/env' first"
    )
    # What the line says to do works: the demo's state directory has the job.
    sourced = cli.launcher(
        "status", JOB, env={**env, "LAUNCHER_LOCAL_STATE": str(state)}, cwd=tmp_path, timeout=60
    )
    assert sourced.returncode == 0 and f"{JOB} train SUCCEEDED" in sourced.stdout
    # Elsewhere (no .demo/env in the current directory), the plain line.
    away = cli.launcher("status", JOB, env=env, cwd=tmp_path / ".demo", timeout=60)
    assert away.returncode == 2
    assert away.stderr.strip().endswith(
        "no such local job " + repr(JOB) + " in " + str(tmp_path / "home/.local/state/efa-batch")
    )


def test_an_unknown_job_in_the_demos_own_state_gets_no_advice_to_source_it(tmp_path):
    state = demo_here(tmp_path, f"http://127.0.0.1:{closed_port()}")
    env = shell(tmp_path / "home", LAUNCHER_LOCAL_STATE=str(state))
    other = JOB.replace("e15e", "0000")
    result = cli.launcher("status", other, env=env, cwd=tmp_path, timeout=60)
    assert result.returncode == 2
    assert result.stderr == f"launcher: error: no such local job {other!r} in {state}\n"


def test_an_empty_local_list_says_where_the_demos_jobs_are_on_stderr_only(tmp_path):
    state = demo_here(tmp_path, f"http://127.0.0.1:{closed_port()}")
    env = shell(tmp_path / "home")

    table = cli.launcher("list", "--local", "--all", env=env, cwd=tmp_path, timeout=60)
    assert table.returncode == 0
    assert table.stdout.split() == ["ID", "NAME", "POOL", "STATE", "NODES", "AGE", "DURATION"]
    (line,) = table.stderr.splitlines()
    assert line == (
        f"launcher: no local jobs, read from {tmp_path / 'home/.local/state/efa-batch'}; "
        "the demo's jobs are in .demo/state (.demo/env): run 'source .demo/env' first"
    )
    listed = cli.launcher("list", "--local", "-o", "json", env=env, cwd=tmp_path, timeout=60)
    assert listed.stdout.strip() == "[]"  # scripts read stdout: the hint is not in it
    assert "no active local jobs" in listed.stderr

    sourced = {**env, "LAUNCHER_LOCAL_STATE": str(state)}
    shown = cli.launcher("list", "--local", "--all", env=sourced, cwd=tmp_path, timeout=60)
    assert JOB in shown.stdout and shown.stderr == ""
    # An empty list with the demo's own state directory is just empty.
    active = cli.launcher("list", "--local", env=sourced, cwd=tmp_path, timeout=60)
    assert active.stderr == "" and len(active.stdout.splitlines()) == 1


def _launcher_in_process(capsys, monkeypatch, *args: str) -> tuple[int, str]:
    """``launcher ARGS`` in this process: (exit code, stderr)."""
    code = main.main(list(args))
    return code, capsys.readouterr().err


def test_a_closed_port_on_this_machine_is_said_before_any_call_and_its_retries(monkeypatch):
    """botocore's adaptive retries would try a refused connection eight times with back-off
    (about 7 s after make demo-stop); the client knocks once on an endpoint on this machine
    and says that nothing answers before it sends a call."""
    from launcher.aws.client import Aws
    from launcher.errors import RemoteError

    endpoint = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    aws = Aws(region="us-east-1")
    with pytest.raises(RemoteError, match=f"nothing answers at {endpoint}"):
        aws.describe_stack("EfaBatch")
    assert aws.calls == 0


def test_after_make_demo_stop_the_demos_endpoint_is_said_to_be_stopped(
    tmp_path, monkeypatch, capsys
):
    endpoint = f"http://127.0.0.1:{closed_port()}"
    demo_here(tmp_path, endpoint)
    monkeypatch.chdir(tmp_path)
    for name, value in shell(tmp_path / "home", AWS_ENDPOINT_URL=endpoint).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "demo")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "demo")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")

    code, err = _launcher_in_process(capsys, monkeypatch, "list")
    assert code == 1
    assert err == (
        f"launcher: error: nothing answers at {endpoint}, the AWS endpoint (AWS_ENDPOINT_URL): "
        "it is the demo's (.demo/env), which is stopped: run 'make demo' to start it again\n"
    )
    # A shell left from an earlier demo: its endpoint is not the one the file names now.
    old = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", old)
    code, err = _launcher_in_process(
        capsys, monkeypatch, "status", "00000000-0000-0000-0000-000000000000"
    )
    assert code == 1
    assert err == (
        f"launcher: error: nothing answers at {old}, the AWS endpoint (AWS_ENDPOINT_URL): "
        f"the demo's is {endpoint} (.demo/env): run 'source .demo/env' first\n"
    )
    # No demo here: what to do about an endpoint on this machine that is down.
    monkeypatch.chdir(tmp_path / ".demo")
    elsewhere.settings.cache_clear()
    code, err = _launcher_in_process(capsys, monkeypatch, "list")
    assert code == 1
    assert err == (
        f"launcher: error: nothing answers at {old}, the AWS endpoint (AWS_ENDPOINT_URL): "
        "start what serves it, or unset AWS_ENDPOINT_URL to reach AWS itself\n"
    )


@pytest.mark.parametrize(
    ("url", "here"),
    [
        ("http://127.0.0.1:5000/v1/describejobs", True),
        ("http://localhost:4566/", True),
        ("http://[::1]:4566", True),
        ("http://127.1.2.3:80", True),
        ("https://batch.us-east-1.amazonaws.com/v1/listjobs", False),
        ("http://10.0.0.5:5000", False),
        ("", False),
    ],
)
def test_only_an_endpoint_on_this_machine_is_said_to_have_nothing_answering(url, here):
    from launcher.aws.client import unreachable

    assert (unreachable(url) is not None) is here


def test_the_file_is_read_only_for_its_export_lines_and_only_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert elsewhere.settings() == {}  # no .demo/env: nothing read, nothing said
    assert elsewhere.local_state_hint(tmp_path) is None
    elsewhere.settings.cache_clear()
    (tmp_path / ".demo").mkdir()
    (tmp_path / ".demo" / "env").write_text(
        "# a comment\nexport LAUNCHER_LOCAL_STATE='/a dir/state'  # quoted\n"
        "LAUNCHER_OTHER=1\nexport BROKEN='unclosed\nexport AWS_ENDPOINT_URL=http://127.0.0.1:9/\n"
    )
    assert elsewhere.settings() == {
        "LAUNCHER_LOCAL_STATE": "/a dir/state",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9/",
    }
    assert elsewhere.unreachable_hint("http://127.0.0.1:9") is not None
    assert "make demo" in (elsewhere.unreachable_hint("http://127.0.0.1:9") or "")
