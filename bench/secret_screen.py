"""What the secret screen costs the stat walk: the 50,000-file workspace of
``bench/workspaces.py`` walked in-process with and without it (``workspace.scan`` with its
default ``SECRET_PATTERNS``, and with ``secrets=()``), turn about, medians of RUNS.

Each walk builds its own matcher (cold: no screen compiled yet) on a warm page cache, as the
unchanged-rebuild floor of ``bench/workspaces.py`` is measured. Wall time and this process's
CPU time are both shown (on a shared machine the CPU time is the steadier), and the matching
alone, every directory's names through a new matcher without the file system. Medians.
``python -m bench.secret_screen``.
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.stats import table
from bench.workspaces import _corpus, tiny_files
from launcher.image import dockerignore, workspace

RUNS = int(os.environ.get("BENCH_RUNS", "9"))


def _walk(ws: Path, secrets: tuple[str, ...]) -> tuple[float, float]:
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    workspace.scan(ws, secrets=secrets)
    return time.perf_counter() - wall, time.process_time() - cpu


def _match(
    listings: list[tuple[str, list[str]]], patterns: list[str], secrets: tuple[str, ...]
) -> float:
    """The matching alone: every directory's names through a new matcher, as the walk
    gives them (no file system: the steadiest figure of the screen's own cost)."""
    matcher = dockerignore.Matcher(patterns, secrets)
    cpu = time.process_time()
    for rel_dir, names in listings:
        matcher.matches(rel_dir, names)
    return time.process_time() - cpu


def measure(ws: Path) -> str:
    kinds = {"without the screen": (), "with the screen": workspace.SECRET_PATTERNS}
    got: dict[str, list[tuple[float, float, float]]] = {name: [] for name in kinds}
    listings = []
    for directory, dirs, files in os.walk(ws):
        rel_dir = os.path.relpath(directory, ws)
        listings.append(("" if rel_dir == "." else rel_dir, sorted(dirs + files)))
    patterns = workspace.ignore_patterns(str(ws))
    for secrets in kinds.values():  # once each before timing: the page cache
        _walk(ws, secrets)
    for _ in range(RUNS):
        for name, secrets in kinds.items():
            got[name].append((*_walk(ws, secrets), _match(listings, patterns, secrets)))
    rows: list[list[object]] = []
    for name, samples in got.items():
        wall, cpu, matching = (statistics.median(s[i] for s in samples) for i in range(3))
        rows.append([name, f"{wall * 1000:.0f}", f"{cpu * 1000:.0f}", f"{matching * 1000:.1f}"])
    headers = ["50,000-file walk", "wall (ms)", "CPU (ms)", "of which matching, CPU (ms)"]
    return table(headers, rows)


def run() -> str:
    tmp = Path(tempfile.mkdtemp(prefix="bench-secret-screen-"))
    try:
        tiny_files(tmp, random.Random(3), _corpus())
        return measure(tmp)
    finally:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


if __name__ == "__main__":
    print(run())
