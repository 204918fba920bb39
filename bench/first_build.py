"""A first build of a workspace whose image the registry already holds (issue 34): a CI
runner or a colleague's clone, with an empty local index, on a loopback registry and through
a link that carries ``LINK_RATE`` bytes a second up (``tests.support.proxy.ThrottledProxy`` on
127.0.0.1, in front of the same registry).

For each workspace and link, in each of RUNS runs: `launcher build` with an empty cache (the
CI runner: no index, no measurement of the link), with an empty index on a machine that has
measured the link before (its ``costs.json`` kept), and, for the price of looking first when
the look misses, a cold build into a fresh repository with an empty cache. Wall time (median),
and registry writes (POST, PUT, PATCH) from the registry's access log. With ``BENCH_BEFORE``
set to a source tree of the launcher (``git archive HEAD | tar -x -C DIR``), the same builds
run with that tree's launcher too, alternating with this one's in every run.
"""

from __future__ import annotations

import compileall
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench import workspaces
from bench.stats import table
from devenv.images import push_random_base
from devenv.registry_server import RegistryServer
from launcher.image import costs
from tests.support.proxy import ThrottledProxy

RUNS = int(os.environ.get("BENCH_RUNS", "5"))
LINK_RATE = float(os.environ.get("BENCH_LINK_RATE", "10e6"))  # bytes a second up
HERE = Path(__file__).resolve().parent.parent
WRITES = ("POST", "PUT", "PATCH")


def issue_workspace(root: Path) -> None:
    """The issue's: 300 files, 7 MB, half of each random and half text."""
    rng = random.Random(34)
    for i in range(300):
        (root / f"f{i:03d}.bin").write_bytes(rng.randbytes(12 << 10) + b"x" * (12 << 10))


WORKSPACES: dict[str, Callable[[Path], None]] = {
    "300 files, 7 MB": issue_workspace,
    "100 MiB mixed": lambda root: workspaces.mixed(root, random.Random(1), workspaces._corpus()),
}


def _build(source: Path, cache: Path, base: str, ws: Path, repo: str) -> float:
    """`launcher build` of ``source``'s launcher: on the path first, and the working
    directory not on it at all (``-P``)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(source)}
    env.pop("LAUNCHER_UPLOAD_RATE", None)
    os.sync()
    launcher = [sys.executable, "-P", "-m", "launcher"]
    return workspaces.timed_build(env, base, ws, repo, launcher=launcher)


LEARNT: list[str] = []  # what each seeded cache measured


def _learnt(cache: Path, host: str) -> str:
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)
    try:
        rates = costs.Measured.load().rates(host)
    finally:
        os.environ.pop("XDG_CACHE_HOME")
        if before is not None:
            os.environ["XDG_CACHE_HOME"] = before
    return f"upload {rates.upload / 1e6:.0f} MB/s, hashing {rates.hashing / 1e6:.0f} MB/s"


CASES = ("present, empty cache", "present, link measured", "absent, empty cache")


def _link(
    tmp: Path,
    sources: dict[str, Path],
    host: str,
    ws: Path,
    number: int,
    registry: RegistryServer,
) -> dict[str, list[tuple[float, int]]]:
    """(seconds, registry writes) of every case and source, RUNS times, through ``host``."""
    # One registry behind both links: repositories of their own for each link (the port).
    port = host.rsplit(":", 1)[1]
    base, repo = f"{host}/base:1", f"{host}/w{number}-{port}"
    seeded = tmp / f"seeded-{number}-{port}"  # a machine that measured this link
    _build(HERE, seeded, base, ws, f"{host}/seed{number}-{port}")  # an upload through it
    shutil.rmtree(seeded / "efa-batch" / "workspaces")  # its index gone, its costs.json kept
    LEARNT.append(f"{host}: {_learnt(seeded, host)}")
    _build(HERE, tmp / "pusher", base, ws, repo)  # the image, pushed from elsewhere
    got: dict[str, list[tuple[float, int]]] = {}
    for run in range(RUNS):
        order = list(sources.items())
        for variant, source in order[:: -1 if run % 2 else 1]:  # alternate who goes first
            for case in CASES:
                cache = tmp / f"cache-{run}-{variant}-{port}"
                if case == "present, link measured":
                    shutil.copytree(seeded, cache)
                target = f"{repo}-absent-{variant}-{run}" if "absent" in case else repo
                registry.requests()
                seconds = _build(source, cache, base, ws, target)
                writes = sum(r.method in WRITES for r in registry.requests())
                got.setdefault(f"{case}|{variant}", []).append((seconds, writes))
                shutil.rmtree(cache, ignore_errors=True)
    return got


def measure(tmp: Path, before: Path | None) -> str:
    registry = RegistryServer.start(tmp / "registry")
    link = ThrottledProxy.throttled(registry.host, LINK_RATE)
    sources = {"after": HERE} | ({"before": before} if before else {})
    for source in sources.values():
        compileall.compile_dir(source / "launcher", quiet=1)
    load = [os.getloadavg()[0]]
    rows = []
    try:
        push_random_base(registry.host, "base", "1", [], tmp)
        for number, (name, make) in enumerate(WORKSPACES.items()):
            ws = tmp / f"ws{number}"
            ws.mkdir()
            make(ws)
            for path in ws.rglob("*"):  # read once since written, as a user's files are
                if path.is_file():  # (relatime: the first read after a write writes the inode)
                    path.read_bytes()
            time.sleep(2.5)  # older than the index's racy window, as a checkout is by then
            for label, host in (
                ("loopback", registry.host),
                (f"{LINK_RATE / 1e6:g} MB/s up", link.host),
            ):
                got = _link(tmp, sources, host, ws, number, registry)
                for case in CASES:
                    row = [name, label, case]
                    for variant in sources:
                        samples = got[f"{case}|{variant}"]
                        row.append(f"{statistics.median(s for s, _ in samples):.2f}")
                        row.append(f"{statistics.median(w for _, w in samples):.0f}")
                    rows.append(row)
                load.append(os.getloadavg()[0])
            shutil.rmtree(ws)
    finally:
        link.stop()
        registry.stop()
    headers = ["workspace", "link", "image, cache"]
    for variant in sources:
        headers += [f"{variant}: median s ({RUNS} runs)", f"{variant}: registry writes"]
    loads = ", ".join(f"{x:.1f}" for x in load)
    return (
        table(headers, rows)
        + f"\n\nLoad average (1 min), at the start and after each link: {loads}."
        + f"\n\nMeasured by one upload through each link: {'; '.join(LEARNT)}."
    )


def run() -> str:
    tmp = Path(tempfile.mkdtemp(prefix="bench-first-build-"))
    before = os.environ.get("BENCH_BEFORE")
    try:
        return measure(tmp, Path(before).resolve() if before else None)
    finally:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


if __name__ == "__main__":
    print(run())
