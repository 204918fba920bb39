"""A 1 GiB base in another registry: bytes through the user's machine and wall time of a run.

Two local registries: a "remote" one holding the base (as AWS's Deep Learning Containers
registry or GHCR would) and the "cluster" one. Each case runs `cat /workspace/hello.txt` on the
base plus a small workspace, on the local backend (the Docker engine standing in for AWS), to
the job's end, in its own process under strace: "through the launcher" is what the launcher's
processes sent and received over TCP.

- copy job (first run): a fresh cluster repository; the copy job copies the base next to the
  registries, the launcher sends the workspace.
- copy job (second run): the same base, a changed workspace: nothing of the base moves.
- stream (first run): today's path before copy jobs, ``--stream-base``: every base layer
  through the launcher (in from the remote registry, out to the cluster's).

Medians of RUNS runs; the streamed first run is the baseline the others are compared with.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.stats import table
from devenv.clusters import cluster_info
from devenv.docker_engine import DockerEngine
from devenv.images import push_busybox_base, push_random_base
from devenv.local_run import launcher_run
from devenv.registry_server import RegistryServer

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
STREAM = "baseline: stream (`--stream-base`), first run"  # the row the others are timed against
BASE_LAYERS_MIB = [256, 256, 256, 256]  # 1 GiB of incompressible layers + busybox


def _storage_bytes(registry: RegistryServer) -> int:
    blobs = registry.root / "data" / "docker" / "registry" / "v2" / "blobs"
    return sum(p.stat().st_size for p in blobs.rglob("data")) if blobs.exists() else 0


def run() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        engine = DockerEngine.start(root / "dockerd")
        remote = RegistryServer.start(root / "remote")
        cluster = RegistryServer.start(root / "cluster")
        try:
            os.environ["DOCKER_HOST"] = engine.host
            os.environ["LAUNCHER_LOCAL_STATE"] = str(root / "state")
            push_random_base(remote.host, "dlc/pytorch", "1", BASE_LAYERS_MIB, root)
            base = f"{remote.host}/dlc/pytorch:1"
            base_bytes = _storage_bytes(remote)
            push_busybox_base(engine.client(), f"{cluster.host}/copier")
            copier = f"{cluster.host}/copier:1"
            ws = root / "ws"
            ws.mkdir()
            (ws / "hello.txt").write_text("hello\n")
            (ws / "weights.bin").write_bytes(os.urandom(2 * 2**20))
            workspace_bytes = sum(p.stat().st_size for p in ws.iterdir())
            samples: dict[str, list[tuple[int, float]]] = {}

            def case(label: str, repo: str, stream: bool) -> None:
                info = dataclasses.replace(cluster_info(), repository_uri=f"{cluster.host}/{repo}")
                lines, moved, seconds = launcher_run(root, base, ws, info, copier, stream)
                if "JOB SUCCEEDED" not in lines:
                    raise RuntimeError(f"{label}: the job did not succeed: {lines[-5:]}")
                samples.setdefault(label, []).append((moved, seconds))

            for index in range(RUNS):
                (ws / "hello.txt").write_text(f"run {index}\n")
                case(STREAM, f"stream{index}", True)
                case("copy job, first run", f"copy{index}", False)
                (ws / "hello.txt").write_text(f"run {index}, changed\n")
                case("copy job, second run (workspace changed)", f"copy{index}", False)
        finally:
            cluster.stop()
            remote.stop()
            engine.stop()

    baseline = statistics.median(s for _, s in samples[STREAM])
    rows = []
    for label, values in samples.items():
        moved = statistics.median(m for m, _ in values)
        seconds = statistics.median(s for _, s in values)
        rows.append(
            [
                label,
                f"{moved / 2**20:.1f}",
                f"{moved / base_bytes:.3f}",
                f"{seconds:.1f}",
                f"{baseline / seconds:.1f}x",
            ]
        )
    note = (
        f"\n\nBase: {base_bytes / 2**30:.2f} GiB in the remote registry; workspace "
        f"{workspace_bytes / 2**20:.1f} MiB; {RUNS} runs."
    )
    return (
        table(
            [
                "case",
                "MiB through the launcher (TCP)",
                "÷ base size",
                f"median s ({RUNS} runs)",
                "faster than stream",
            ],
            rows,
        )
        + note
    )


if __name__ == "__main__":
    start = time.time()
    print(run())
    print(f"\n({time.time() - start:.0f} s)")
