"""Workspace images on a >= 1 GiB base held in a local registry and absent from the daemon.

A ~5 MB workspace, for the registry path (patch in place) and the Docker SDK path, in one run:
(a) first build, (b) one file changed, (c) unchanged. Wall time (median of RUNS), bytes that
reached the registry's storage, and registry requests from its access log. Then the peak
memory of `launcher build` for a 1 GiB workspace, against `launcher --help`. Then the four
workspaces of ``bench/workspaces.py`` against the tar | gzip, pigz and zstd pipelines.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import workspaces
from bench.stats import table
from devenv.docker_engine import DockerEngine
from devenv.images import push_random_base
from devenv.registry_server import RegistryServer
from launcher.image import layer, workspace
from launcher.image.compress import Compression

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
BASE_LAYERS_MIB = [256, 256, 256, 256]  # 1 GiB of incompressible layers + busybox
LAUNCHER = [sys.executable, "-m", "launcher"]


def _storage(registry: RegistryServer) -> int:
    blobs = registry.root / "data" / "docker" / "registry" / "v2" / "blobs"
    return sum(p.stat().st_size for p in blobs.rglob("data")) if blobs.exists() else 0


def _workspace(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "src").mkdir()
    for i in range(200):
        (root / "src" / f"module{i}.py").write_text(f"VALUE = {i}\n" * 400)
    (root / "weights.bin").write_bytes(os.urandom(3 * 1024 * 1024))
    (root / "train.sh").write_text("#!/bin/sh\necho train\n")
    (root / "train.sh").chmod(0o755)
    return root


def _gzip_size(ws: Path) -> int:
    out = layer.LayerDigests()
    for _ in layer.stream(workspace.scan(ws), Compression.GZIP, out):
        pass
    return out.size


def _build(env: dict, *args: str) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run(
        [*LAUNCHER, "build", *args], env=env, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    return elapsed, result.stdout.strip()


def _scenario(registry, env, base, repo_prefix, ws, extra, runs, reset) -> dict[str, list]:
    """Each run: (a) into a fresh repository, (b) after editing one file, (c) unchanged."""
    results: dict[str, list] = {"a": [], "b": [], "c": []}
    for run in range(runs):
        reset()
        repo = f"{registry.host}/{repo_prefix}{run}"
        (ws / "src" / "module0.py").write_text(f"VALUE = 0  # {repo_prefix} {run}\n" * 400)
        for step in "abc":
            if step == "b":
                (ws / "src" / "module1.py").write_text(f"VALUE = 1  # {repo_prefix} {run}\n" * 400)
            registry.requests()
            stored = _storage(registry)
            seconds, _ = _build(
                env, "--image", base, "--workspace", str(ws), "--repo", repo, *extra
            )
            log = registry.requests()
            results[step].append(
                {
                    "seconds": seconds,
                    "bytes": _storage(registry) - stored,
                    "requests": len(log),
                    "uploads": sum(
                        r.method == "PATCH" or (r.method == "PUT" and "/blobs/" in r.path)
                        for r in log
                    ),
                }
            )
    return results


def _peak_rss_kib(args: list[str], env: dict) -> int:
    """Peak resident memory of the process, from GNU time (``%M``, KiB).

    GNU time forks a small process before exec; measuring from this (large) Python process
    would fold its own memory into the child's figures on Linux.
    """
    result = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *args],
        env=env,
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"{args} failed: {result.stderr[-500:]}")
    return int(result.stderr.strip().splitlines()[-1])


def run() -> str:
    tmp = Path(tempfile.mkdtemp(prefix="bench-images-"))
    registry = RegistryServer.start(tmp / "registry")
    engine = DockerEngine.start(tmp / "dockerd")
    try:
        t0 = time.perf_counter()
        push_random_base(registry.host, "base", "big", BASE_LAYERS_MIB, tmp)
        base_seconds = time.perf_counter() - t0
        base = f"{registry.host}/base:big"
        ws = _workspace(tmp / "ws")
        gz = _gzip_size(ws)
        env = {**os.environ, "DOCKER_HOST": engine.host}
        client = engine.client()

        def nothing() -> None:
            pass

        def drop_base_from_daemon() -> None:
            for image in client.images.list():
                client.images.remove(image.id, force=True)
            client.api.prune_builds()

        registry_path = _scenario(registry, env, base, "patch", ws, [], RUNS, nothing)
        docker_path = _scenario(
            registry, env, base, "docker", ws, ["--builder", "docker"], RUNS, drop_base_from_daemon
        )

        rows = []
        for label, results in (
            ("registry (patch in place)", registry_path),
            ("docker SDK build + push", docker_path),
        ):
            for step, name in (("a", "first build"), ("b", "one file changed"), ("c", "unchanged")):
                runs = results[step]
                seconds = statistics.median(r["seconds"] for r in runs)
                stored = statistics.median(r["bytes"] for r in runs)
                requests = statistics.median(r["requests"] for r in runs)
                uploads = statistics.median(r["uploads"] for r in runs)
                speedup = ""
                if label.startswith("registry"):
                    other = statistics.median(r["seconds"] for r in docker_path[step])
                    speedup = f"{other / seconds:.0f}x"
                rows.append(
                    [
                        label,
                        f"({step}) {name}",
                        f"{seconds:.2f}",
                        f"{stored / 1e6:.2f}",
                        f"{stored / gz:.3f}" if stored else "0",
                        f"{requests:.0f}",
                        f"{uploads:.0f}",
                        speedup,
                    ]
                )
        images = table(
            [
                "builder",
                "case",
                f"median s ({RUNS} runs)",
                "MB stored",
                "stored / gzip'd ws",
                "registry requests",
                "blob upload requests",
                "faster than docker",
            ],
            rows,
        )

        # Peak memory for a 1 GiB workspace, registry path (dry run: the layer is built and
        # hashed in full; the upload path streams the same generator).
        big = tmp / "bigws"
        big.mkdir()
        for i in range(8):
            with open(big / f"part{i}.bin", "wb") as f:
                for _ in range(128):
                    f.write(os.urandom(1 << 20))
        help_rss = _peak_rss_kib([*LAUNCHER, "--help"], env)
        build_rss = _peak_rss_kib(
            [
                *LAUNCHER,
                "build",
                "--image",
                base,
                "--workspace",
                str(big),
                "--repo",
                f"{registry.host}/bigws",
            ],
            env,
        )
        memory = table(
            ["process", "peak RSS (MiB)", "ratio to launcher --help"],
            [
                ["launcher --help (baseline)", f"{help_rss / 1024:.0f}", "1.0"],
                [
                    "launcher build, 1 GiB workspace (pushed)",
                    f"{build_rss / 1024:.0f}",
                    f"{build_rss / help_rss:.1f}",
                ],
            ],
        )
        notes = (
            f"Base: {sum(BASE_LAYERS_MIB)} MiB of random layers + busybox, pushed in "
            f"{base_seconds:.0f} s; workspace gzip'd: {gz / 1e6:.2f} MB."
        )
        push_random_base(registry.host, "small", "1", [], tmp)  # busybox alone
        lines = workspaces.measure(registry.host, f"{registry.host}/small:1", tmp)
        return f"{images}\n\n{memory}\n\n{notes}\n\n{lines}"
    finally:
        engine.stop()
        registry.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    print(run())
