"""A launcher run on the local backend, in its own process under strace: what it printed, the
bytes it and its children moved over TCP, and its wall time. Shared by the base-copy tests
and bench/base_copy.py."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from devenv.host_python import host_python_mounts
from devenv.traffic import run_counted
from launcher.stack.cluster import ClusterInfo

DRIVER = """
import json, sys
from launcher.api import Cluster
from launcher.stack.cluster import ClusterInfo
from launcher.copyjob.plan import CopierImage
from launcher.job.jobspec import Mount

args = json.loads(sys.argv[1])
mounts = tuple(Mount(**m) for m in args["mounts"])
copier = CopierImage(args["copier"], tuple(args["command"]), mounts)
cluster = Cluster(ClusterInfo(**args["info"]), copier=copier).local(args["efs"])
job = cluster.run(
    ["/bin/sh", "-c", "cat /workspace/hello.txt"], image=args["base"], workspace=args["ws"],
    nodes=1, gpus_per_node=0, efa="off",
    stream_base=args["stream"], progress=lambda e: print("PROGRESS " + e.text, flush=True),
)
info = job.wait(timeout=300, poll=0.5)
print("JOB " + info.state.value, flush=True)
"""


def launcher_run(
    env_dir: Path, base: str, ws: Path, info: ClusterInfo, copier: str, stream: bool = False
) -> tuple[list[str], int, float]:
    """One run of ``cat /workspace/hello.txt`` on ``base`` plus ``ws``, to the job's end:
    (stdout lines, TCP bytes of the run's processes, seconds). ``copier``: an image that
    runs this machine's Python (mounted read-only) as the copy job."""
    args = {
        "info": dataclasses.asdict(info),
        "copier": copier,
        "command": [sys.executable, "-m", "launcher.copyjob.program"],
        "mounts": [dataclasses.asdict(m) for m in host_python_mounts()],
        "base": base,
        "ws": str(ws),
        "efs": str(env_dir / "efs"),
        "stream": stream,
    }
    start = time.perf_counter()
    result, moved = run_counted(
        [sys.executable, "-c", DRIVER, json.dumps(args)],
        env_dir / f"strace-{time.monotonic_ns()}.log",
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "LAUNCHER_REGISTRY": ""},
    )
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-3000:])
    return result.stdout.splitlines(), moved, seconds
