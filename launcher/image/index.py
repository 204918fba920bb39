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
digests, per repository), so the same content on another base is a HEAD, not a rebuild, and
the state each full layer shipped, so a small change ships as a delta over it
(``launcher.image.delta``). It lives in the user's cache (``launcher.cache``), a file per
workspace and one per full layer's state; losing them costs one full read.
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

VERSION = 2
RACY_NS = 2_000_000_000
KEEP_UPLOADS = 8  # uploads remembered per workspace


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
class Layer:
    diff_id: str
    digest: str
    size: int


@dataclass(frozen=True)
class Uploaded:
    """The layers a content key was pushed as, to a repository: one full layer, or the last
    full layer and a delta over it. Enough to reuse them without reading a file."""

    key: str
    compression: str
    repository: str  # REGISTRY/REPO
    layers: tuple[Layer, ...]

    @property
    def full(self) -> bool:
        return len(self.layers) == 1

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "layers": [layer.__dict__ for layer in self.layers]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Uploaded:
        layers = tuple(Layer(**layer) for layer in data["layers"])
        return cls(data["key"], data["compression"], data["repository"], layers)


@dataclass
class Index:
    path: Path
    scanned_ns: int = 0  # the start of the scan that recorded the entries
    files: dict[str, list[Any]] = field(default_factory=dict)  # path -> [stat..., digest]
    uploads: list[Uploaded] = field(default_factory=list)

    @classmethod
    def load(cls, root: str) -> Index:
        path = path_for(root)
        try:
            data = json.loads(path.read_bytes())
            if data.get("version") != VERSION:
                raise ValueError("another version")
            uploads = [Uploaded.from_dict(u) for u in data.get("uploads", [])]
            return cls(path, int(data["scanned_ns"]), dict(data["files"]), uploads)
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

    def uploaded(self, key: str, compression: str, repository: str) -> Uploaded | None:
        """How this content went to ``repository`` before, if it did."""
        wanted = (key, compression, repository)
        return next(
            (u for u in self.uploads if (u.key, u.compression, u.repository) == wanted), None
        )

    def last_full(self, compression: str, repository: str) -> Uploaded | None:
        """The latest full layer pushed to ``repository``: what a delta builds on."""
        return next(
            (
                u
                for u in self.uploads
                if u.full and (u.compression, u.repository) == (compression, repository)
            ),
            None,
        )

    def _tree_path(self, key: str) -> Path:
        return self.path.with_name(f"{self.path.stem}.{key.removeprefix('sha256:')[:32]}.tree")

    def tree(self, key: str) -> dict[str, list[Any]] | None:
        """The state a full layer shipped (``launcher.image.delta.Tree``), if kept."""
        try:
            found = json.loads(self._tree_path(key).read_bytes())
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) else None

    def save(
        self,
        workspace: Workspace,
        digests: dict[str, str],
        uploaded: Uploaded | None,
        tree: dict[str, list[Any]] | None = None,
    ) -> None:
        """Record the workspace as scanned, with the digests read or trusted this time, and
        what was uploaded (with the state it shipped, for a full layer)."""
        self.scanned_ns = workspace.scanned_ns
        self.files = {
            e.path: [e.size, e.mtime_ns, e.ctime_ns, e.ino, e.dev, digests[e.path]]
            for e in workspace.entries
            if e.kind == FILE and e.path in digests
        }
        if uploaded is not None:
            same = (uploaded.key, uploaded.compression, uploaded.repository)
            rest = [u for u in self.uploads if (u.key, u.compression, u.repository) != same]
            self.uploads = [uploaded, *rest][:KEEP_UPLOADS]
            if tree is not None:
                cache.write_atomically(self._tree_path(uploaded.key), json.dumps(tree).encode())
            self._forget_trees()
        data = {
            "version": VERSION,
            "scanned_ns": self.scanned_ns,
            "files": self.files,
            "uploads": [u.as_dict() for u in self.uploads],
        }
        cache.write_atomically(self.path, json.dumps(data, separators=(",", ":")).encode())

    def _forget_trees(self) -> None:
        """Trees of full layers no longer remembered go (best effort)."""
        kept = {self._tree_path(u.key).name for u in self.uploads if u.full}
        for path in self.path.parent.glob(f"{self.path.stem}.*.tree"):
            if path.name not in kept:
                path.unlink(missing_ok=True)
