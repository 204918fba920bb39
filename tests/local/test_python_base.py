"""The demo's base (devenv.images.push_python_base: busybox plus Debian's python3) and a
newcomer's first Python job on it: demo/workspace/hello.py on two local nodes."""

from __future__ import annotations

import hashlib
import os

import pytest

from devenv.images import python_rootfs
from tests.conftest import ROOT
from tests.support import cli


@pytest.fixture(scope="module")
def stack(moto_server, synth_default):
    moto_server.reset()
    return moto_server.deploy(synth_default.outdir, synth_default.stack_names)["EfaBatch"]


def test_hello_py_runs_on_two_local_nodes(
    stack, moto_server, docker_engine, registry, python_base, tmp_path
):
    env = {
        **os.environ,
        **moto_server.env,
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_REGISTRY": registry.host,
        "LAUNCHER_LOCAL_STATE": str(tmp_path / "state"),
        "LAUNCHER_LOCAL_EFS": str(tmp_path / "efs"),
    }
    result = cli.launcher(
        "run", "--local", "--follow", "--nodes", "2", "--image", python_base,
        "--workspace", str(ROOT / "demo" / "workspace"), "--", "python3", "hello.py",
        env=env,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    lines = out.splitlines()
    assert "[node 0] hello from node 0 of 2" in lines, out
    assert "[node 1] hello from node 1 of 2" in lines, out
    assert "[node 0] node 0 is the main node: the others reach it at 127.0.0.1:29500" in lines
    assert "not found" not in out and "Traceback" not in out


def test_the_base_runs_what_a_job_imports_and_its_layer_is_the_same_every_time(
    docker_engine, python_base
):
    client = docker_engine.client()
    script = (
        "import json, socket, os, subprocess, ssl, hashlib, sqlite3, ctypes, decimal, uuid;"
        "print(subprocess.run(['echo', os.environ['PATH']], capture_output=True, text=True)"
        ".stdout.strip())"
    )
    output = client.containers.run(python_base, ["python3", "-c", script], remove=True)
    assert output.decode() == "/usr/bin:/bin\n"
    # Built twice on this machine, the same bytes: the pushed layer's digest is theirs.
    first, second = python_rootfs(), python_rootfs()
    assert first == second
    layers = client.images.get(python_base).attrs["RootFS"]["Layers"]
    assert layers == [f"sha256:{hashlib.sha256(first).hexdigest()}"]
