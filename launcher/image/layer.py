"""A reproducible, streamed workspace layer.

The tar is written by hand from sorted entries (uid/gid 0, empty owner names, a fixed mtime,
modes kept) and deflated into a gzip member with no name and mtime 0, so the same workspace
gives the same digests on any machine. Nothing is held in memory beyond one chunk: the layer
is a generator that hashes (diff_id of the tar, digest of the gzip) as it goes.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from launcher.errors import UsageError

WORKSPACE_DIR = "workspace"  # inside the image: /workspace
MTIME = 1  # fixed; 0 makes some tools print 1970 as "unknown"
CHUNK = 1 << 20
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
_GZIP_HEADER = b"\x1f\x8b\x08\x00" + b"\x00\x00\x00\x00" + b"\x00\xff"  # no name, mtime 0


@dataclass
class LayerDigests:
    """Filled while a layer streams; complete once the generator is exhausted."""

    diff_id: str = ""
    digest: str = ""
    size: int = 0
    tar_size: int = 0
    files: int = 0


def workspace_entries(
    root: str | os.PathLike[str], extra_ignores: tuple[str, ...] = ()
) -> list[Path]:
    """Files, directories and symlinks to ship, sorted; honours ``.dockerignore``."""
    from docker.utils.build import exclude_paths  # Docker's own .dockerignore matcher

    base = Path(root)
    if not base.is_dir():
        raise UsageError(f"--workspace {str(root)!r}: not a directory")
    patterns = list(DEFAULT_IGNORES) + list(extra_ignores)
    ignore_file = base / ".dockerignore"
    if ignore_file.is_file():
        patterns += [
            line.strip()
            for line in ignore_file.read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ]
    # exclude_paths yields kept paths relative to root, directories included.
    kept = {p for p in exclude_paths(str(base), patterns) if p and p != "."}
    venvs = {p for p in kept if (base / p / "pyvenv.cfg").is_file()}
    kept = {p for p in kept if not any(p == v or p.startswith(v + "/") for v in venvs)}
    return [Path(p) for p in sorted(kept, key=lambda p: p.split("/"))]


def _tarinfo(root: Path, rel: Path) -> tarfile.TarInfo:
    path = root / rel
    st = path.lstat()
    info = tarfile.TarInfo(f"{WORKSPACE_DIR}/{rel.as_posix()}")
    info.mtime = MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        info.type = tarfile.SYMTYPE
        info.linkname = os.readlink(path)
    elif stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
    elif stat.S_ISREG(st.st_mode):
        info.size = st.st_size
    else:
        raise UsageError(f"--workspace: {path} is not a file, directory or symlink")
    return info


def _header(info: tarfile.TarInfo) -> bytes:
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


def tar_stream(root: str | os.PathLike[str], entries: list[Path]) -> Iterator[bytes]:
    base = Path(root)
    top = tarfile.TarInfo(WORKSPACE_DIR)
    top.type, top.mode, top.mtime = tarfile.DIRTYPE, 0o755, MTIME
    top.uname = top.gname = ""
    yield _header(top)
    for rel in entries:
        info = _tarinfo(base, rel)
        yield _header(info)
        if info.isreg():
            remaining = info.size
            with open(base / rel, "rb") as f:
                while remaining:
                    chunk = f.read(min(CHUNK, remaining))
                    if not chunk:
                        raise UsageError(f"--workspace: {base / rel} changed while reading")
                    remaining -= len(chunk)
                    yield chunk
            if info.size % tarfile.BLOCKSIZE:
                yield tarfile.NUL * (tarfile.BLOCKSIZE - info.size % tarfile.BLOCKSIZE)
    yield tarfile.NUL * (2 * tarfile.BLOCKSIZE)


def diff_id(root: str | os.PathLike[str], entries: list[Path]) -> str:
    """sha256 of the uncompressed layer: the workspace's content key (no compression cost)."""
    h = hashlib.sha256()
    for chunk in tar_stream(root, entries):
        h.update(chunk)
    return f"sha256:{h.hexdigest()}"


def gzip_layer(
    root: str | os.PathLike[str], entries: list[Path], out: LayerDigests, level: int = 6
) -> Iterator[bytes]:
    """The compressed layer, chunk by chunk; ``out`` holds the digests once it is exhausted."""
    tar_hash, gz_hash = hashlib.sha256(), hashlib.sha256()
    deflate = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    crc, tar_size, size = 0, 0, 0
    pending = bytearray(_GZIP_HEADER)
    for chunk in tar_stream(root, entries):
        tar_hash.update(chunk)
        crc = zlib.crc32(chunk, crc)
        tar_size += len(chunk)
        pending += deflate.compress(chunk)
        if len(pending) >= CHUNK:
            gz_hash.update(pending)
            size += len(pending)
            yield bytes(pending)
            pending.clear()
    pending += deflate.flush()
    pending += struct.pack("<II", crc & 0xFFFFFFFF, tar_size & 0xFFFFFFFF)
    gz_hash.update(pending)
    size += len(pending)
    yield bytes(pending)
    out.diff_id = f"sha256:{tar_hash.hexdigest()}"
    out.digest = f"sha256:{gz_hash.hexdigest()}"
    out.size, out.tar_size, out.files = size, tar_size, len(entries)
