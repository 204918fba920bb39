"""Layer compression on every core: the layer is cut into fixed chunks, each compressed on
its own, and the pieces are written in order.

gzip: each chunk is one gzip member. RFC 1952 (2.2) defines a gzip file as "a series of
members", and every reader a runtime uses reads them in sequence: Go's ``compress/gzip`` does
by default ("the concatenation of a sequence of gzipped files is treated as equivalent to the
gzip of the concatenation of the sequence. This is standard behavior for gzip readers",
``Reader.Multistream``, which containerd and Docker use), as do zlib's gzip, pigz and
Python's ``gzip``. A chunk that does not shrink is written as stored deflate blocks (still
valid deflate, RFC 1951 3.2.4): zlib spends as long on random bytes at level 1 as at 6 and
saves nothing. The decision is per chunk, from what a sample of its bytes does at level 1.

zstd: each chunk is one zstd frame; RFC 8878 (3.1) makes compressed data "one or more
frames", and zstd itself writes raw blocks for data that does not compress, so no sampling
is needed. The ``zstandard`` bindings: maintained, wheels for every platform Python runs the
launcher on, and their compressor releases the GIL, so a thread pool uses every core
(the standard library has zstd only from Python 3.14).

Chunks are cut at fixed offsets of the uncompressed stream and compressed with fixed
settings, so the output depends on the input alone, never on the number of cores. A gzip
member holds 1 MiB: deflate's window is 32 KiB, so a larger member would compress no better,
and smaller ones keep both cores busy sooner on a small workspace and the stored-or-deflated
decision close to the data. A zstd frame holds 4 MiB: zstd is fast enough that what each
frame costs (its set-up, and the chunk's trip through the threads and hashes) shows, and a
larger frame lets its window reach further (50,000 small files: output 7% smaller than with
1 MiB frames, cold builds 4% faster, medians of 8 alternating runs), still within the 8 MB
window RFC 8878 (3.1.1.1.2) recommends every decoder support.

The compression threads run at a lower priority than the rest of the process. On many small
files the critical path is the one thread that frames the tar (Python, one file at a time);
with as many compressors as cores, the scheduler gave it a fair share of a core it needed
whole, and the compressors it feeds then waited for it (50,000 files on two cores: 3.25 s,
2.93 s with the compressors at nice +10; medians of 8 alternating runs). Linux keeps a nice
value per thread (setpriority(2), "under the current Linux/NPTL implementation of POSIX
threads, the nice value is a per-thread attribute"); lowering it needs no privilege, and with
autogroup (sched(7)) it only orders threads of the same session. Elsewhere the threads run
as they are.
"""

from __future__ import annotations

import enum
import os
import struct
import sys
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

CHUNK = 1 << 20  # uncompressed bytes per gzip member (and the default tar chunk)
ZSTD_CHUNK = 4 << 20  # uncompressed bytes per zstd frame
GZIP_LEVEL = 6  # gzip's and pigz's default
ZSTD_LEVEL = 3  # zstd's default
# A chunk is stored when a level-1 deflate of samples from it saves less than this.
STORE_ABOVE = 0.95
_SAMPLE, _SAMPLES = 16 << 10, 4
NICER = 10  # the compression threads' nice value above the caller's (at most 19)
_GZIP_HEADER = b"\x1f\x8b\x08\x00" + b"\x00\x00\x00\x00" + b"\x00\xff"  # no name, mtime 0


class Compression(str, enum.Enum):
    GZIP = "gzip"
    ZSTD = "zstd"

    def __str__(self) -> str:
        return self.value


def chunk_size(compression: Compression) -> int:
    """Uncompressed bytes per gzip member or zstd frame (see the module's docstring)."""
    return ZSTD_CHUNK if compression is Compression.ZSTD else CHUNK


def workers() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS
        return max(1, os.cpu_count() or 1)


def yield_to_caller() -> None:
    """Lower the calling thread's priority by NICER (Linux; a no-op elsewhere). Lowering is
    always allowed, so this never fails the build."""
    if not sys.platform.startswith("linux"):
        return
    thread = threading.get_native_id()
    try:
        nice = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, nice + NICER))
    except OSError:  # a sandbox that forbids it: the same bytes, at the caller's priority
        pass


def shrinks(chunk: bytes | bytearray | memoryview) -> bool:
    """Whether deflate is worth running on ``chunk``: a few samples spread over it, each
    deflated at level 1 (cheap), save at least 5%."""
    view = memoryview(chunk)
    if len(view) <= _SAMPLE * _SAMPLES:
        samples = [view]
    else:
        step = len(view) // _SAMPLES
        samples = [view[i * step : i * step + _SAMPLE] for i in range(_SAMPLES)]
    size = sum(len(s) for s in samples)
    packed = sum(len(zlib.compress(s, 1)) for s in samples)
    return packed < STORE_ABOVE * size


def _deflate(data: bytes | bytearray | memoryview, level: int) -> bytes:
    engine = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return engine.compress(data) + engine.flush()


def gzip_member(chunk: bytes | bytearray | memoryview, level: int = GZIP_LEVEL) -> bytes:
    """One complete gzip member: deflated, or stored blocks when that is no smaller."""
    body = _deflate(chunk, level) if shrinks(chunk) else b""
    if not body or len(body) >= len(chunk):
        body = _deflate(chunk, 0)  # stored blocks: 5 bytes per 64 KiB
    trailer = struct.pack("<II", zlib.crc32(chunk) & 0xFFFFFFFF, len(chunk) & 0xFFFFFFFF)
    return b"".join((_GZIP_HEADER, body, trailer))


_local = threading.local()


def zstd_frame(chunk: bytes | bytearray | memoryview, level: int = ZSTD_LEVEL) -> bytes:
    """One zstd frame (content size in its header, no checksum: the digest covers it)."""
    compressor = getattr(_local, "zstd", None)
    if compressor is None:  # one per thread: a ZstdCompressor is not thread-safe
        import zstandard

        compressor = _local.zstd = zstandard.ZstdCompressor(level=level)
    return bytes(compressor.compress(chunk))


CODECS: dict[Compression, Callable[[Any], bytes]] = {
    Compression.GZIP: gzip_member,
    Compression.ZSTD: zstd_frame,
}


def in_order(
    fn: Callable[[Any], bytes], items: Iterable[Any], pool: ThreadPoolExecutor, ahead: int
) -> Iterator[bytes]:
    """``fn`` of each item on the pool, yielded in input order; at most ``ahead`` items in
    flight, so memory stays a few chunks whatever the input's size."""
    pending: deque[Future[bytes]] = deque()
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()


def compressed(chunks: Iterable[Any], compression: Compression) -> Iterator[bytes]:
    """Every chunk (of ``chunk_size(compression)`` bytes) compressed by ``compression``, on
    every core (at a lower priority than the caller's thread: see the module's docstring), in
    order. Up to two 1 MiB chunks a core are in flight, or one more chunk than cores."""
    count = workers()
    ahead = max(count + 1, (2 * count + 1) * CHUNK // chunk_size(compression))
    with ThreadPoolExecutor(count, "compress", initializer=yield_to_caller) as pool:
        yield from in_order(CODECS[compression], chunks, pool, ahead)
