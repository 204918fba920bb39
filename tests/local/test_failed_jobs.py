"""What a newcomer sees of a local job that fails, and of one that succeeds, through the CLI:
the command that cannot be run in their terms (`run --local --follow`), the exit code in
status, describe and `-o json` (the local backend knows each container's), and no line that
looks like a failure on success (the ulimits this engine lowers are said where they matter)."""

from __future__ import annotations

import json
import os
import re

import pytest

from launcher.job.container import ULIMITS
from launcher.local import Store
from launcher.local.containers import capped_line
from tests.support import cli

MEMLOCK_8MIB = {"memlock": 8 * 2**20, "nofile": 20000, "stack": -1}


def test_the_launchers_own_limits_are_said_only_with_efa_here_and_the_jobs_own_always():
    asked = [dict(u) for u in ULIMITS]
    assert capped_line(asked, MEMLOCK_8MIB, efa=False) is None  # a laptop, a sandbox: quiet
    assert capped_line(asked, MEMLOCK_8MIB, efa=True) == (
        "ulimits capped at this machine's hard limits: memlock 8 MiB (asked unlimited), "
        "nofile 20000 (asked 1048576) (Docker here cannot raise them)"
    )
    own = [*asked, {"name": "nproc", "softLimit": 4096, "hardLimit": 8192}]
    line = capped_line(own, {**MEMLOCK_8MIB, "nproc": 1024}, efa=False)
    assert line == (
        "ulimits capped at this machine's hard limits: nproc 1024 (asked 8192) "
        "(Docker here cannot raise them)"
    )


@pytest.fixture(scope="module")
def stack(moto_server, synth_default):
    moto_server.reset()
    return moto_server.deploy(synth_default.outdir, synth_default.stack_names)["EfaBatch"]


@pytest.fixture
def env(stack, moto_server, docker_engine, registry, tmp_path, monkeypatch) -> dict[str, str]:
    monkeypatch.setenv("LAUNCHER_LOCAL_STATE", str(tmp_path / "state"))  # Store() below
    return {
        **os.environ,
        **moto_server.env,
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_REGISTRY": registry.host,
        "LAUNCHER_LOCAL_STATE": str(tmp_path / "state"),
        "LAUNCHER_LOCAL_EFS": str(tmp_path / "efs"),
    }


def run_local(env, image: str, *args: str):
    return cli.launcher(
        "run", "--local", "--follow", "--nodes", "2", "--image", image, *args, env=env
    )  # fmt: skip


def status_of(env, job_id: str) -> tuple[list[str], dict, str]:
    """status's lines, status -o json, describe's text."""
    lines = cli.launcher("status", job_id, env=env).stdout.splitlines()
    data = json.loads(cli.launcher("status", job_id, "-o", "json", env=env).stdout)
    return lines, data, cli.launcher("describe", job_id, env=env).stdout


def test_a_failed_local_job_shows_its_exit_code_and_a_good_one_nothing_alarming(env, busybox_base):
    good = run_local(env, busybox_base, "--no-workspace", "--", "sh", "-c", "echo fine")
    assert good.returncode == 0, good.stderr
    assert "ulimit" not in good.stderr and "capped" not in good.stderr, good.stderr

    bad = run_local(env, busybox_base, "--no-workspace", "--", "sh", "-c", "echo nan; exit 3")
    assert bad.returncode == 1, bad.stderr
    job_id = bad.stdout.strip().splitlines()[-1]
    assert f"{job_id} echo FAILED (exit code 3)" in bad.stderr, bad.stderr  # --follow's end
    lines, data, described = status_of(env, job_id)
    assert lines[0].endswith(" FAILED (exit code 3)"), lines
    assert (data["state"], data["exit_code"]) == ("FAILED", 3)
    assert data["reason"] == "Essential container in task exited"  # Batch's words, kept
    assert re.search(r"^status +FAILED \(exit code 3\)$", described, re.M), described
    assert re.search(r"^reason +Essential container in task exited$", described, re.M)
    # The limits this engine lowered: on record, shown now that the job failed.
    if Store().load(job_id).ulimit_caps:
        assert any(x.startswith("  ulimits: memlock ") for x in lines), lines
        assert re.search(r"^ulimits +memlock .*this machine's hard limits", described, re.M)
    else:
        assert not any("ulimits" in x for x in lines)


def test_a_command_the_image_lacks_is_said_in_the_users_terms(env, busybox_base, tmp_path):
    """The issue's two lines, as `run --local --follow` shows them on two nodes of the demo's
    busybox base: python3 is not in it, and hello.sh was copied without its execute bit."""
    result = run_local(env, busybox_base, "--no-workspace", "--", "python3", "hello.py")
    assert result.returncode == 1
    said = [x for x in result.stderr.splitlines() if "your command" in x]
    # The main node says it (a worker may too, first or not: the engine's timing).
    main = "[node 0] launcher: your command 'python3' was not found in the image (PATH="
    assert any(x.startswith(main) for x in said), result.stderr
    assert not re.search(r"line \d+:", result.stderr), result.stderr  # nothing of the shell's
    job_id = result.stdout.strip().splitlines()[-1]
    lines, data, _ = status_of(env, job_id)
    assert lines[0].endswith("FAILED (exit code 127: the command was not found in the image)")
    assert data["exit_code"] == 127

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "hello.sh").write_text("#!/bin/sh\necho hello\n")
    (workspace / "hello.sh").chmod(0o644)
    result = run_local(env, busybox_base, "--workspace", str(workspace), "--", "./hello.sh")
    assert result.returncode == 1
    assert (
        "[node 0] launcher: your command './hello.sh' is not executable: run it through its "
        "interpreter (sh ./hello.sh), or chmod +x it before the image is built"
    ) in result.stderr, result.stderr
    job_id = result.stdout.strip().splitlines()[-1]
    assert status_of(env, job_id)[1]["exit_code"] == 126
