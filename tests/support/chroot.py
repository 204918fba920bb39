"""Chroots built from this machine's own binaries, for scripts the product writes for other
machines (a node's user data, the prelude) run without touching this machine's files."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path


def copy_with_libraries(binary: str, root: Path) -> None:
    """A binary of this machine, with the libraries ldd names, at the same paths in ``root``
    (a chroot that runs this machine's tools without its files)."""
    found = shutil.which(binary)
    assert found, f"{binary} is not on this machine"
    paths = [found] + re.findall(
        r"(/\S+) \(0x", subprocess.run(["ldd", found], capture_output=True, text=True).stdout
    )
    for path in paths:
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(path), target)
    (root / "usr/bin" / binary).parent.mkdir(parents=True, exist_ok=True)
    if not (root / "usr/bin" / binary).exists():
        shutil.copy2(found, root / "usr/bin" / binary)
