"""Where the user's jobs and AWS endpoint may be instead of where the launcher looks: an
environment file in the current directory, ``./.demo/env`` (``make demo`` writes it, for a new
shell to ``source``), that names another local state directory or AWS endpoint than the ones
in use. A shell that never sourced it sees no local jobs; one that sourced the file of an
earlier run reaches an endpoint nobody serves any more. Each says so in its one line.

Generic and cheap: only ``./.demo/env`` is read (never a file elsewhere), only its ``export
NAME=VALUE`` lines, only when a job is unknown, a listing is empty or an endpoint does not
answer, and once a process. The API hands these functions to the floors that meet those cases
(``Store(unknown_hint=...)``, ``Aws(unreachable_hint=...)``), so the backends know no file of
the demo's.
"""

from __future__ import annotations

import functools
import os
import shlex
from pathlib import Path

ENV_FILE = Path(".demo") / "env"
MAX_BYTES = 64 * 1024  # the demo's file is under 1 KiB; anything far larger is not it
ENDPOINT_ENV = "AWS_ENDPOINT_URL"
SOURCE = f"run 'source {ENV_FILE}' first"


@functools.lru_cache(maxsize=1)
def settings() -> dict[str, str]:
    """The variables ``./.demo/env`` exports ({} when there is no such file, or it cannot be
    read or parsed)."""
    try:
        with open(ENV_FILE, "rb") as file:
            text = file.read(MAX_BYTES + 1)
    except OSError:
        return {}
    if len(text) > MAX_BYTES:
        return {}
    found = {}
    for line in text.decode(errors="replace").splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            name, _, value = words[1].partition("=")
            found[name] = value
    return found


def _same_directory(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def local_state_hint(in_use: Path) -> str | None:
    """For an unknown local job or an empty listing read from ``in_use``: where ``./.demo/env``
    keeps its jobs instead, and what to run (None when it names no other directory)."""
    from launcher.local.state import STATE_ENV  # the local backend's, on this path only

    named = settings().get(STATE_ENV)
    if not named or _same_directory(named, in_use):
        return None
    return f"the demo's jobs are in {_shown(named)} ({ENV_FILE}): {SOURCE}"


def unreachable_hint(endpoint: str) -> str | None:
    """For an AWS endpoint on this machine that does not answer: whether it is the one
    ``./.demo/env`` names (the demo was stopped: ``make demo`` starts it again) or another
    (a shell left from an earlier demo: source the file again); None without such a file."""
    named = settings().get(ENDPOINT_ENV)
    if not named:
        return None
    if named.rstrip("/") == endpoint.rstrip("/"):
        return f"it is the demo's ({ENV_FILE}), which is stopped: run 'make demo' to start it again"
    return f"the demo's is {named} ({ENV_FILE}): {SOURCE}"


def _shown(path: str) -> str:
    """A path as the user types it: relative when under the current directory."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return path
