"""A job is never lost to Ctrl-C, and a job with no lines says why: the real CLI in a terminal
of its own (tests/support/terminal.py), where Ctrl-C is typed as a person types it, against
the local Docker engine and the emulated stack (whose jobs wait RUNNABLE for ever)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from launcher.cli.interrupt import Again
from launcher.job.info import BackendName
from tests.support import cli
from tests.support.terminal import Terminal

SUBMITTED = r"submitted (\S+) \(follow: launcher logs --follow (\S+)\)"


@pytest.fixture(scope="module")
def cluster(moto_server, synth_default):
    moto_server.reset()
    moto_server.deploy(synth_default.outdir, synth_default.stack_names)
    return moto_server


@pytest.fixture
def env(cluster, tmp_path) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if k != "LAUNCHER_STACK"},
        **cluster.env,
        "LAUNCHER_LOCAL_STATE": str(tmp_path / "state"),
        "LAUNCHER_LOCAL_EFS": str(tmp_path / "efs"),
        "TERM": "xterm",
        "NO_COLOR": "1",
    }


@pytest.fixture
def local_env(env, docker_engine, registry) -> dict[str, str]:
    return {**env, "DOCKER_HOST": docker_engine.host, "LAUNCHER_REGISTRY": registry.host}


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, result.stderr
    return result


def runnable_job(env: dict[str, str]) -> str:
    """A job of the emulated stack, which waits RUNNABLE for ever (it has no instances)."""
    from tests.cli.test_commands import IMAGE

    args = ["run", "--no-workspace", "--image", IMAGE, "--nodes", "2", "--", "train"]
    return ok(cli.launcher(*args, env=env)).stdout.strip()


def said(command: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """A command as the launcher printed it, run as printed (``launcher`` is this checkout's)."""
    words = shlex.split(command)
    assert words[0] == "launcher", command
    return cli.launcher(*words[1:], env=env, timeout=120)


def test_the_commands_name_the_job_as_the_person_reaches_it():
    """An AWS job's commands carry the --profile and --region given (quoted for a shell), a
    local job's none (it is found by its id); --index and --node keep the part followed."""
    aws = SimpleNamespace(job_id="JOB", backend=SimpleNamespace(name=BackendName.AWS))
    local = SimpleNamespace(job_id="local-1", backend=SimpleNamespace(name=BackendName.LOCAL))
    args = argparse.Namespace(profile="team a", region="eu-west-1")
    again = Again.of(args, aws, index=3, node=1)
    top = "launcher --profile 'team a' --region eu-west-1"
    assert again.follow() == f"{top} logs --follow JOB --index 3 --node 1"
    assert again.cancel() == f"{top} cancel JOB --index 3"
    assert Again.of(args, local).wait() == "launcher wait local-1"
    assert Again.of(argparse.Namespace(profile=None, region=None), aws).cancel() == (
        "launcher cancel JOB"
    )


def test_ctrl_c_while_following_a_local_run_names_the_job_which_runs_on(local_env, busybox_base):
    """``JOB=$(launcher run --local --follow ...)`` at a terminal, Ctrl-C once it follows:
    the job's id and the follow command as soon as it exists, then on Ctrl-C that the job
    goes on with the two commands, exit 130, no traceback, the id still on stdout; the job
    runs on (its supervisor and containers are not the terminal's) and ends on its own."""
    go = Path(local_env["LAUNCHER_LOCAL_EFS"]) / "go"
    command = "echo started; until [ -e /mnt/efs/go ]; do sleep 0.2; done; echo done"
    args = ["run", "--local", "--follow", "--no-workspace", "--image", busybox_base]
    term = Terminal(
        [*cli.LAUNCHER, *args, "--", "sh", "-c", command], local_env, stdout=subprocess.PIPE
    )
    job, followed = term.wait_for(SUBMITTED).groups()
    assert followed == job and job.startswith("local-")
    term.wait_for(r"\[node 0\] started")
    term.ctrl_c()
    assert term.exit_status() == 130, term.text
    assert term.process.stdout is not None and term.process.stdout.read() == f"{job}\n".encode()
    shown = term.rows()
    at = shown.index(f"launcher: stopped following; job {job} goes on (Ctrl-C does not cancel it)")
    assert shown[at + 1 : at + 3] == [
        f"  follow it again: launcher logs --follow {job}",
        f"  cancel it:       launcher cancel {job}",
    ]
    assert "Traceback" not in term.text and "KeyboardInterrupt" not in term.text

    status = ok(cli.launcher("status", job, env=local_env)).stdout
    assert (status.split()[0], status.split()[2]) == (job, "RUNNING"), status
    go.touch()
    followed_again = ok(said(shown[at + 1].split(": ", 1)[1], local_env))
    assert followed_again.stdout.splitlines()[-1] == "[node 0] done"
    assert ok(cli.launcher("status", job, env=local_env)).stdout.split()[2] == "SUCCEEDED"


def test_ctrl_c_while_following_logs_or_waiting_leaves_the_aws_job_and_says_so(env):
    """``logs --follow`` and ``wait`` of a RUNNABLE job, Ctrl-C while the waiting line shows:
    the commands carry the --region given (the job is found there), and the job is still
    RUNNABLE, not cancelled."""
    job = runnable_job(env)
    term = Terminal([*cli.LAUNCHER, "--region", "us-east-1", "logs", "--follow", job], env)
    term.wait_for("RUNNABLE for")
    term.ctrl_c()
    assert term.exit_status() == 130, term.text
    assert f"launcher: stopped following; job {job} goes on (Ctrl-C does not cancel it)" in (
        term.text
    )
    assert f"  follow it again: launcher --region us-east-1 logs --follow {job}\n" in term.text
    assert f"  cancel it:       launcher --region us-east-1 cancel {job}\n" in term.text

    term = Terminal([*cli.LAUNCHER, "wait", job, "--poll", "0.2"], env)
    term.wait_for("RUNNABLE for")
    term.ctrl_c()
    assert term.exit_status() == 130, term.text
    shown = term.rows()
    at = shown.index(f"launcher: stopped waiting; job {job} goes on (Ctrl-C does not cancel it)")
    assert shown[at + 1 : at + 3] == [
        f"  wait again: launcher wait {job}",
        f"  cancel it:  launcher cancel {job}",
    ]
    assert "Traceback" not in term.text
    assert ok(cli.launcher("status", job, env=env)).stdout.split()[2] == "RUNNABLE"
    # The printed command cancels it.
    ok(said(f"launcher cancel {job}", env))


def test_logs_of_a_job_that_has_not_started_says_why_and_how_to_follow(env):
    """Not silence: stderr says the job has not started and why, in the waiting line's
    words, and how to follow it; nothing on stdout, exit 0 (a query, not an error)."""
    job = runnable_job(env)
    result = ok(cli.launcher("logs", job, env=env))
    assert result.stdout == ""
    first, second = result.stderr.splitlines()
    assert first.startswith(f"launcher: job {job} has not started, so it has no lines yet: ")
    assert " RUNNABLE for " in first
    assert second == f"  follow it: launcher logs --follow {job}"
    # With --node: the same, and the follow command keeps the node.
    one = ok(cli.launcher("logs", "--node", "1", job, env=env))
    assert one.stderr.splitlines()[-1] == f"  follow it: launcher logs --follow {job} --node 1"


def test_ctrl_c_before_a_local_job_started_leaves_nothing_running(
    local_env, busybox_base, docker_engine, monkeypatch, capsys
):
    """Ctrl-C while a local job's nodes start (here: once the first is up; a pull of a large
    base is the likely moment): one line, exit 130, no follow command, the node that was up
    removed, and the job's record FAILED, not STARTING for ever."""
    import docker.models.containers

    from launcher.cli.main import main
    from launcher.local import LABEL

    for name, value in local_env.items():
        monkeypatch.setenv(name, value)
    start = docker.models.containers.ContainerCollection.run
    started = []

    def run_then_ctrl_c(self, *args, **kwargs):
        if started:
            raise KeyboardInterrupt  # what SIGINT raises in the main thread
        container = start(self, *args, **kwargs)
        started.append(container)
        return container

    monkeypatch.setattr(docker.models.containers.ContainerCollection, "run", run_then_ctrl_c)
    args = ["run", "--local", "--follow", "--nodes", "2", "--no-workspace", "--image"]
    code = main([*args, busybox_base, "--", "sh", "-c", "sleep 60"])
    out, err = capsys.readouterr()
    assert (code, out) == (130, "")
    said_last = err.splitlines()[-1]
    assert said_last == "launcher: interrupted before the job was submitted; nothing runs"
    assert "submitted local-" not in err and "Traceback" not in err
    assert started  # the first node was up when Ctrl-C came
    client = docker_engine.client()
    assert client.containers.list(all=True, filters={"label": LABEL}) == []
    listed = ok(cli.launcher("list", "--local", "--all", "-o", "json", env=local_env)).stdout
    (job,) = json.loads(listed)
    assert (job["state"], job["reason"]) == ("FAILED", "interrupted (Ctrl-C) before it started")
