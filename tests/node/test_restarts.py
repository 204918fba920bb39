"""Restarts that resume, on the local backend: a lost worker means another attempt that goes on
from the checkpoint; an application error means none; resubmit goes on from the same place.

The nodes run a real two-node PyTorch job (torchrun, gloo, CPU) in containers on the Docker
engine. The image is the busybox base; Python and the CPU torch wheel come from this
machine, bind-mounted read-only (the vfs engine would copy a torch image layer by layer).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

from devenv.clusters import cluster_info
from devenv.host_python import host_python_mounts
from launcher import local
from launcher.job import jobdef
from launcher.job.jobspec import JobSpec, Mount
from tests.support import cli, tiers
from tests.support.processes import rendezvous_port, required_or_skip

# The training script imports torch (this machine's, mounted into the container).
pytestmark = pytest.mark.torch

TRAIN = """
import json, os, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, attempt = dist.get_rank(), os.environ["AWS_BATCH_JOB_ATTEMPT"]
ckpt = os.path.join(os.environ["LAUNCHER_CHECKPOINT_DIR"], "state.json")
step = json.load(open(ckpt))["step"] if os.path.exists(ckpt) else 0
if step:
    print(f"rank {rank} resumed from step {step} (attempt {attempt})", flush=True)
while step < int(os.environ.get("STEPS", "12")):
    value = torch.tensor([1.0])
    dist.all_reduce(value)
    step += 1
    if rank == 0:
        json.dump({"step": step}, open(ckpt + ".tmp", "w"))
        os.replace(ckpt + ".tmp", ckpt)
    time.sleep(0.5)
print(f"rank {rank} done at step {step} (attempt {attempt})", flush=True)
dist.destroy_process_group()
"""


@pytest.fixture
def env(docker_engine, tmp_path, monkeypatch):
    tiers.require("torch")
    if importlib.util.find_spec("torch") is None:
        required_or_skip("torch is not installed (pip install -r requirements-torch.txt)")
    monkeypatch.setenv("DOCKER_HOST", docker_engine.host)
    monkeypatch.setenv("LAUNCHER_LOCAL_STATE", str(tmp_path / "state"))
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text(TRAIN)
    return tmp_path


def start(tmp_path: Path, image: str, command: tuple[str, ...], **extra) -> str:
    spec = JobSpec(
        name="resume",
        command=command,
        image=image,
        nodes=2,
        gpus_per_node=0,
        efa="off",
        attempts=extra.pop("attempts", 3),
        rendezvous_port=rendezvous_port(),
        mounts=(*host_python_mounts(), Mount("bind", "/code", str(tmp_path / "code"), True)),
        env=(("PATH", f"{sys.prefix}/bin:/usr/bin:/bin"), *extra.pop("env", ())),
        **extra,
    )
    requests = jobdef.build(spec, cluster_info("c5n.18xlarge", efa=False))
    return local.LocalBackend("q", str(tmp_path / "efs")).schedule(requests)


def lines(job_id: str, attempt: int | None = None) -> list[str]:
    return [x.message for x in local.LocalBackend().log_iter(job_id, attempt=attempt)]


def checkpoint(tmp_path: Path, job_id: str) -> int:
    path = tmp_path / "efs" / "checkpoints" / job_id / "state.json"
    try:
        return json.loads(path.read_text())["step"]
    except (OSError, ValueError):
        return 0


def test_a_lost_worker_is_retried_and_the_next_attempt_resumes(env, busybox_base, docker_engine):
    job_id = start(env, busybox_base, ("/code/train.py",), torchrun=True)
    deadline = time.monotonic() + 120
    while checkpoint(env, job_id) < 3:
        assert time.monotonic() < deadline, lines(job_id)
        assert local.Store().load(job_id).status == "RUNNING", lines(job_id)
        time.sleep(0.2)
    worker = local.Store().load(job_id).containers[1]
    docker_engine.client().containers.get(worker).kill()  # the worker's host is gone

    job = local.LocalBackend().wait(job_id, timeout=180)
    assert (job.state, job.attempts) == ("SUCCEEDED", 2), lines(job_id)
    first, second = lines(job_id, attempt=1), lines(job_id)
    assert any("lost: ending with exit code 75" in x for x in first), first
    resumed = [x for x in second if "resumed from step" in x]
    assert resumed and "(attempt 2)" in resumed[0], second
    assert int(resumed[0].split("step ")[1].split()[0]) >= 3  # not from scratch
    assert "rank 0 done at step 12 (attempt 2)" in second

    # resubmit: a new job, the same checkpoint directory: it finds the run finished.
    result = cli.launcher("resubmit", job_id, timeout=120)
    assert result.returncode == 0, result.stderr
    again = result.stdout.strip().splitlines()[-1]
    # Under a loaded machine each node's torch import alone can take a minute.
    finished = local.LocalBackend().wait(again, timeout=300)
    assert finished.state == "SUCCEEDED", "\n".join(lines(again))
    assert "rank 0 resumed from step 12 (attempt 1)" in lines(again)


def test_an_application_error_on_a_worker_is_not_retried(env, busybox_base):
    script = 'if [ "$AWS_BATCH_JOB_NODE_INDEX" = 1 ]; then sleep 2; exit 3; fi; sleep 600'
    job_id = start(env, busybox_base, ("sh", "-c", script), restarts=True)
    job = local.LocalBackend().wait(job_id, timeout=120)
    assert (job.state, job.attempts) == ("FAILED", 1), lines(job_id)
    assert any("node 1 failed (exit code 3): the job stops" in x for x in lines(job_id))
    # The worker's code is the job's (the main node's command was only stopped by the watch):
    # status shows FAILED (exit code 3), not the main node's 143.
    assert job.exit_code == 3 and job.status_line().endswith("FAILED (exit code 3)")


def test_a_worker_that_never_starts_ends_the_attempt_and_status_names_it(
    env, busybox_base, docker_engine, registry, monkeypatch
):
    """A worker stuck before its command (an image that cannot be pulled, a volume that cannot
    be mounted, a host lost early) never says hello: the main node gives up after
    LAUNCHER_START_SECONDS with the retryable exit code instead of waiting for the timeout,
    and `status` says which node never came."""
    from launcher.job.jobspec import NodeGroup
    from tests.support.entrypoint_bases import push_entrypoint_base

    # An entrypoint that never runs the command it is given: the worker stays silent.
    stuck = push_entrypoint_base(
        docker_engine.client(), f"{registry.host}/stuck", "none", entrypoint=["sleep", "600"]
    )
    job_id = start(
        env,
        busybox_base,
        ("sh", "-c", "sleep 600"),
        restarts=True,
        attempts=2,
        groups=(NodeGroup(0, 0), NodeGroup(1, 1, image=stuck)),
        env=(("LAUNCHER_START_SECONDS", "3"),),
    )
    job = local.LocalBackend().wait(job_id, timeout=120)
    assert (job.state, job.attempts, job.last_exit_code) == ("FAILED", 2, 75), lines(job_id)
    assert any("node(s) 1 never started (no word within 3 s)" in x for x in lines(job_id))
    status = cli.launcher("status", job_id)
    assert status.returncode == 0, status.stderr
    # The main node's line, as its words: the job's code writes its log (issue 43, item 8).
    assert "  nodes: the main node's log says node(s) 1 never started (its own" in status.stdout
    assert "a node was lost, or never started" in status.stdout


def test_bad_attempt_and_unknown_job_exit_2(env, busybox_base):
    job_id = start(env, busybox_base, ("true",))
    local.LocalBackend().wait(job_id, timeout=60)
    bad = cli.launcher("logs", job_id, "--attempt", "2")
    assert bad.returncode == 2 and "--attempt 2: job" in bad.stderr and "one attempt" in bad.stderr
    unknown = cli.launcher("resubmit", "local-00000000-0000-0000-0000-000000000000")
    assert unknown.returncode == 2 and "no such local job" in unknown.stderr
