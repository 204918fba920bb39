"""Run every benchmark and print the Markdown tables docs/benchmarks.md shows."""

from __future__ import annotations

import compileall
import os
import sys
import tempfile
from pathlib import Path

from bench import (
    base_copy,
    first_build,
    functions,
    images,
    launcher_calls,
    logs,
    logs_quota,
    preflight,
    synth,
)

BENCHES = {
    "synth": synth.run,
    "launcher": launcher_calls.run,
    "logs": logs.run,
    "logs_quota": logs_quota.run,
    "images": images.run,
    "first_build": first_build.run,
    "base_copy": base_copy.run,
    "preflight": preflight.run,
    "functions": functions.run,
}


def main() -> None:
    # The launcher's cache (a default security group found fine) in a directory of the run's
    # own: never the user's, and every run starts cold.
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="efa-batch-bench-cache-")
    # The launcher's bytecode, as an installed launcher has it (pip compiles at install):
    # where PYTHONDONTWRITEBYTECODE is set, an editable install would compile every module on
    # every command, and the benchmark would time the compiler.
    compileall.compile_dir(Path(__file__).parent.parent / "launcher", quiet=1)
    chosen = sys.argv[1:] or list(BENCHES)
    for name in chosen:
        print(f"## {name}\n\n{BENCHES[name]()}\n", flush=True)


if __name__ == "__main__":
    main()
