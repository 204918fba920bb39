"""The real launcher CLI (``python -m launcher``) in a child process, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

LAUNCHER = [sys.executable, "-m", "launcher"]


def launcher(
    *args: str, env: dict | None = None, timeout: float = 300, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """Run ``launcher ARGS`` with ``env`` as its whole environment (default: this process's)."""
    return subprocess.run(
        [*LAUNCHER, *args],
        env=os.environ.copy() if env is None else env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
