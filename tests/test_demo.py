"""`make demo` end to end (python -m demo), then `make demo-stop` leaves nothing behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.cdk  # `cdk synth` with the CLI
@pytest.mark.emulator  # the demo starts its own moto server
def test_demo_runs_the_main_job_both_ways_and_stops_cleanly(tmp_path, docker_engine):
    workdir = tmp_path / "demo"
    env = {
        **os.environ,
        "DOCKER_HOST": docker_engine.host,
        "PATH": f"{ROOT / '.venv' / 'bin'}:{ROOT / 'node_modules' / '.bin'}:{os.environ['PATH']}",
    }
    result = subprocess.run(
        [sys.executable, "-m", "demo", "--workdir", str(workdir)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    try:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        out = result.stdout + result.stderr
        assert re.search(r"^job_queue_name +EfaBatch-jobs$", out, re.M)  # launcher outputs
        assert " rendezvous RUNNABLE" in out  # submitted through the emulated Batch API
        assert "[node 0] rank 0 of 2: main at 127.0.0.1:29500" in out
        assert "[node 1] rank 1 of 2: main at 127.0.0.1:29500" in out
        assert "[node 0] rank 0 received: hello from rank 1" in out
        assert "rendezvous SUCCEEDED" in out
        assert "stop it all with: make demo-stop" in out
    finally:
        stop = subprocess.run(
            [sys.executable, "-m", "demo", "stop", "--workdir", str(workdir)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert "stopped moto" in stop.stdout and "stopped registry" in stop.stdout
    client = docker_engine.client()
    assert client.containers.list(all=True, filters={"label": "efa-batch.job"}) == []
