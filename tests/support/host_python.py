"""This machine's Python, read-only, inside a busybox container: a stand-in for an image with
Python (the vfs engine would copy a Python image layer by layer; there is none offline)."""

from __future__ import annotations

import os
import re
import sys
import sysconfig
from pathlib import Path

from launcher.jobspec import Mount

ROOT = Path(__file__).resolve().parents[2]


def host_python_mounts() -> tuple[Mount, ...]:
    """The interpreter, the venv (with torch and the launcher's dependencies), the system
    libraries, and this checkout (the venv installs the launcher in editable mode)."""
    paths = {sys.base_prefix: sys.base_prefix, sys.prefix: sys.prefix, "/usr": "/usr"}
    for lib in ("lib", "lib64"):
        real = os.path.realpath(f"/{lib}")
        if os.path.isdir(real):
            paths[real] = f"/{lib}"
    paths[str(ROOT)] = str(ROOT)
    mounts = [Mount("bind", dst, src, readonly=True) for src, dst in paths.items()]
    package = _editable_package()
    if package and package != str(ROOT / "launcher"):
        mounts.append(Mount("bind", package, str(ROOT / "launcher"), readonly=True))
    return tuple(mounts)


def _editable_package() -> str | None:
    """Where the venv's editable install finds the launcher package: a git worktree sharing
    another checkout's venv has its own package mounted there, so the container runs it."""
    site = Path(sysconfig.get_paths()["purelib"])
    for finder in site.glob("__editable__*efa_batch_launcher*finder.py"):
        found = re.search(r"'launcher': '([^']+)'", finder.read_text())
        if found:
            return found.group(1)
    return None
