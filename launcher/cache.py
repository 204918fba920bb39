"""Where the launcher keeps what it remembers between runs: the user's XDG cache directory.

Everything kept there is a cache: losing it costs the next run some work, never a wrong
answer, so reads tolerate any damage and writes are atomic and best effort.
"""

from __future__ import annotations

import os
from pathlib import Path

from launcher import private
from launcher.errors import UnsafeDirectory

# marshal's format for what is kept here: version 2 has no back-references (3 added them), so
# it writes 50,000 stat tuples five times faster than the default, and its bytes depend on
# the values alone (never on reference counts). Any version reads back.
MARSHAL_VERSION = 2


def directory() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "efa-batch"


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` whole (a reader sees the old or the new file), the user's alone
    (``launcher.private``); errors are ignored, a cache directory not the user's alone too."""
    try:
        private.directory(path.parent, own_from=directory())
        private.write(path, data)
    except (OSError, UnsafeDirectory):
        pass
