"""A reproducible, streamed workspace layer, read once.

The tar is written by hand from sorted entries (uid/gid 0, empty owner names, a fixed mtime,
modes kept; headers as ``tarfile`` writes them, ``launcher.image.tarheader``) straight into
fixed chunks, one per gzip member or zstd frame (files are read into the chunk buffers, no
copies), compressed on every core (``launcher.image.compress``), and hashed as it goes: the
tar (diff_id) and each file (the local index's content digests) on one thread, the
compressed bytes (digest) as they are yielded. So a first build reads every file once and
hashes it twice (file, tar), plus the compressed output; the same workspace gives the same
bytes on any machine.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from launcher.errors import UsageError
from launcher.image import tarheader
from launcher.image.compress import CHUNK, Compression, chunk_size, compressed
from launcher.image.workspace import DIRECTORY, FILE, Entry, Workspace

WORKSPACE_DIR = "workspace"  # inside the image: /workspace
WHITEOUT = ".wh."  # OCI image-spec layer.md: a whiteout hides a lower layer's path
# Files up to this size are read in one call and hashed on the spot; larger ones are read
# into the chunk buffers and hashed on the hashing thread.
SMALL_FILE = 256 << 10
BATCH = 64 << 10  # bytes of small files gathered before they are written into the chunks
HASH_BEHIND = 8 << 20  # bytes of chunks the hashing thread may lag behind the reading


@dataclass
class LayerDigests:
    """Filled while a layer streams; complete once the generator is exhausted."""

    diff_id: str = ""
    digest: str = ""
    size: int = 0
    tar_size: int = 0
    file_digests: dict[str, str] = field(default_factory=dict)  # path -> sha256 hex


class _Chunks:
    """The tar stream, cut into ``size``-byte buffers that are never written after handing."""

    def __init__(self, size: int = CHUNK) -> None:
        self.size = size
        self.buf = bytearray(size)
        self.pos = 0
        self.full: list[bytearray] = []
        self.total = 0

    def _roll(self) -> None:
        self.full.append(self.buf)
        self.buf, self.pos = bytearray(self.size), 0

    def write(self, data: bytes) -> None:
        n, pos, size = len(data), self.pos, self.size
        if pos + n < size:
            self.buf[pos : pos + n] = data
            self.pos = pos + n
        else:
            view, taken = memoryview(data), 0
            while taken < n:
                k = min(size - self.pos, n - taken)
                self.buf[self.pos : self.pos + k] = view[taken : taken + k]
                self.pos += k
                taken += k
                if self.pos == size:
                    self._roll()
        self.total += n

    def read_some(self, f: io.RawIOBase, most: int, path: str) -> memoryview:
        """Up to ``most`` bytes of ``f`` into the current buffer (no further than its end);
        the slice that holds them."""
        k = min(self.size - self.pos, most)
        view = memoryview(self.buf)[self.pos : self.pos + k]
        got = f.readinto(view)
        if not got:
            raise UsageError(f"--workspace: {path} changed while the layer was built")
        self.pos += got
        self.total += got
        if self.pos == self.size:
            self._roll()
        return view[:got]

    def rest(self) -> bytearray:
        return self.buf[: self.pos]


def _finish_file(digests: dict[str, str], path: str, h: Any) -> None:
    digests[path] = h.hexdigest()


def tar_chunks(
    root: str,
    entries: Iterable[Entry],
    hasher: ThreadPoolExecutor,
    file_digests: dict[str, str],
    whiteouts: Iterable[str] = (),
    size: int = CHUNK,
    under: str = WORKSPACE_DIR,
) -> Iterator[bytearray]:
    """The layer's tar in ``size``-byte pieces (the last one shorter); each file's sha256 into
    ``file_digests`` (larger files' on ``hasher``, which must run tasks in order). Entries go
    under the directory ``under`` ("": at the top, as a Docker build context has them)."""
    out = _Chunks(size)
    # Small entries are gathered and written in batches: most of a many-file workspace's cost
    # is per call, not per byte.
    batch: list[bytes] = [tarheader.header(under, DIRECTORY, 0o755)] if under else []
    batched = 0
    prefix = f"{under}/" if under else ""
    for name in whiteouts:  # before the entries: a path hidden below may be written again
        parent, _, base = name.rpartition("/")
        hidden = f"{prefix}{parent + '/' if parent else ''}{WHITEOUT}{base}"
        batch.append(tarheader.header(hidden, FILE, 0o644))
    header, sha256, pad = tarheader.header, hashlib.sha256, tarheader.PADDING  # 50,000 times
    for e in entries:
        rel, kind, mode, link, size = e[:5]
        head = header(prefix + rel, kind, mode, size, link)
        if kind != FILE:
            batch.append(head)
            continue
        path = f"{root}/{rel}"
        if size <= SMALL_FILE:
            data = _read_small(path, e)
            file_digests[rel] = sha256(data).hexdigest()
            batch += (head, data, pad[-size % tarheader.BLOCK])
            batched += size
            if batched < BATCH:
                continue
        else:
            batch.append(head)
            out.write(b"".join(batch))
            h, remaining = sha256(), size
            with open(path, "rb", buffering=0) as f:
                while remaining:  # a chunk at a time, handed on as it fills: memory stays flat
                    piece = out.read_some(f, remaining, path)
                    hasher.submit(h.update, piece)
                    remaining -= len(piece)
                    if out.full:
                        yield from out.full
                        out.full.clear()
                _check_unchanged(os.fstat(f.fileno()), e, path)
            hasher.submit(_finish_file, file_digests, rel, h)
            batch = [pad[-size % tarheader.BLOCK]]
        out.write(b"".join(batch))
        batch, batched = [], 0
        if out.full:
            yield from out.full
            out.full.clear()
    batch.append(tarheader.END)
    out.write(b"".join(batch))
    yield from out.full
    yield out.rest()


def _check_unchanged(st: os.stat_result, e: Entry, path: str) -> None:
    """The file as read is the file as scanned: its digest may be indexed under that stat."""
    if (st.st_size, st.st_mtime_ns, st.st_ctime_ns) != (e.size, e.mtime_ns, e.ctime_ns):
        raise UsageError(f"--workspace: {path} changed while the layer was built; build again")


def _read_small(path: str, e: Entry) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        data = os.read(fd, e.size) if e.size else b""
        while len(data) < e.size:
            more = os.read(fd, e.size - len(data))
            if not more:
                break
            data += more
        _check_unchanged(os.fstat(fd), e, path)
    finally:
        os.close(fd)
    return data


def stream(
    workspace: Workspace,
    compression: Compression,
    out: LayerDigests,
    entries: Iterable[Entry] | None = None,
    whiteouts: Iterable[str] = (),
) -> Iterator[bytes]:
    """The compressed layer of ``entries`` (default: the whole workspace), piece by piece;
    ``out`` holds the digests once it is exhausted."""
    chosen = workspace.entries if entries is None else tuple(entries)
    tar_hash, gz_hash = hashlib.sha256(), hashlib.sha256()
    digests: dict[str, str] = {}
    tar_size = size = 0
    piece_size = chunk_size(compression)
    with ThreadPoolExecutor(1, thread_name_prefix="hash") as hasher:

        def hashed(chunks: Iterator[bytearray]) -> Iterator[bytearray]:
            nonlocal tar_size
            behind: deque[Future[None]] = deque()
            for chunk in chunks:
                behind.append(hasher.submit(tar_hash.update, chunk))
                if len(behind) * piece_size > HASH_BEHIND:  # the chunks it holds are memory
                    behind.popleft().result()
                tar_size += len(chunk)
                out.tar_size = tar_size  # so far: what a progress bar counts
                yield chunk

        tar = tar_chunks(workspace.root, chosen, hasher, digests, whiteouts, piece_size)
        for piece in compressed(hashed(tar), compression):
            gz_hash.update(piece)
            size += len(piece)
            yield piece
    out.file_digests = digests
    out.diff_id = f"sha256:{tar_hash.hexdigest()}"
    out.digest = f"sha256:{gz_hash.hexdigest()}"
    out.size, out.tar_size = size, tar_size


def tar_size_estimate(entries: Iterable[Entry], whiteouts: Iterable[str] = ()) -> int:
    """The layer's tar size before it is made, for a progress bar's total: a block per
    header, files rounded up to whole blocks, the end marker. Names too long for a ustar
    header take a few blocks more each (PAX), so it may fall a little short."""
    block = tarheader.BLOCK
    total = block + len(tuple(whiteouts)) * block + len(tarheader.END)  # the top directory
    for e in entries:
        size = e[4] if e[1] == FILE else 0
        total += block + -(-size // block) * block
    return total


def uncompressed(
    workspace: Workspace, entries: Iterable[Entry] | None = None, under: str = WORKSPACE_DIR
) -> Iterator[bytes]:
    """The layer's tar, uncompressed (a Docker build context starts from it)."""
    chosen = workspace.entries if entries is None else tuple(entries)
    with ThreadPoolExecutor(1) as hasher:
        for chunk in tar_chunks(workspace.root, chosen, hasher, {}, under=under):
            yield bytes(chunk)


def file_digests(root: str, entries: Iterable[Entry]) -> dict[str, str]:
    """sha256 of each file's content, read as the layer reads it (for a lookup that must know
    the content before it builds)."""
    found = {}
    buffer = bytearray(CHUNK)
    for e in entries:
        path = os.path.join(root, e.path)
        if e.size <= SMALL_FILE:
            found[e.path] = hashlib.sha256(_read_small(path, e)).hexdigest()
            continue
        h, view = hashlib.sha256(), memoryview(buffer)
        with open(path, "rb", buffering=0) as f:
            while got := f.readinto(view):
                h.update(view[:got])
            _check_unchanged(os.fstat(f.fileno()), e, path)
        found[e.path] = h.hexdigest()
    return found
