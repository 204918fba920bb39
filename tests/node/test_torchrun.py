"""A real two-node PyTorch rendezvous (gloo) through the launcher's variables alone.

Both "nodes" are processes on this machine, each given the environment and the command that
the local executor gives its containers for the same job definition (`--torchrun`).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devenv.clusters import cluster_info
from launcher import local
from launcher.job import jobdef
from launcher.job.jobspec import JobSpec
from tests.support import tiers
from tests.support.processes import rendezvous_port, required_or_skip

TRAIN = """
import torch
import torch.distributed as dist

dist.init_process_group("gloo")  # env://: MASTER_ADDR/PORT, RANK, WORLD_SIZE from torchrun
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
print(f"rank {dist.get_rank()}/{dist.get_world_size()} sum {value.item()}", flush=True)
dist.destroy_process_group()
"""


@pytest.mark.torch
def test_torchrun_gloo_across_two_nodes(tmp_path):
    tiers.require("torch")
    if importlib.util.find_spec("torch") is None:  # make test installs the CPU build
        required_or_skip("torch is not installed (pip install -r requirements-torch.txt)")
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    spec = JobSpec(
        name="ddp",
        command=(str(script),),
        image="unused",
        nodes=2,
        gpus_per_node=0,
        efa="off",
        torchrun=True,
        rendezvous_port=rendezvous_port(),
    )
    requests = jobdef.build(spec, cluster_info("c5n.18xlarge", efa=False))
    container = requests.register["nodeProperties"]["nodeRangeProperties"][0]["container"]
    assert "torchrun" in container["command"]
    bin_dir = str(Path(sys.executable).parent)
    assert shutil.which("torchrun", path=bin_dir)
    processes = []
    for node in range(2):
        run = local.node_container(
            container,
            job_id="local-torch",
            job_name="ddp",
            queue="q",
            node=node,
            nodes=2,
            efs_dir=str(tmp_path),
            infiniband=False,
            gpus=False,
        )
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), **run["environment"]}
        processes.append(
            subprocess.Popen(
                run["command"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                cwd=tmp_path,
            )
        )
    outputs = []
    for process in processes:
        out, _ = process.communicate(timeout=180)
        outputs.append(out)
        assert process.returncode == 0, out[-3000:]
    assert "rank 0/2 sum 3.0" in outputs[0]
    assert "rank 1/2 sum 3.0" in outputs[1]
