"""Blob uploads that survive the network: chunked, each chunk retried, resumed where the
registry says it stopped.

The OCI distribution spec's chunked upload: the blob goes in ``PATCH`` requests of
``CHUNK`` bytes, each with its ``Content-Range``, and the last chunk in the closing
``PUT ?digest=`` (a registry that has the upload complete answers 201). A chunk whose request
fails (a dropped connection, a 5xx, a 429) is sent again, after asking the registry how much
of the upload it holds (``GET`` on the upload's location: ``Range: 0-<last byte>``, which the
spec says a registry MUST answer), from that byte when it lies inside the chunk. Only the
chunk in flight is kept in memory, so a 5 GB layer cut near its end resumes near its end,
and memory stays three chunks: the next one is made while a chunk is on the wire
(``read_ahead``), so the source never waits for the registry's answer.

A registry that cannot say (distribution 2.8, Debian's ``docker-registry``, invalidates and
cancels an upload whose PATCH was cut after its first byte: every later request on it answers
``BLOB_UPLOAD_INVALID``; distribution 3 fixed it) loses the session: the blob then starts
again in a new one, from the source (``pieces_from`` is called again), up to ``SESSIONS``
times.

Where a chunk went is counted from the registry's 202 answers, never from the ``Range`` a
PATCH answer carries: ECR's stays at the first chunk's end (aws/containers-roadmap#2831).
``CHUNK`` is 8 MiB: ECR's layer parts must be at least 5 MiB (all but the last) and at most
10 MiB (ECR service quotas). ECR also wants the final chunk in the closing PUT rather than
an empty PUT after the last PATCH, which every registry accepts (spec: "the closing PUT MAY
include the final chunk").
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlencode

from launcher.image.manifest import digest_of
from launcher.image.registry import RegistryError

if TYPE_CHECKING:
    from launcher.image.registry import Registry

CHUNK = 8 << 20
ATTEMPTS = 5  # per chunk
SESSIONS = 3  # upload sessions per blob
_LOST = (400, 404)  # the upload session is gone (BLOB_UPLOAD_INVALID / _UNKNOWN)
T = TypeVar("T")
Timed = Callable[[int, float], None]  # (bytes, seconds) of one request that carried a chunk


class SessionLost(RegistryError):
    """The registry no longer knows the upload: it must start again in a new session."""


class ChunkTooLarge(RegistryError):
    """The registry refused the first chunk for its size."""


def _stream(
    registry: Registry, location: str, pieces: Iterable[bytes], on_bytes: Callable[[int], None]
) -> str:
    def counted() -> Iterator[bytes]:
        for piece in pieces:
            on_bytes(len(piece))
            yield piece

    response = registry.request(
        "PATCH",
        location,
        ok=(202,),
        retry=False,
        data=counted(),
        headers={"Content-Type": "application/octet-stream"},
    )
    return registry.location_of(response)


def blocks(pieces: Iterable[bytes], size: int = CHUNK) -> Iterator[bytes]:
    """``pieces`` regrouped into blocks of ``size`` bytes (the last one shorter, or empty
    for an empty blob)."""
    buffer = bytearray()
    for piece in pieces:
        buffer += piece
        while len(buffer) >= size:
            with memoryview(buffer) as view:  # one copy, not a slice's and then bytes'
                block = bytes(view[:size])
            del buffer[:size]
            yield block
    yield bytes(buffer)


_END = object()


def read_ahead(items: Iterable[T]) -> Iterator[T]:
    """``items``, the next one made on another thread while the caller handles this one: the
    layer goes on being built while a chunk is on the wire (one more block of memory)."""
    it = iter(items)
    with ThreadPoolExecutor(1, thread_name_prefix="read-ahead") as ahead:
        coming = ahead.submit(next, it, _END)
        while (item := coming.result()) is not _END:
            coming = ahead.submit(next, it, _END)
            yield item  # type: ignore[misc]


def upload(
    registry: Registry,
    repo: str,
    location: str | Callable[[], str],
    pieces_from: Callable[[], Iterable[bytes]],
    digest: Callable[[], str],
    on_bytes: Callable[[int], None],
    *,
    timed: Timed | None = None,
) -> str:
    """Send the blob ``pieces_from()`` yields; return its digest once the registry has it.
    ``location`` may be a function that opens the session: it is called once the first
    chunk is ready, so a caller can build while it checks what must hold before a byte goes
    up. ``timed`` hears (bytes, seconds) of each request that carried a chunk, from its
    first byte to the registry's answer: the link's pace, without the time the blob took to
    make (``launcher.image.costs``); the streamed fallback is not timed."""
    for session in range(SESSIONS):
        sent = [0]

        def counted(n: int, sent: list[int] = sent) -> None:
            sent[0] += n
            on_bytes(n)

        try:
            _send(registry, repo, location, pieces_from(), digest, counted, timed)
            return digest()
        except SessionLost as lost:
            if session == SESSIONS - 1:
                raise RegistryError(f"{lost}; gave up after {SESSIONS} upload sessions") from None
            on_bytes(-sent[0])  # progress starts again with the blob
            location = registry.start_upload(repo)
    raise AssertionError("unreachable")


def put_blob(registry: Registry, repo: str, data: bytes) -> str:
    """A small blob (a config) in one monolithic POST + PUT; its digest."""
    start = registry.start_upload(repo)
    return upload(registry, repo, start, lambda: [data], lambda: digest_of(data), lambda n: None)


def _send(
    registry: Registry,
    repo: str,
    opened: str | Callable[[], str],
    pieces: Iterable[bytes],
    digest: Callable[[], str],
    on_bytes: Callable[[int], None],
    timed: Timed | None = None,
) -> None:
    offset, pending, location = 0, None, ""
    chunks = read_ahead(blocks(pieces))
    for block in chunks:
        if not block and pending is not None:
            break  # the blob ended on a block boundary: that block closes the upload
        if pending is not None:
            location = location or (opened() if callable(opened) else opened)
            started = time.perf_counter()
            try:
                location = _patch(registry, location, pending, offset)
            except ChunkTooLarge:
                # GHCR refuses chunks over 4 MiB (416, "the request body is too large"):
                # the rest goes as Docker pushes, one streamed PATCH, not resumable.
                rest = itertools.chain((pending, block), chunks)
                location = _stream(registry, location, rest, on_bytes)
                _put(registry, repo, location, b"", 0, digest())
                return
            if timed is not None:
                timed(len(pending), time.perf_counter() - started)
            offset += len(pending)
            on_bytes(len(pending))
        pending = block
    last = pending or b""
    location = location or (opened() if callable(opened) else opened)
    started = time.perf_counter()
    _put(registry, repo, location, last, offset, digest())
    if timed is not None:
        timed(len(last), time.perf_counter() - started)
    on_bytes(len(last))


def stored(registry: Registry, location: str) -> tuple[str, int] | None:
    """(the upload's location, bytes the registry holds), or None when it cannot say now;
    SessionLost when it no longer knows the upload."""
    try:
        response = registry.request("GET", location, ok=(204,))
    except RegistryError as exc:
        if exc.status in _LOST:
            raise SessionLost(str(exc), exc.status) from None
        return None
    held = response.headers.get("Range", "")
    try:
        end = int(held.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return None
    # "0-0" is distribution's answer for an empty upload too: read it as nothing held.
    return registry.location_of(response), (end + 1 if end else 0)


def _retry(
    registry: Registry, location: str, offset: int, length: int, attempt: int
) -> tuple[str, int]:
    """Before another attempt at bytes [offset, offset+length): wait, then the location and
    the position in the chunk to send from (0 unless the registry holds part of it)."""
    time.sleep(registry.backoff * 2 ** (attempt - 1))
    found = stored(registry, location)
    if found is None:
        return location, 0
    location, held = found
    return location, held - offset if offset <= held <= offset + length else 0


def _patch(registry: Registry, location: str, data: bytes, offset: int) -> str:
    """One chunk, at ``offset`` of the blob; the location to send the next one to."""
    start, failure = 0, ""
    for attempt in range(ATTEMPTS):
        if attempt:
            location, start = _retry(registry, location, offset, len(data), attempt)
            if start == len(data):
                return location  # the failed request had delivered it all
        try:
            response = registry.request(
                "PATCH",
                location,
                ok=(201, 202),  # ECR answers intermediate chunks with 201
                retry=False,
                data=data[start:],
                headers={
                    "Content-Type": "application/octet-stream",
                    "Content-Range": f"{offset + start}-{offset + len(data) - 1}",
                },
            )
            return registry.location_of(response)
        except RegistryError as exc:
            if offset == 0 and attempt == 0 and exc.status in (413, 416):
                raise ChunkTooLarge(str(exc), exc.status) from None
            _raise_unless_worth_retrying(exc, attempt)
            failure = str(exc)
    raise RegistryError(
        f"{failure}; gave up on bytes {offset}-{offset + len(data) - 1} after {ATTEMPTS} attempts"
    )


def _raise_unless_worth_retrying(exc: RegistryError, attempt: int) -> None:
    """A failed chunk request is tried again when the network or the registry failed, or the
    registry's offset differs (416); a session it no longer knows after a failed attempt is
    lost; anything else (refused, unauthorised) is final."""
    if exc.transient or exc.status == 416:
        return
    if attempt and exc.status in _LOST:
        raise SessionLost(str(exc), exc.status) from None
    raise exc


def _put(
    registry: Registry, repo: str, location: str, data: bytes, offset: int, digest: str
) -> None:
    """The closing PUT with the final chunk; a PUT whose answer was lost is checked with a
    HEAD of the blob."""
    start, failure = 0, ""
    for attempt in range(ATTEMPTS):
        if attempt:
            if registry.has_blob(repo, digest):
                return  # the lost answer was a success
            location, start = _retry(registry, location, offset, len(data), attempt)
        headers = {"Content-Type": "application/octet-stream"}
        if offset + start and start < len(data):
            headers["Content-Range"] = f"{offset + start}-{offset + len(data) - 1}"
        sep = "&" if "?" in location else "?"
        try:
            registry.request(
                "PUT",
                f"{location}{sep}{urlencode({'digest': digest})}",
                ok=(201,),
                retry=False,
                data=data[start:],
                headers=headers,
            )
            return
        except RegistryError as exc:
            _raise_unless_worth_retrying(exc, attempt)
            failure = str(exc)
    raise RegistryError(f"{failure}; gave up on the upload of {digest} after {ATTEMPTS} attempts")
