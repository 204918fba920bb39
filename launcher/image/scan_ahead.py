"""The workspace's stat walk, started in a child process while the CLI imports what a build
needs.

A cold ``launcher build`` of 50,000 files spent its first 0.2 s importing (the registry
client, the compressors, the API) and the next 0.3 s walking the workspace (one ``lstat`` an
entry, the ``.dockerignore`` screens), one after the other on one core while the others
waited. A thread cannot overlap them: both hold the GIL almost throughout (the walk on a
thread while the main thread imported measured slower than both in turn). A forked child
can: it shares what is already imported, walks, and hands the entries back through an
anonymous memory file (``memfd_create(2)``), which it fills and leaves without waiting for a
reader. Those bytes are the workspace's ``listing``, so its fingerprint (``stamps``) is their
hash, not a second marshalling; the paths that look like secrets follow them. The garbage
collector is paused in the child (it exits right after) and here while 50,000 entries are
rebuilt (nothing in them can be garbage; the collections it would run cost as much as the
rest): about 0.05 s on this side.

A caller that needs the walk before the build does (to say what it left out) takes it with
``held``, which hands that very walk to the build's ``scanned``: one walk, not two.

The child only speeds things up. Whatever stops its walk (an unreadable directory, a FIFO in
the workspace) ends it with a non-zero status, and ``scanned`` walks again in-process, where
the error is raised as it always was. It forks only where fork without exec is sound: on
Linux, from a process with one thread (POSIX fork(2): the child is "created with a single
thread"; a lock another thread held would stay held in it). The library never forks on its
own: the CLI asks, before it starts any thread.
"""

from __future__ import annotations

import contextlib
import gc
import marshal
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from launcher import cache
from launcher.image.workspace import Workspace, scan


@dataclass(frozen=True)
class _Child:
    pid: int
    fd: int  # the memory file the child writes its walk into


_STARTED: dict[str, _Child] = {}  # absolute workspace path -> its walk under way
_HELD: dict[str, Workspace] = {}  # absolute workspace path -> a walk ``held`` hands on
# The memory file: the walk's start time (``Workspace.scanned_ns``), the listing's length,
# the listing, then the paths left out and brought back (marshal: two tuples).
_STARTED_NS = 8
_LENGTH = 8


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def start(root: str | os.PathLike[str]) -> int | None:
    """Walk ``root`` in a child process; its pid, or None where this process may not fork
    (then ``scanned`` walks in-process)."""
    threading = sys.modules.get("threading")  # not imported: no thread was started by it
    if not sys.platform.startswith("linux") or (threading and threading.active_count() > 1):
        return None
    path = os.path.abspath(root)
    if path in _STARTED or not os.path.isdir(path):
        return None
    fd = os.memfd_create("launcher-scan", os.MFD_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # the child: walk, write, leave without the parent's cleanup
        status = 1
        try:
            with _no_collection():
                found = scan(path)
                listing = found.listing()
            with open(fd, "wb", closefd=False) as out:
                out.write(found.scanned_ns.to_bytes(_STARTED_NS, "little"))
                out.write(len(listing).to_bytes(_LENGTH, "little"))
                out.write(listing)
                named = (found.left_out, found.brought_back)
                out.write(marshal.dumps(named, cache.MARSHAL_VERSION))
            status = 0
        finally:
            os._exit(status)
    _STARTED[path] = _Child(pid, fd)
    return pid


def scanned(root: str | os.PathLike[str]) -> Workspace:
    """``workspace.scan(root)``: the walk ``held`` hands on, or the walk ``start`` began,
    when one did and it succeeded."""
    path = os.path.abspath(root)
    kept = _HELD.pop(path, None)
    if kept is not None:
        return kept
    child = _STARTED.pop(path, None)
    if child is not None:
        try:
            exited = os.waitstatus_to_exitcode(os.waitpid(child.pid, 0)[1])
        except ChildProcessError:  # reaped elsewhere (a SIGCHLD handler): nothing vouches
            exited = -1
        with open(child.fd, "rb") as walked:
            if exited == 0:
                walked.seek(0)
                data = memoryview(walked.read())
                started = int.from_bytes(data[:_STARTED_NS], "little")
                at = _STARTED_NS + _LENGTH
                end = at + int.from_bytes(data[_STARTED_NS:at], "little")
                left_out, brought_back = marshal.loads(data[end:])
                with _no_collection():
                    return Workspace.from_listing(
                        os.fspath(root), data[at:end], started, left_out, brought_back
                    )
    return scan(root)


@contextlib.contextmanager
def held(root: str | os.PathLike[str]) -> Iterator[Workspace]:
    """The walk of ``root`` (``scanned``), handed on to the first ``scanned(root)`` within the
    block, so a caller may look at what the build will ship without a second walk. What the
    block did not take is dropped when it ends: a later build walks again."""
    path = os.path.abspath(root)
    walked = scanned(root)
    _HELD[path] = walked
    try:
        yield walked
    finally:
        if _HELD.get(path) is walked:
            del _HELD[path]
