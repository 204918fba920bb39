"""The efa_batch Covalent executor with the real Covalent: its server started from
.venv-covalent on 127.0.0.1, lattices dispatched from a client script in that venv.

One electron runs on the local Docker engine (``local=True``), the other is submitted to the
emulated stack, where moto's Batch holds it RUNNABLE: the test checks its SubmitJob and its
payload in the stack's function bucket, then plays its node on this machine
(``moto_gaps.run_job_commands``). The executor runs inside the server, so the server is given
what the executor needs: the emulator's endpoint and keys, the Docker engine, the local state.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from devenv import moto_gaps
from devenv.emulator import ACCOUNT, REGION
from devenv.processes import free_port
from launcher.node.function import RUNNER
from launcher.node.prelude import user_command
from tests.conftest import ROOT
from tests.support import tiers
from tests.support.processes import required_or_skip

pytestmark = pytest.mark.covalent

VENV = ROOT / ".venv-covalent"
START_TIMEOUT = 90  # `covalent start` polls forever when its server dies (service.py)


@pytest.fixture(scope="module")
def stack(moto_server, synth_default):
    moto_server.reset()
    return moto_server.deploy(synth_default.outdir, synth_default.stack_names)["EfaBatch"]


def _venv(env: dict[str, str], *argv: str, timeout: float, cwd: Path | None = None):
    """A program of .venv-covalent (``covalent``, ``python``), its output captured."""
    program, *args = argv
    return subprocess.run(
        [str(VENV / "bin" / program), *args],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def server(stack, moto_server, docker_engine, registry, tmp_path_factory):
    """The Covalent server, with the environment its executors run in; stopped by its pid
    however the tests end."""
    tiers.require("covalent")
    if not (VENV / "bin" / "covalent").exists():
        required_or_skip(f"{VENV.name} is not installed (make deps)")
    home = tmp_path_factory.mktemp("covalent-home")
    port = free_port()
    env = {
        **os.environ,
        **moto_server.env,
        "HOME": str(home),
        "COVALENT_CONFIG_DIR": str(home / "config"),
        "COVALENT_CACHE_DIR": str(home / "cache"),  # ui.pid: the server's pid
        "COVALENT_DISPATCHER_ADDR": "127.0.0.1",
        "COVALENT_SVC_PORT": str(port),
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_REGISTRY": registry.host,
        "LAUNCHER_LOCAL_STATE": str(home / "state"),
        "LAUNCHER_LOCAL_EFS": str(home / "efs"),
    }
    pid_file = home / "cache" / "ui.pid"
    pid_file.parent.mkdir()  # covalent start writes it there, and makes no directory for it
    try:
        started = _venv(
            env, "covalent", "start", "--no-cluster", "--port", str(port), timeout=START_TIMEOUT
        )
        assert started.returncode == 0, started.stdout + started.stderr
        yield env
    finally:
        # Read before `stop`, which removes it; a start that timed out has written it too.
        pid = int(pid_file.read_text().strip() or 0) if pid_file.exists() else 0
        _venv(env, "covalent", "stop", timeout=60)
        if pid > 0:  # whatever `stop` did, the server is gone
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


CLIENT = '''
import json, sys
import covalent as ct
from launcher.covalent.efa_batch import EfaBatchExecutor

LOCAL = EfaBatchExecutor(local=True, image=sys.argv[2], poll_freq=0.5)
AWS = EfaBatchExecutor(stack="EfaBatch", image=sys.argv[2], poll_freq=0.5)


@ct.electron(executor=LOCAL)
def on_the_engine(x):
    import os, socket
    print("electron on", socket.gethostname())
    return {"twice": 2 * x, "rank": os.environ["LAUNCHER_NODE_RANK"]}


@ct.electron(executor=AWS)
def on_batch(x):
    print("electron on batch with", x)
    return x + 1


@ct.electron(executor=LOCAL)
def fails(path):
    with open(path) as f:  # no such file on the node
        return f.read()


@ct.lattice
def both(x):
    return [on_the_engine(x), on_batch(x)]


@ct.lattice
def failing():
    return fails("/no/such/file")


@ct.lattice
def on_batch_only(x):
    return on_batch(x)


if sys.argv[1] == "dispatch":
    lattice = {"both": both, "failing": failing, "on_batch_only": on_batch_only}[sys.argv[3]]
    print(ct.dispatch(lattice)(*map(int, sys.argv[4:])))
elif sys.argv[1] == "cancel":
    print(ct.cancel(sys.argv[3]))
else:
    result = ct.get_result(sys.argv[3], wait=True)
    nodes = [result.get_node_result(i) for i in range(len(result.lattice.transport_graph._graph))]
    print(json.dumps({
        "status": str(result.status),
        "result": result.result,
        "nodes": {n["node_name"]: {"status": str(n["status"]), "stdout": n["stdout"] or "",
                                   "stderr": n["stderr"] or ""} for n in nodes},
    }))
'''


def client(server: dict[str, str], tmp_path: Path, *args: str, timeout: float = 120) -> str:
    script = tmp_path / "flow.py"
    script.write_text(CLIENT)
    done = _venv(server, "python", str(script), *args, timeout=timeout, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip().splitlines()[-1]


def held_job(queue_arn: str, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        held = moto_gaps.held_jobs(ACCOUNT, REGION, queue_arn)
        if held:
            (job_id,) = held
            return job_id
        time.sleep(0.2)
    raise AssertionError(f"no job held on {queue_arn} after {timeout} s")


def test_a_lattice_runs_one_electron_locally_and_one_on_batch(
    server, stack, moto_server, python_base, tmp_path
):
    dispatch_id = client(server, tmp_path, "dispatch", python_base, "both", "20")
    job_id = held_job(stack["JobQueueArn"])
    # What the server's executor sent: the runner, reading its payload in the function bucket.
    batch, s3 = moto_server.client("batch"), moto_server.client("s3")
    (job,) = batch.describe_jobs(jobs=[job_id])["jobs"]
    env = {e["name"]: e["value"] for e in job["container"]["environment"]}
    bucket = stack["FunctionBucket"]
    location = env["LAUNCHER_FUNCTION"]
    assert re.fullmatch(rf"s3://{re.escape(bucket)}/functions/[0-9a-f]{{32}}/", location), env
    key = location.removeprefix(f"s3://{bucket}/") + "payload"
    assert s3.head_object(Bucket=bucket, Key=key)["ContentLength"] > 0
    # The node runs the runner (behind the prelude) with the image's python3: no covalent.
    assert user_command(job["container"]["command"]) == ["python3", "-c", RUNNER]
    assert job["container"]["image"] == python_base
    assert moto_gaps.run_job_commands(ACCOUNT, REGION, job_id, env=moto_server.env) == 0

    result = json.loads(client(server, tmp_path, "result", python_base, dispatch_id))
    assert result["status"] == "COMPLETED", result
    local, on_batch = result["result"]
    assert local == {"twice": 40, "rank": "0"} and on_batch == 21
    nodes = result["nodes"]
    assert nodes["on_the_engine"]["status"] == nodes["on_batch"]["status"] == "COMPLETED"
    # What each function printed is its electron's stdout in Covalent.
    assert "electron on batch with 20" in nodes["on_batch"]["stdout"], nodes
    assert "electron on " in nodes["on_the_engine"]["stdout"], nodes


def test_an_electron_that_raises_fails_with_the_remote_traceback(
    server, stack, python_base, tmp_path
):
    dispatch_id = client(server, tmp_path, "dispatch", python_base, "failing")
    result = json.loads(client(server, tmp_path, "result", python_base, dispatch_id))
    assert result["status"] == "FAILED", result
    node = result["nodes"]["fails"]
    assert node["status"] == "FAILED"
    stderr = node["stderr"]
    # The function's frame (the server has no copy of the client's file, so no source line),
    # and none of the server's own files named in its place.
    assert "Traceback (most recent call last):" in stderr, stderr
    assert re.search(r'File "<dynamic-code>", line \d+, in fails\n', stderr), stderr
    assert "FileNotFoundError: [Errno 2] No such file or directory: '/no/such/file'" in stderr
    assert "site-packages" not in stderr, stderr


def test_an_electron_cancelled_while_its_job_waits_is_cancelled_and_so_is_the_job(
    server, stack, moto_server, python_base, tmp_path
):
    dispatch_id = client(server, tmp_path, "dispatch", python_base, "on_batch_only", "1")
    job_id = held_job(stack["JobQueueArn"])
    client(server, tmp_path, "cancel", python_base, dispatch_id)
    result = json.loads(client(server, tmp_path, "result", python_base, dispatch_id))
    assert result["status"] == "CANCELLED", result
    assert result["nodes"]["on_batch"]["status"] == "CANCELLED", result
    (job,) = moto_server.client("batch").describe_jobs(jobs=[job_id])["jobs"]
    assert job["status"] == "FAILED", job  # Batch's cancelled job: FAILED, with its reason
    assert moto_gaps.held_jobs(ACCOUNT, REGION, stack["JobQueueArn"]) == []
