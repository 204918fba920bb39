"""TorchX's ``dist.ddp`` on the local engine with no extra settings (issue 46, item 6).

torchrun's c10d rendezvous hands node 0's own name to the other nodes as MASTER_ADDR
(torch.distributed.elastic's agent: ``socket.getfqdn(socket.gethostname())``), so each local
node's name must resolve, as it does on AWS (VPC DNS); without that the run hung with
``DistStoreError ... keys: /torch.rendezvous.train.0/MASTER_ADDR`` unless PET_LOCAL_ADDR was
set. The image is Debian's torch 1.13 (``torch_base``, built offline); both TorchX lines'
dist.ddp commands (--tee, --role, --rdzv_conf) are ones its torchrun takes.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.torchx import test_scheduler, test_workspace
from tests.torchx.test_scheduler import run

# Their fixtures, shared: the TorchX venvs, the moto stack, a local run's environment.
venv, stack, local_env = test_scheduler.venv, test_scheduler.stack, test_workspace.local_env

pytestmark = pytest.mark.torchx

TRAIN = """\
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
print(f"rank {dist.get_rank()} of {dist.get_world_size()}: sum {value.item():g}", flush=True)
dist.destroy_process_group()
"""


def test_dist_ddp_rendezvous_succeeds_on_two_local_nodes_without_extra_settings(
    venv, stack, local_env, torch_base, tmp_path
):
    assert not any(name.startswith("PET_") for name in {**os.environ, **local_env})
    workspace = tmp_path / f"ws-{venv.name}"
    workspace.mkdir()
    (workspace / "train.py").write_text(TRAIN)
    try:
        result = _ddp(venv, local_env, workspace, torch_base)
    except subprocess.TimeoutExpired as exc:  # a hung rendezvous: say what the nodes said
        pytest.fail(f"dist.ddp still running after {exc.timeout} s:\n{_text(exc.stderr)[-6000:]}")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert "SUCCEEDED" in out, out[-4000:]
    # sum 3: rank 0 gives 1, rank 1 gives 2; each node's torchrun runs one rank.
    assert "rank 0 of 2: sum 3" in out and "rank 1 of 2: sum 3" in out, out[-4000:]
    assert "DistStoreError" not in out, out[-4000:]
    # The only traceback allowed is torchrun's own exit-barrier warning, logged after both ranks
    # finished: the local nodes share node 0's network namespace, so either node's agent may
    # bind the rendezvous store, and when its agent exits first the other's last read of the
    # store breaks ("Error waiting on exit barrier"); the job has succeeded by then.
    barrier = out.count("Error waiting on exit barrier")
    assert out.count("Traceback") == barrier, out[-4000:]


def _text(output: bytes | str | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def _ddp(venv, env, workspace, image) -> subprocess.CompletedProcess:
    from devenv.processes import free_port

    return run(
        venv,
        "torchx",
        "run",
        "-s",
        "efa_batch",
        "-cfg",
        f"local=True,efa=off,port={free_port()}",
        "--wait",
        "--log",
        "dist.ddp",
        "-j",
        "2x1",
        "--image",
        image,
        "--script",
        "train.py",
        env=env,
        cwd=workspace,
        timeout=150,
    )
