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
digests, per repository; written once the registry has them, while the file list is
written as soon as the layer is made), so the same content on another base is a HEAD, not a
rebuild, and the state each full layer shipped, so a small change ships as a delta over it
(``launcher.image.delta``). It lives in the user's cache (``launcher.cache``), a file per
workspace and one per full layer's state; losing them costs one full read. The file list
(stamps and digests, two dicts) and the states are ``marshal`` data (read back as the dicts
and tuples they were, in tens of ms for 50,000 files, where JSON took 0.2 s to parse and
convert; marshal builds values only, never runs code); anything unreadable, from another
Python version's marshal or damaged, counts as no index.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import marshal
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher import cache
from launcher.image.workspace import FILE, RACY_NS, Workspace, cache_file

# 8: workspaces are walked without the files that look like secrets. An index of 7 may
# remember full layers that shipped them, and a delta over one would hide them with a
# whiteout yet keep them in the image's lower layer: so none of it is read (one full read
# and one full layer after the upgrade). The content key needs no change: it is the shipped
# state's, so a layer that held a secret has another key.
# 9: the same again for the tools' login files and the private keys known by their text
# (issue 43), which an index of 8 may remember in a full layer.
VERSION = 9
KEEP_UPLOADS = 8  # uploads remembered per workspace
# Files read again (changed, or not trusted) leave the file list as it is while that is
# cheaper than rewriting it: they are read again next time, and a 50,000-file list is not
# rewritten for one edit. So at most this many files, and this many bytes (rewriting 50,000
# entries takes about 0.03 s here, the time hashing 16 MiB takes), and at most this share of
# the list: a list most of whose files are read again describes another workspace (the one
# that was at this path before a fresh clone), and would be read past on every build.
REREAD_LIMIT = 256
REREAD_BYTES = 16 << 20
REREAD_SHARE = 16  # a sixteenth


def path_for(root: str) -> Path:
    return cache_file(root, "index")


def newest_change(workspace: Workspace) -> int:
    """The latest mtime or ctime of any entry (the racy rule's input)."""
    if not workspace.entries:
        return 0
    entries = workspace.entries
    return int(max(max(map(_MTIME, entries)), max(map(_CTIME, entries))))


_MTIME, _CTIME = operator.attrgetter("mtime_ns"), operator.attrgetter("ctime_ns")


def content_key(state: dict[str, str]) -> str:
    """What the layer is a function of: its state (``launcher.image.delta.tree``: every
    entry's path, type, mode, size, content digest and link target, in layer order; the
    tar's fixed fields aside). Equal keys, equal layers. Names hold no NUL, so NULs between
    the strings keep them apart; the join is one C loop over 50,000 entries."""
    joined = "\0".join(itertools.chain.from_iterable(state.items()))
    data = f"efa-batch workspace v3\n{joined}".encode(errors="surrogateescape")
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
    # path -> (size, mtime, ctime, inode, device) and path -> sha256, of the same files:
    # compared with the scan's ``file_stamps`` (an index of 50,000 files is read on every
    # build that changed something)
    stamps: dict[str, tuple[int, ...]] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    uploads: list[Uploaded] = field(default_factory=list)
    # Of the last ``known`` call: the files not trusted and their bytes; whether any was
    # racy (a rewrite, with a later scan time, is what trusts those once they are older).
    untrusted: int = 0
    untrusted_bytes: int = 0
    racy: bool = False
    loaded: bool = True  # False until a lazy index is first needed whole

    @classmethod
    def lazy(cls, root: str) -> Index:
        """An index read only when first needed (``unchanged_key`` needs only its summary)."""
        return cls(path_for(root), loaded=False)

    def _load(self) -> None:
        if not self.loaded:
            full = Index.load_path(self.path)
            self.scanned_ns, self.stamps, self.digests = full.scanned_ns, full.stamps, full.digests
            self.uploads = full.uploads
            self.loaded = True

    @property
    def _uploads_path(self) -> Path:
        return self.path.with_suffix(".uploads")

    @classmethod
    def load(cls, root: str) -> Index:
        return cls.load_path(path_for(root))

    @classmethod
    def load_path(cls, path: Path) -> Index:
        try:
            data = marshal.loads(path.read_bytes())
            stamps, digests = data["stamps"], data["digests"]
            if data.get("version") != VERSION or not isinstance(stamps, dict):
                raise ValueError("another version")
            if not isinstance(digests, dict) or stamps.keys() != digests.keys():
                raise ValueError("damaged")
            found = cls(path, int(data["scanned_ns"]), stamps, digests)
        except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError):
            return cls(path)  # no index (or a damaged one): everything is read
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            found.uploads = [
                Uploaded.from_dict(u)
                for u in json.loads(found._uploads_path.read_bytes())
                if isinstance(u, dict)
            ]
        return found

    @property
    def _summary_path(self) -> Path:
        return self.path.with_suffix(".summary")

    def unchanged_key(self, workspace: Workspace) -> str | None:
        """The content key recorded for exactly this scan, when every entry's stat is as it
        was and none is racy: the unchanged path reads this small summary alone, not the
        whole index."""
        try:
            data = json.loads(self._summary_path.read_bytes())
            if data.get("version") != VERSION or data.get("stamps") != workspace.stamps:
                return None
            if newest_change(workspace) >= int(data["scanned_ns"]) - RACY_NS:
                return None
            return str(data["key"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def known(self, workspace: Workspace) -> dict[str, str]:
        """Trusted digests of the workspace's files (path -> sha256 hex): those whose stat
        is as recorded and that are not racy (see the module doc)."""
        self._load()
        if not self.stamps:  # a first build: the stamps are worked out later, off its path
            self.untrusted = sum(1 for e in workspace.entries if e[1] == FILE)
            self.untrusted_bytes = sum(e[4] for e in workspace.entries if e[1] == FILE)
            return {}
        current = workspace.file_stamps
        recorded = self.stamps.get
        moved = {path for path, s in current.items() if recorded(path) != s}
        limit = self.scanned_ns - RACY_NS
        racy: set[str] = set()
        if newest_change(workspace) >= limit:  # only then can a recorded stamp be racy
            racy = {p for p, s in current.items() if p not in moved and max(s[1], s[2]) >= limit}
        found = dict(self.digests)
        for path in (found.keys() - current.keys()) | moved | racy:
            found.pop(path, None)
        self.untrusted = len(current) - len(found)
        self.untrusted_bytes = sum(current[path][0] for path in moved | racy)
        self.racy = bool(racy)
        return found

    def uploaded(self, key: str, compression: str, repository: str) -> Uploaded | None:
        """How this content went to ``repository`` before, if it did."""
        self._load()
        wanted = (key, compression, repository)
        return next(
            (u for u in self.uploads if (u.key, u.compression, u.repository) == wanted), None
        )

    def last_full(self, compression: str, repository: str) -> Uploaded | None:
        """The latest full layer pushed to ``repository``: what a delta builds on."""
        self._load()
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

    def tree(self, key: str) -> dict[str, str] | None:
        """The state a full layer shipped (``launcher.image.delta.Tree``), if kept."""
        try:
            found = marshal.loads(self._tree_path(key).read_bytes())
        except (OSError, ValueError, EOFError, TypeError):
            return None
        return found if isinstance(found, dict) else None

    def save(
        self,
        workspace: Workspace,
        digests: dict[str, str],
        uploaded: Uploaded | None,
        tree: dict[str, str] | None = None,
        key: str | None = None,
    ) -> None:
        """Record the workspace as scanned, with the digests read or trusted this time, and
        what was uploaded (with the state it shipped, for a full layer). Nothing is written
        when nothing is new, and the file list is rewritten only past ``REREAD_LIMIT`` files
        read again. ``key``, the scan's content key, goes to the summary ``unchanged_key``
        reads."""
        if key is not None:
            summary = {
                "version": VERSION,
                "scanned_ns": workspace.scanned_ns,
                "stamps": workspace.stamps,
                "key": key,
            }
            cache.write_atomically(self._summary_path, json.dumps(summary).encode())
        if not self.loaded:
            return  # a lazy index never asked anything: nothing learnt
        if uploaded is not None:
            same = (uploaded.key, uploaded.compression, uploaded.repository)
            rest = [u for u in self.uploads if (u.key, u.compression, u.repository) != same]
            self.uploads = [uploaded, *rest][:KEEP_UPLOADS]
            # A full layer that ships what looks like a secret (a ``!`` line brought it back)
            # is no delta's base: once the file goes, a delta would only hide it with a
            # whiteout, and the image would still hold it in this layer. Without its state,
            # the next change is a full layer again.
            if tree is not None and not workspace.brought_back:
                tree_bytes = marshal.dumps(tree, cache.MARSHAL_VERSION)
                cache.write_atomically(self._tree_path(uploaded.key), tree_bytes)
            uploads = json.dumps([u.as_dict() for u in self.uploads]).encode()
            cache.write_atomically(self._uploads_path, uploads)
            self._forget_trees()
        if self._list_holds(len(workspace.file_stamps)):
            return
        self.scanned_ns = workspace.scanned_ns
        current = workspace.file_stamps
        if digests.keys() == current.keys():  # every file read or trusted: a first build
            self.digests, self.stamps = dict(digests), dict(current)
        else:
            self.digests = {path: digests[path] for path in current if path in digests}
            self.stamps = {path: current[path] for path in self.digests}
        data = {
            "version": VERSION,
            "scanned_ns": self.scanned_ns,
            "stamps": self.stamps,
            "digests": self.digests,
        }
        cache.write_atomically(self.path, marshal.dumps(data, cache.MARSHAL_VERSION))
        # the list is the scan's now: a second save leaves it
        self.untrusted, self.untrusted_bytes, self.racy = 0, 0, False

    def _list_holds(self, files: int) -> bool:
        """Whether the file list may stay as it is (see ``REREAD_LIMIT``): there is one, none
        of its files was racy, and the files read again are few, small and a small share."""
        few = min(REREAD_LIMIT, files // REREAD_SHARE)
        return (
            bool(self.stamps)
            and not self.racy
            and self.untrusted <= few
            and self.untrusted_bytes <= REREAD_BYTES
        )

    def _forget_trees(self) -> None:
        """Trees of full layers no longer remembered go (best effort)."""
        kept = {self._tree_path(u.key).name for u in self.uploads if u.full}
        for path in self.path.parent.glob(f"{self.path.stem}.*.tree"):
            if path.name not in kept:
                path.unlink(missing_ok=True)
