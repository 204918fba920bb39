"""What a workspace ships: its files, directories and symlinks, with what ``lstat`` said.

One walk with ``os.scandir`` gives every entry its stat (one ``lstat`` each, the only cost an
unchanged workspace pays); ``.dockerignore`` is matched as the Docker SDK matches it
(``launcher.image.dockerignore``); virtual environments (a directory holding ``pyvenv.cfg``)
are skipped whatever their name. Entries are sorted by path components, the order the layer
is written in.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import marshal
import operator
import os
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from launcher import cache
from launcher.errors import UsageError
from launcher.image import dockerignore

# Skipped even without a .dockerignore: VCS data, caches and virtual environments.
DEFAULT_IGNORES = (
    ".git",
    "**/.git",
    "**/__pycache__",
    "**/*.pyc",
    ".venv",
    "**/.venv",
    "venv",
    "**/node_modules",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
)
IGNORE_FILE = ".dockerignore"
VENV_MARKER = "pyvenv.cfg"

FILE, SYMLINK, DIRECTORY = b"0", b"2", b"5"  # tar type flags


class Entry(NamedTuple):
    """One path to ship. The first five fields are what the layer ships, the last five what
    the local index compares (``Workspace.file_stamps``): slices of a tuple cost nothing."""

    path: str  # relative to the workspace, /-separated
    kind: bytes  # FILE, SYMLINK or DIRECTORY
    mode: int  # permission bits
    link: str  # symlinks only, else ""
    size: int  # files only, else 0
    mtime_ns: int
    ctime_ns: int
    ino: int
    dev: int


@dataclass(frozen=True)
class Workspace:
    root: str
    entries: tuple[Entry, ...]
    scanned_ns: int  # wall clock when the walk started: the index's racy-entry rule

    @property
    def bytes(self) -> int:
        return sum(e.size for e in self.entries)

    @functools.cached_property
    def file_stamps(self) -> dict[str, tuple[int, int, int, int, int]]:
        """path -> (size, mtime, ctime, inode, device) of every file: what the local index
        compares, as a whole."""
        return {e[0]: e[4:9] for e in self.entries if e[1] == FILE}

    @functools.cached_property
    def stamps(self) -> str:
        """A digest of every entry as scanned, stat included: equal only if nothing moved
        (another Python's marshal can only make it differ, never equal by mistake)."""
        return hashlib.sha256(self.listing()).hexdigest()

    def listing(self) -> builtins.bytes:  # the class's ``bytes`` is its size
        """Every entry, stat included, as marshal data (plain tuples: marshal takes no
        NamedTuple): what ``stamps`` hashes and ``from_listing`` reads back."""
        return marshal.dumps([e[:] for e in self.entries], cache.MARSHAL_VERSION)

    @classmethod
    def from_listing(
        cls, root: str, listing: builtins.bytes | memoryview, scanned_ns: int
    ) -> Workspace:
        """The workspace a ``listing`` holds, its ``stamps`` taken from those very bytes."""
        found = cls(root, tuple([_NEW(Entry, e) for e in marshal.loads(listing)]), scanned_ns)
        found.__dict__["stamps"] = hashlib.sha256(listing).hexdigest()  # cached_property's slot
        return found


def sort_key(path: str) -> str:
    """Component-wise order ("a/b" before "a-c"): NUL sorts below every name character."""
    return path.replace("/", "\0")


def ignore_patterns(root: str, extra: Sequence[str] = ()) -> list[str]:
    patterns = [*DEFAULT_IGNORES, *extra]
    path = os.path.join(root, IGNORE_FILE)
    if os.path.isfile(path):
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            patterns += dockerignore.parse(f.read())
    return patterns


def scan(root: str | os.PathLike[str], extra_ignores: Sequence[str] = ()) -> Workspace:
    """Every entry to ship, sorted, with its stat; UsageError for what cannot be shipped."""
    base = os.fspath(root)
    if not os.path.isdir(base):
        raise UsageError(f"--workspace {base!r}: not a directory")
    matcher = dockerignore.Matcher(ignore_patterns(base, extra_ignores))
    started = time.time_ns()
    entries: list[Entry] = []

    def visit(directory: str, rel_dir: str) -> bool:
        """Add what ``directory`` holds, in order; False (nothing added) for a virtual env.

        Names sorted within each directory, each directory right before its contents: the
        component-wise order of the whole tree, without sorting it."""
        with os.scandir(directory) as listing:
            found = sorted(listing, key=_NAME)
        if rel_dir and any(d.name == VENV_MARKER and d.is_file() for d in found):
            return False
        ignored_names = matcher.ignored_names(rel_dir, [d.name for d in found])
        prefix = f"{rel_dir}/" if rel_dir else ""
        for d in found:
            rel = prefix + d.name
            ignored = d.name in ignored_names
            if d.is_dir(follow_symlinks=False):
                if ignored and not matcher.may_reinclude(rel):
                    continue
                mark = len(entries)
                if not ignored:
                    entries.append(_entry(d, rel))
                if not visit(d.path, rel):
                    del entries[mark:]
            elif not ignored:
                entries.append(_entry(d, rel))
        return True

    visit(base, "")
    return Workspace(base, tuple(entries), started)


_NAME = operator.attrgetter("name")
_NEW = tuple.__new__  # a third of the cost of a NamedTuple's generated __new__


def _entry(d: os.DirEntry[str], rel: str) -> Entry:
    st = d.stat(follow_symlinks=False)
    mode = st.st_mode
    if stat.S_ISREG(mode):
        kind, size, link = FILE, st.st_size, ""
    elif stat.S_ISDIR(mode):
        kind, size, link = DIRECTORY, 0, ""
    elif stat.S_ISLNK(mode):
        kind, size, link = SYMLINK, 0, os.readlink(d.path)
    else:
        raise UsageError(f"--workspace: {d.path} is not a file, directory or symlink")
    # One tuple, built once: 50,000 entries pay for every intermediate one.
    fields = (
        rel,
        kind,
        mode & 0o7777,
        link,
        size,
        st.st_mtime_ns,
        st.st_ctime_ns,
        st.st_ino,
        st.st_dev,
    )
    return _NEW(Entry, fields)
