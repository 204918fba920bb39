"""The local index of a workspace: what each file held the last time it was read, so an
unchanged file costs an ``lstat``, not a read (git's index, for the same reason).

A file's recorded digest is trusted only when its size, mtime, ctime, inode and device are
all what they were, and the entry is not *racy*. Content changes that keep the size and put
the mtime back (``touch -r``, ``rsync -t``, ``tar x``) still move the ctime, which no user
can set; a file replaced by a rename has a new inode. The remaining hole is git's "racy
clean" case: a write in the same timestamp tick as the read that recorded the entry leaves
every field as it was. So, as git does, an entry whose mtime or ctime lies within
``RACY_NS`` of the scan that recorded it is not trusted: it is read again next time, and
once it is older than that it is trusted from then on. ``RACY_NS`` is 2 s, the coarsest
timestamp granularity of a local file system (FAT); a network file system whose server
clock runs more than that behind this machine's is not covered.

Every build also checks each file it reads against its scan (``fstat`` after the read), so a
file that changes while it is read fails the build instead of entering the index.

The index also remembers the layers this workspace was uploaded as (content key ->
digests), so the same content on another base is one HEAD, not a rebuild. It lives in the
user's cache (``launcher.cache``), one file per workspace; losing it costs one full read.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher import cache
from launcher.image.workspace import FILE, Entry, Workspace

VERSION = 1
RACY_NS = 2_000_000_000
KEEP_LAYERS = 8  # uploaded layers remembered per workspace


def path_for(root: str) -> Path:
    key = hashlib.sha256(os.path.realpath(root).encode(errors="surrogateescape")).hexdigest()
    return cache.directory() / "workspaces" / f"{key[:32]}.json"


def content_key(entries: Iterable[Entry], digests: dict[str, str]) -> str:
    """What the layer is a function of: every entry's path, type, mode, size, link target
    and content digest (the tar's fixed fields aside). Equal keys, equal layers."""
    lines = [
        f"{e.kind.decode()} {e.mode:o} {e.size} {digests.get(e.path, '')} {e.path}\0{e.link}\n"
        for e in entries
    ]
    data = "".join(["efa-batch workspace v1\n", *lines]).encode(errors="surrogateescape")
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class UploadedLayer:
    """A layer pushed for a content key: enough to reuse it without reading a file."""

    key: str
    compression: str
    diff_id: str
    digest: str
    size: int


@dataclass
class Index:
    path: Path
    scanned_ns: int = 0  # the start of the scan that recorded the entries
    files: dict[str, list[Any]] = field(default_factory=dict)  # path -> [stat..., digest]
    layers: list[UploadedLayer] = field(default_factory=list)

    @classmethod
    def load(cls, root: str) -> Index:
        path = path_for(root)
        try:
            data = json.loads(path.read_bytes())
            if data.get("version") != VERSION:
                raise ValueError("another version")
            layers = [UploadedLayer(**layer) for layer in data.get("layers", [])]
            return cls(path, int(data["scanned_ns"]), dict(data["files"]), layers)
        except (OSError, ValueError, KeyError, TypeError):
            return cls(path)  # no index (or a damaged one): everything is read

    def digest(self, entry: Entry) -> str | None:
        """The recorded digest of ``entry`` when it can be trusted (see the module doc)."""
        found = self.files.get(entry.path)
        if found is None or found[:5] != [
            entry.size,
            entry.mtime_ns,
            entry.ctime_ns,
            entry.ino,
            entry.dev,
        ]:
            return None
        if max(entry.mtime_ns, entry.ctime_ns) >= self.scanned_ns - RACY_NS:
            return None
        return str(found[5])

    def known(self, workspace: Workspace) -> dict[str, str]:
        """Trusted digests of the workspace's files (path -> sha256 hex)."""
        found = {}
        for e in workspace.entries:
            if e.kind == FILE:
                digest = self.digest(e)
                if digest is not None:
                    found[e.path] = digest
        return found

    def layer(self, key: str, compression: str) -> UploadedLayer | None:
        return next((u for u in self.layers if u.key == key and u.compression == compression), None)

    def save(
        self, workspace: Workspace, digests: dict[str, str], uploaded: UploadedLayer | None
    ) -> None:
        """Record the workspace as scanned, with the digests read or trusted this time."""
        self.scanned_ns = workspace.scanned_ns
        self.files = {
            e.path: [e.size, e.mtime_ns, e.ctime_ns, e.ino, e.dev, digests[e.path]]
            for e in workspace.entries
            if e.kind == FILE and e.path in digests
        }
        if uploaded is not None:
            same = (uploaded.key, uploaded.compression)
            rest = [u for u in self.layers if (u.key, u.compression) != same]
            self.layers = [uploaded, *rest][:KEEP_LAYERS]
        data = {
            "version": VERSION,
            "scanned_ns": self.scanned_ns,
            "files": self.files,
            "layers": [u.__dict__ for u in self.layers],
        }
        cache.write_atomically(self.path, json.dumps(data, separators=(",", ":")).encode())
