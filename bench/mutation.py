"""The mutation benchmark (``make mutation``): how many small bugs the fast tier catches in the
modules that decide what reaches AWS, per module.

The tool is mutmut 3 (pinned in the ``mutation`` dependency group; configured in
pyproject.toml's ``[tool.mutmut]``). It was chosen over cosmic-ray, the other maintained one:
mutmut writes every mutant of a file into one copy of it under ``mutants/`` behind trampolines
(a function calls its original or mutant N as ``MUTANT_UNDER_TEST`` says), records once which
tests call each function, and forks each mutant's run from a process that has already imported
the suite, running only those tests; a run over these modules takes minutes on 2 cores.
cosmic-ray writes each mutant into the source file itself and restores it afterwards, and runs
the whole test command per mutant (seconds of start-up each, thousands of mutants), so it
needs a clone per worker to be safe at all. Both support Python 3.10-3.13.

mutmut's ``run`` writes only under ``mutants/`` of the directory it runs in, and that
directory is never the checkout: this script copies the checkout (without venvs, node_modules,
caches) to a new temporary directory and runs there, so an interrupted run leaves the working
files as they were (the copy stays, for ``mutmut show``). Each run starts from nothing: mutmut
keeps a cached verdict for a function whose source did not change even when the tests did.

Counts: a mutant is killed when a selected test fails, timed out when it runs past mutmut's
CPU-time limit (an endless loop: caught too), survived when every test passes, and untested
when no fast test calls its function. The kill rate is (killed + timeout) / mutants.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench.stats import table

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.90
# The venv's own mutmut (`python -m mutmut` re-imports its main module, which it warns of).
MUTMUT = Path(sys.executable).parent / "mutmut"


@dataclass(frozen=True)
class Module:
    path: str  # as in [tool.mutmut] only_mutate
    # Only the mutants of these functions or classes count (mutmut's mangled names: a method
    # of C is "xǁCǁname", a function "x_name"); () counts the whole file.
    only: tuple[str, ...] = ()
    what: str = ""

    @property
    def label(self) -> str:
        return f"`{self.path}`" + (f" ({self.what})" if self.what else "")

    def counts(self, key: str) -> bool:
        function = key.rpartition(".")[2].rpartition("__mutmut_")[0]
        return not self.only or any(
            function == f"x_{name}" or function.startswith(f"xǁ{name}ǁ") for name in self.only
        )


MODULES = (
    Module("infra/config.py", what="configuration validation"),
    Module("infra/config_values.py", what="configuration values"),
    Module("infra/pool_config.py", what="pool configuration"),
    Module("infra/data_config.py", what="data configuration"),
    # The rest of infra/lustre.py builds constructs, which the fast tier never synthesizes.
    Module("infra/lustre.py", only=("FsxLustre", "link_path_of"), what="FsxLustre"),
    Module("launcher/job/jobdef.py"),
    Module("launcher/job/validation.py"),
    Module("launcher/job/container.py"),
    Module("launcher/job/environment.py"),
    Module("launcher/job/volumes.py"),
    Module("launcher/job/node_ranges.py"),
    Module("launcher/job/resumption.py"),
    Module("launcher/job/shapes.py"),
    Module("launcher/stack/secrets.py"),
    Module("launcher/stack/buckets.py"),
    Module("launcher/job/retry.py"),
    Module("launcher/image/manifest.py"),
)

# mutmut's exit codes (mutmut.stats.status_by_exit_code) in this table's columns.
KILLED = {1, 3}
SURVIVED = {0}
TIMEOUT = {36, 24, -24, 152, 255}
UNTESTED = {5, 33}

# What the copy leaves out: environments, caches, and earlier mutmut output.
SKIP = shutil.ignore_patterns(
    ".venv",
    ".venv-*",
    "node_modules",
    ".git",
    "mutants",
    "cdk.out",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    "*.egg-info",
    ".demo",
    "results",
)


def copy_checkout() -> Path:
    work = Path(tempfile.mkdtemp(prefix="efa-batch-mutation-"))
    shutil.copytree(ROOT, work, ignore=SKIP, dirs_exist_ok=True)
    return work


def run_mutmut(work: Path, log: Path) -> int:
    """mutmut run in ``work``, its output to ``log``, its progress line every half minute."""
    last = [b""]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(MUTMUT), "run"], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        assert proc.stdout is not None
        fd = proc.stdout.fileno()

        def read() -> None:
            while chunk := os.read(fd, 65536):
                out.write(chunk)
                # A progress line is rewritten in place: the last one ends at a carriage return.
                parts = [p.strip() for p in chunk.replace(b"\n", b"\r").split(b"\r")]
                last[0] = next((p for p in reversed(parts) if p), last[0])

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            while True:
                try:
                    proc.wait(timeout=30)
                    break
                except subprocess.TimeoutExpired:
                    print(f"  {last[0].decode(errors='replace')}", flush=True)
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait()
            raise
        reader.join()
    return proc.returncode


def results(work: Path, module: Module) -> dict[str, int]:
    meta = json.loads((work / "mutants" / f"{module.path}.meta").read_text())
    return {k: v for k, v in meta["exit_code_by_key"].items() if module.counts(k)}


def row(module: Module, verdicts: dict[str, int]) -> tuple[list[object], float]:
    def count(codes: set[int]) -> int:
        return sum(1 for v in verdicts.values() if v in codes)

    total = len(verdicts)
    killed, timeout = count(KILLED), count(TIMEOUT)
    other = total - killed - timeout - count(SURVIVED) - count(UNTESTED)
    rate = (killed + timeout) / total if total else 1.0
    cells: list[object] = [module.label, total, killed, count(SURVIVED), timeout]
    return [*cells, count(UNTESTED), other, f"{rate:.1%}"], rate


def main() -> int:
    start = time.monotonic()
    work = copy_checkout()
    log = work / "mutmut.log"
    print(f"mutating a copy of the checkout in {work} (log: {log})", flush=True)
    code = run_mutmut(work, log)
    if code != 0:
        print(f"mutmut run failed ({code}); the end of {log}:", file=sys.stderr)
        print(log.read_text()[-3000:], file=sys.stderr)
        return code
    rows, below, survivors = [], [], []
    for module in MODULES:
        verdicts = results(work, module)
        cells, rate = row(module, verdicts)
        rows.append(cells)
        if rate < TARGET:
            below.append(module.path)
        survivors += sorted(k for k, v in verdicts.items() if v not in KILLED | TIMEOUT)
    headers = ["module", "mutants", "killed", "survived", "timeout", "untested", "other"]
    print()
    print(table([*headers, "kill rate"], rows))
    print(f"\n{time.monotonic() - start:.0f} s on {os.cpu_count()} cores")
    if survivors:
        print(
            f"\nnot killed ({len(survivors)}); docs/development.md lists the equivalent ones "
            "and why."
        )
        print(f"See one: cd {work} && {MUTMUT} show NAME")
        for name in survivors:
            print(f"  {name}")
    if below:
        print(f"\nbelow {TARGET:.0%}: {', '.join(below)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
