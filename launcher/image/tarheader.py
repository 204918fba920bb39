"""Tar headers for the workspace layer, byte for byte what ``tarfile`` writes in PAX format.

The layer's entries all have uid/gid 0, no owner names and one fixed mtime, so for the usual
entry (an ASCII name and link target of at most 100 characters) the header is a ustar block
whose only variable fields are name, mode, size, type and link: written here from a template
with the checksum summed incrementally, about 20x cheaper than ``TarInfo.tobuf``. Anything
else (long or non-ASCII names, which need a PAX extended header) goes through ``tarfile``
itself, so the bytes never depend on which path was taken (``tests/image/test_layer.py``).
"""

from __future__ import annotations

import tarfile

BLOCK = tarfile.BLOCKSIZE
MTIME = 1  # fixed; 0 makes some tools print 1970 as "unknown"
_NAME, _LINK = 100, 100
_MAX_SIZE = 8**11  # ustar's 12-byte octal field
_ZEROS = b"0000000\0"  # uid and gid
_MTIME = b"%011o\0" % MTIME
_MAGIC = tarfile.POSIX_MAGIC  # b"ustar\x0000"
_TAIL = b"\0" * (32 + 32 + 8 + 8 + 155 + 12)  # uname, gname, devmajor, devminor, prefix, pad
# The mtime and the checksum field, summed once: 8 spaces stand in for the checksum while it is
# computed, as tarfile's calc_chksums does (the other fields' sums come with them).
_FIXED_SUM = sum(_MTIME) + 8 * ord(" ")


def header(name: str, kind: bytes, mode: int, size: int = 0, link: str = "") -> bytes:
    """The header of one entry (one block, or more with a PAX extended header)."""
    if kind == tarfile.DIRTYPE and not name.endswith("/"):
        name += "/"  # as TarInfo.get_info does for directories
    if (
        len(name) <= _NAME
        and len(link) <= _LINK
        and size < _MAX_SIZE
        and name.isascii()
        and link.isascii()
    ):
        return _ustar(name.encode(), kind, mode, size, link.encode())
    return _tarfile_header(name, kind, mode, size, link)


def _ustar(name: bytes, kind: bytes, mode: int, size: int, link: bytes) -> bytes:
    mode_part = _MODES.get(mode)
    if mode_part is None:  # a workspace has a handful of modes: each formatted once
        field = b"%07o\0" % (mode & 0o7777) + _ZEROS + _ZEROS
        mode_part = _MODES[mode] = (field, sum(field))
    after = _AFTER.get(kind) if not link else None
    if after is None:
        block = kind + link.ljust(_LINK, b"\0") + _MAGIC + _TAIL
        after = (block, sum(block))
    size_field = b"%011o\0" % size
    checksum = _FIXED_SUM + sum(name) + mode_part[1] + sum(size_field) + after[1]
    fields = (name.ljust(_NAME, b"\0"), mode_part[0], size_field, _MTIME, b"%06o\0 " % checksum)
    return b"".join((*fields, after[0]))


# What follows the checksum when there is no link target, and its sum, by type flag.
_AFTER = {
    kind: (kind + b"\0" * _LINK + _MAGIC + _TAIL, kind[0] + sum(_MAGIC))
    for kind in (tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE)
}
_MODES: dict[int, tuple[bytes, int]] = {}  # mode -> (mode, uid and gid fields; their sum)


def _tarfile_header(name: str, kind: bytes, mode: int, size: int, link: str) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size, info.linkname = kind, mode, size, link
    info.mtime, info.uid, info.gid, info.uname, info.gname = MTIME, 0, 0, "", ""
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


# NULs that round a member's data up to whole blocks: PADDING[-size % BLOCK].
PADDING = tuple(b"\0" * n for n in range(BLOCK))
END = b"\0" * (2 * BLOCK)  # end-of-archive marker
