"""Private keys known by their first bytes, whatever their name (``deploy_key``, ``prod``).

The name rules (``launcher.image.workspace.SECRET_PATTERNS``) catch the names tools give
keys; a key the user named is caught by its text. Every text form of a private key opens
with an armour line naming one: OpenSSL's ``-----BEGIN RSA PRIVATE KEY-----`` (and ``EC``,
``DSA``), PKCS #8's ``PRIVATE KEY`` and ``ENCRYPTED PRIVATE KEY`` (RFC 7468, sections 10 and
11), OpenSSH's ``OPENSSH PRIVATE KEY`` (OpenSSH's PROTOCOL.key) and OpenPGP's ``PGP PRIVATE
KEY BLOCK`` (RFC 4880, section 6.2). gitleaks' ``private-key`` rule takes any label that ends
so; here the line must open the file (after blank space), so a text that only quotes it
further on (a README, a test) is no key. A key after other text (a certificate first, as
some bundles have it) is left to the name rules.

One read of ``HEAD`` bytes a file, and once only: ``Verdicts`` remembers, per workspace, the
files found clean by their stamps (size, mtime, ctime, inode, device; trusted as the local
index trusts them, ``launcher.image.index``), so an unchanged workspace reads no file, and a
changed one reads what changed.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from launcher import cache

HEAD = 256  # bytes read: blank space, then the longest armour line, with room to spare
_ARMOUR = re.compile(rb"\s*-----BEGIN [A-Z0-9 _-]{0,100}PRIVATE KEY(?: BLOCK)?-----")
_SHORTEST = len(b"-----BEGIN PRIVATE KEY-----")
_BOM = b"\xef\xbb\xbf"  # what some Windows editors put before UTF-8 text
# Opened for a look, never followed through a link swapped in since the walk's lstat, never
# waiting on a FIFO swapped in the same way.
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# The verdicts' file: marshal data of plain ints, tied to this Python (``stamp`` is its hash).
VERSION = (1, *sys.version_info[:2])
Stamps = tuple[int, int, int, int, int]  # size, mtime, ctime, inode, device


def stamp(stamps: Stamps) -> int:
    """One int for a file's stamps. A tuple of ints hashes the same in every process of one
    Python version (only str and bytes hashes are salted, PYTHONHASHSEED), so 50,000 kept
    verdicts load as a set of ints in a few ms, where a dict of paths to tuples took 40.
    Two stamps that differ share an int about once in 2**61 pairs; that would reuse a
    verdict, for stamps no one picks (a ctime is the kernel's)."""
    return hash(stamps)


def holds_key(path: str, size: int) -> bool | None:
    """Whether the file at ``path`` opens with a private key's armour line; None when it
    cannot be read (it ships, and the build that reads it says why it cannot)."""
    if size < _SHORTEST:
        return False
    try:
        fd = os.open(path, _FLAGS)
    except OSError:
        return None
    try:
        head = os.read(fd, HEAD)
    except OSError:
        return None
    finally:
        os.close(fd)
    return _ARMOUR.match(head.removeprefix(_BOM)) is not None


class Verdicts:
    """What the files of one workspace held when read, kept in the user's cache (``path``):
    the ``stamp`` of each file found clean (``clean``, looked up by the walk itself) and of
    each holding a key. A verdict stands while the file's stamps are what they were (the
    local index's rule, ``launcher.image.index``): a file rewritten has a new ctime, a file
    put in its place a new inode. One whose mtime or ctime is ``trusted_before_ns`` or later
    (racy: written in the tick it was read) is not kept, and is read again next time."""

    def __init__(self, path: Path, trusted_before_ns: int) -> None:
        self.path = path
        self._trusted_before = trusted_before_ns
        self.clean: frozenset[int] = frozenset()
        self._keys: frozenset[int] = frozenset()
        with contextlib.suppress(OSError, ValueError, EOFError, TypeError, KeyError):
            data: Any = marshal.loads(path.read_bytes())
            if data["version"] == VERSION:
                self.clean, self._keys = frozenset(data["clean"]), frozenset(data["keys"])
        self._found: dict[str, Stamps] = {}  # the keys of this walk
        self._unread: set[str] = set()  # files that could not be read: no verdict
        self._read = 0

    def holds_key(self, path: str, rel: str, stamps: Stamps) -> bool | None:
        """``holds_key`` of the file at ``path`` (``rel`` in the workspace), whose stamps are
        not ``clean`` (the walk looked): a key kept, or the file read."""
        if stamp(stamps) not in self._keys:
            self._read += 1
            said = holds_key(path, stamps[0])
            if not said:
                if said is None:
                    self._unread.add(rel)
                return said
        self._found[rel] = stamps
        return True

    def save(self, files: Iterable[tuple[str, Stamps]]) -> None:
        """Keep the verdicts of this walk when it read a file (else they are what was kept):
        each of ``files`` (path and stamps of every file it ships) is clean unless it is a
        key or could not be read. Best effort."""
        if not self._read:
            return
        trusted = self._trusted_before
        skip = self._found.keys() | self._unread
        clean = [stamp(s) for rel, s in files if max(s[1], s[2]) < trusted and rel not in skip]
        keys = [stamp(s) for s in self._found.values() if max(s[1], s[2]) < trusted]
        data = {"version": VERSION, "clean": clean, "keys": keys}
        cache.write_atomically(self.path, marshal.dumps(data, cache.MARSHAL_VERSION))
