"""What a Python function's call costs over a command job of the same shape, on the local
Docker engine: ``cluster.remote(fn)(x)`` (pack, payload, submit, wait, read the result back)
against ``cluster.run(["python3", "-c", ...])`` and a wait (the baseline of the same run), one
node and two; and how long packing takes and how big the payload is, by argument size."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.stats import table
from devenv.clusters import cluster_info
from devenv.docker_engine import DockerEngine
from devenv.images import push_python_base
from devenv.registry_server import RegistryServer
from launcher import Cluster
from launcher.job import function

RUNS = int(os.environ.get("BENCH_RUNS", "7"))


def answer(x: int) -> int:
    return x * 7


def run() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        engine = DockerEngine.start(root / "dockerd")
        registry = RegistryServer.start(root / "registry")
        try:
            os.environ["DOCKER_HOST"] = engine.host
            os.environ["LAUNCHER_LOCAL_STATE"] = str(root / "state")
            push_python_base(engine.client(), f"{registry.host}/python-base")
            base = f"{registry.host}/python-base:1"
            cluster = Cluster(cluster_info(efa=False)).local(efs_dir=root / "efs")
            rows = []
            for nodes in (1, 2):
                port = {"rendezvous_port": 29500 + nodes}

                def command(nodes: int = nodes, port: dict[str, int] = port) -> None:
                    job = cluster.run(
                        ["python3", "-c", "print(6 * 7)"], image=base, nodes=nodes, **port
                    )
                    assert job.wait(timeout=120, poll=0.2).state.value == "SUCCEEDED"

                remote = cluster.remote(answer, image=base, nodes=nodes, ranks="all", **port)

                def call(remote: object = remote) -> None:
                    assert remote.submit(6).result(timeout=120, poll=0.2)[0] == 42  # type: ignore[attr-defined]

                command()  # each shape's first run pulls and warms; not timed
                call()
                # Alternated, so that the engine's drift over the run weighs on both alike.
                samples: dict[str, list[float]] = {"command": [], "call": []}
                for _ in range(RUNS):
                    for name, step in (("command", command), ("call", call)):
                        started = time.perf_counter()
                        step()
                        samples[name].append(time.perf_counter() - started)
                baseline = statistics.median(samples["command"])
                calls = statistics.median(samples["call"])
                rows.append(
                    [
                        f"{nodes} node(s): command job, run + wait (baseline)",
                        f"{baseline:.2f}",
                        "1.00",
                    ]
                )
                rows.append(
                    [
                        f"{nodes} node(s): cluster.remote(fn)(6), value back",
                        f"{calls:.2f}",
                        f"{calls / baseline:.2f}",
                    ]
                )
            timing = table(["on the local engine", f"median of {RUNS} (s)", "ratio"], rows)
        finally:
            registry.stop()
            engine.stop()
    sizes = []
    for mib in (0, 1, 64):
        argument = os.urandom(mib * 2**20)
        started = time.perf_counter()
        payload = function.pack(answer, (argument,), {})
        seconds = time.perf_counter() - started
        sizes.append([f"{mib} MiB", f"{len(payload) / 2**20:.2f}", f"{seconds * 1000:.0f}"])
    packing = table(["argument (random bytes)", "payload (MiB)", "packing (ms)"], sizes)
    return timing + "\n\n" + packing


if __name__ == "__main__":
    print(run())
