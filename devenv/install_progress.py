"""pip's output as progress a person can follow: ``make demo``'s first install takes a minute or
two, and ``pip -q`` showed nothing for all of it while pip's own output is a hundred lines.

    pip install ... 2>&1 | python3 -m devenv.install_progress

On a terminal one line is redrawn (packages found so far, megabytes downloaded, seconds); piped,
a line every ten packages. Errors pass through whole, followed by pip's last lines. Standard
library only: it runs on the system Python before the venv has anything in it.
"""

from __future__ import annotations

import re
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import TextIO

COLLECTING = re.compile(r"^(Collecting|Processing) (\S+)")
DOWNLOADED = re.compile(r"^\s*Downloading \S+ \((\d+(?:\.\d+)?) ([kM]B)\)")
INSTALLING = re.compile(r"^Installing collected packages: (.*)")
DONE = re.compile(r"^Successfully installed (.*)")
# pip's warnings are about its own configuration (an index location it skips, its version):
# only errors pass through.
LOUD = re.compile(r"^(ERROR|error)\b|^\s*×")


def follow(
    lines: TextIO, out: TextIO, tty: bool, clock: Callable[[], float] = time.monotonic
) -> int:
    """Reads pip's lines, writes progress; 1 when pip's output ended in an error."""
    start, found, megabytes, drawn = clock(), 0, 0.0, False
    tail: deque[str] = deque(maxlen=30)
    failed = False

    def say(text: str, redraw: bool = False) -> None:
        nonlocal drawn
        if redraw and tty:
            out.write(f"\r  {text}\033[K")
            drawn = True
        else:
            out.write(("\n" if drawn else "") + f"  {text}\n")
            drawn = False
        out.flush()

    for raw in lines:
        line = raw.rstrip("\n")
        tail.append(line)
        elapsed = clock() - start
        if m := COLLECTING.match(line):
            found += 1
            if tty or found % 10 == 0:
                say(f"{found} packages found, {megabytes:.0f} MB downloaded, {elapsed:.0f} s", True)
        elif m := DOWNLOADED.match(line):
            megabytes += float(m[1]) / (1000 if m[2] == "kB" else 1)
        elif m := INSTALLING.match(line):
            say(f"installing {len(m[1].split(', '))} packages ({elapsed:.0f} s so far)")
        elif m := DONE.match(line):
            say(f"installed {len(m[1].split())} packages in {elapsed:.0f} s")
        elif LOUD.match(line):
            failed = True
            say(line.strip())
    if failed:
        out.write("  pip's last lines:\n" + "".join(f"    {line}\n" for line in tail))
    if drawn:
        out.write("\n")
    out.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(follow(sys.stdin, sys.stdout, sys.stdout.isatty()))
