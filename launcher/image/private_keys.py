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
VERSION = 1
Stamps = tuple[int, int, int, int, int]  # size, mtime, ctime, inode, device


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
    """What the files of one workspace held when read (a key or not), by path and stamps,
    kept in the user's cache (``path``). A verdict is reused while the file's stamps are
    what they were; one whose mtime or ctime is ``trusted_before_ns`` or later (racy: written
    in the tick it was read) is not kept, and the file is read again next time."""

    def __init__(self, path: Path, trusted_before_ns: int) -> None:
        self.path = path
        self._trusted_before = trusted_before_ns
        self._known: tuple[dict[str, Stamps], dict[str, Stamps]] = ({}, {})  # clean, keys
        with contextlib.suppress(OSError, ValueError, EOFError, TypeError, KeyError):
            data: Any = marshal.loads(path.read_bytes())
            if data["version"] == VERSION:
                self._known = (dict(data["clean"]), dict(data["keys"]))
        self._kept: tuple[dict[str, Stamps], dict[str, Stamps]] = ({}, {})
        self._read = 0

    def holds_key(self, path: str, rel: str, stamps: Stamps) -> bool | None:
        """``holds_key`` of the file at ``path`` (``rel`` in the workspace), read only when
        its stamps are not those of a verdict kept."""
        for found, known in enumerate(self._known):
            if known.get(rel) == stamps:
                self._kept[found][rel] = stamps
                return bool(found)
        self._read += 1
        said = holds_key(path, stamps[0])
        if said is not None and max(stamps[1], stamps[2]) < self._trusted_before:
            self._kept[int(said)][rel] = stamps
        return said

    def save(self) -> None:
        """Write the verdicts back when a file was read or one left (best effort)."""
        if self._read or [len(d) for d in self._kept] != [len(d) for d in self._known]:
            data = {"version": VERSION, "clean": self._kept[0], "keys": self._kept[1]}
            cache.write_atomically(self.path, marshal.dumps(data, cache.MARSHAL_VERSION))
