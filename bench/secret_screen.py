"""What the secret screen costs the stat walk: the 50,000-file workspace of
``bench/workspaces.py`` walked in-process without it (``secrets=()``, ``keys=False``), with
the name rules alone (``keys=False``, the screen before issue 43), and with the name rules
and the private-key check (``launcher.image.private_keys``) twice: a first walk, which reads
every file's first bytes, and an unchanged one, which finds every verdict kept; turn about,
medians of RUNS.

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


# name -> (the name rules, whether files are checked for keys, whether the verdicts kept
# by the walk before are dropped first)
KINDS: dict[str, tuple[tuple[str, ...], bool, bool]] = {
    "without the screen": ((), False, False),
    "names only": (workspace.SECRET_PATTERNS, False, False),
    "names and keys, first walk": (workspace.SECRET_PATTERNS, True, True),
    "names and keys, unchanged": (workspace.SECRET_PATTERNS, True, False),
}


def _walk(ws: Path, secrets: tuple[str, ...], keys: bool, first: bool) -> tuple[float, float]:
    if first:
        workspace.cache_file(str(ws), "keys").unlink(missing_ok=True)
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    workspace.scan(ws, secrets=secrets, keys=keys)
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
    got: dict[str, list[tuple[float, float, float]]] = {name: [] for name in KINDS}
    listings = []
    for directory, dirs, files in os.walk(ws):
        rel_dir = os.path.relpath(directory, ws)
        listings.append(("" if rel_dir == "." else rel_dir, sorted(dirs + files)))
    patterns = workspace.ignore_patterns(str(ws))
    for kind in KINDS.values():  # once each before timing: the page cache
        _walk(ws, *kind)
    for _ in range(RUNS):
        for name, kind in KINDS.items():
            got[name].append((*_walk(ws, *kind), _match(listings, patterns, kind[0])))
    rows: list[list[object]] = []
    for name, samples in got.items():
        wall, cpu, matching = (statistics.median(s[i] for s in samples) for i in range(3))
        rows.append([name, f"{wall * 1000:.0f}", f"{cpu * 1000:.0f}", f"{matching * 1000:.1f}"])
    headers = ["50,000-file walk", "wall (ms)", "CPU (ms)", "of which matching, CPU (ms)"]
    return table(headers, rows)


def run() -> str:
    tmp = Path(tempfile.mkdtemp(prefix="bench-secret-screen-"))
    os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")  # the verdicts: not the user's cache
    try:
        tiny_files(tmp / "ws", random.Random(3), _corpus())
        time.sleep(2.1)  # older than the racy window, as a user's files are
        return measure(tmp / "ws")
    finally:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


if __name__ == "__main__":
    print(run())
