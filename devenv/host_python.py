"""This machine's Python, read-only, inside a busybox container: a stand-in for an image with
Python (the vfs engine would copy a Python image layer by layer; there is none offline)."""

from __future__ import annotations

import json
import os
import site
import sys
from importlib.metadata import distributions
from pathlib import Path
from urllib.parse import urlparse

from launcher.job.jobspec import Mount, MountKind

ROOT = Path(__file__).resolve().parents[1]


def host_python_mounts() -> tuple[Mount, ...]:
    """The interpreter, the venv (with torch and the launcher's dependencies), the system
    libraries, and this checkout (the venv installs the launcher in editable mode)."""
    sources = {sys.base_prefix: sys.base_prefix, sys.prefix: sys.prefix, "/usr": "/usr"}
    for lib in ("lib", "lib64"):
        real = os.path.realpath(f"/{lib}")
        if os.path.isdir(real):
            sources[f"/{lib}"] = real
    sources[str(ROOT)] = str(ROOT)
    # A git worktree that shares another checkout's venv: its launcher goes where the venv's
    # editable install looks, so the container runs the code under test.
    for checkout in _editable_checkouts():
        if checkout != str(ROOT):
            sources[f"{checkout}/launcher"] = str(ROOT / "launcher")
    return tuple(Mount(MountKind.BIND, dst, src, readonly=True) for dst, src in sources.items())


def _editable_checkouts() -> list[str]:
    """The directories the venv's editable installs of the launcher point at (PEP 610)."""
    found = distributions(name="efa-batch-launcher", path=site.getsitepackages())
    urls = (json.loads(d.read_text("direct_url.json") or "{}").get("url", "") for d in found)
    return [urlparse(url).path for url in urls if url.startswith("file://")]
