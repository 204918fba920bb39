"""Bytes a process tree sends and receives over TCP, counted by strace from outside it.

/proc/PID/io counts read() and write(), not the recv()/send() calls sockets are used with,
so it cannot say what went over the network. strace (Debian's) follows the process and its
children (-f), names each descriptor (-yy: ``<TCP:[a:p->b:q]>``) and the bytes each call
moved (its return value); the sum over TCP descriptors is what crossed the machine's sockets.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

_CALLS = "read,write,readv,writev,sendto,recvfrom,sendmsg,recvmsg,sendfile"
_START = re.compile(r"^(\d+) +(\w+)\((\d+)<([^>]*)>")
_DONE = re.compile(r"= (\d+)(?: |$)")
_RESUMED = re.compile(r"^(\d+) +<\.\.\. (\w+) resumed>")


def tcp_bytes(log: str) -> int:
    """The bytes that TCP descriptors moved, from an ``strace -f -yy`` log."""
    total, pending = 0, {}
    for line in log.splitlines():
        if (start := _START.match(line)) is not None:
            pid, tcp = start[1], start[4].startswith("TCP")
            if line.rstrip().endswith("<unfinished ...>"):
                pending[pid] = tcp
                continue
            if tcp and (done := _DONE.search(line)) is not None:
                total += int(done[1])
        elif (
            (resumed := _RESUMED.match(line)) is not None
            and pending.pop(resumed[1], False)
            and (done := _DONE.search(line)) is not None
        ):
            total += int(done[1])
    return total


def run_counted(
    argv: list[str], log: Path, **kwargs: Any
) -> tuple[subprocess.CompletedProcess[Any], int]:
    """Run ``argv`` under strace; its result and the TCP bytes of it and its children."""
    strace = shutil.which("strace")
    if strace is None:
        raise FileNotFoundError("strace (Debian package strace)")
    command = [strace, "-f", "-qq", "-yy", "-s", "0", "-e", f"trace={_CALLS}", "-o", str(log)]
    result = subprocess.run([*command, "--", *argv], **kwargs)
    return result, tcp_bytes(log.read_text(errors="replace"))
