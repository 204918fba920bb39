"""A Python function's call in a local run: a directory of the EFS stand-in, which every node
mounts (a local job's network reaches no S3). The directory is the user's alone (0700, made
and entered by launcher.private); the nodes run as root and the runner hands each result to
the directory's owner (launcher.node.function)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Sequence
from pathlib import Path

from launcher import private

CALLS = ".launcher/functions"  # under the EFS directory, beside the jobs' own files


class DirectoryPayloads:
    def __init__(self, efs_dir: str, efs_path: str, call_id: str) -> None:
        self._root = Path(efs_dir)
        self._dir = self._root / CALLS / call_id
        self.location = f"{efs_path.rstrip('/')}/{CALLS}/{call_id}/"
        self.region: str | None = None

    def put(self, name: str, data: bytes) -> None:
        private.directory(self._dir, own_from=self._root)
        private.create(self._dir / name, data)

    def get(self, name: str) -> bytes | None:
        try:
            return (self._dir / name).read_bytes()
        except FileNotFoundError:
            return None

    def remove(self, names: Sequence[str]) -> None:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(self._dir)
