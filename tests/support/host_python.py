"""This machine's Python, read-only, inside a busybox container: a stand-in for an image with
Python (the vfs engine would copy a Python image layer by layer; there is none offline)."""

from __future__ import annotations

import os
import sys
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
    return tuple(Mount("bind", dst, src, readonly=True) for src, dst in paths.items())
