"""A job's exit code in words, for the codes that say more than "the command failed".

The shell's own (126: found but not executable, 127: not found), a signal's (128+N, as every
shell reports a process a signal ended) and the node prelude's (launcher.node.prelude: a lost
node, a bad host, a check that stopped the node before the command). Any other code is the
user's program's own, and only it knows what it means: no words for those.
"""

from __future__ import annotations

import signal

from launcher.node.prelude import BAD_HOST_EXIT, EFA_REQUIRED_EXIT, NODE_LOST_EXIT

NOT_EXECUTABLE = 126  # POSIX: the command was found but could not be run
NOT_FOUND = 127  # POSIX: the command was not found

_WORDS = {
    NOT_EXECUTABLE: "the command could not be run (not executable)",
    NOT_FOUND: "the command was not found in the image",
    NODE_LOST_EXIT: "a node was lost or never started",
    EFA_REQUIRED_EXIT: "the node's checks stopped it before the command (the image or the "
    "job's settings)",
    BAD_HOST_EXIT: "a bad host (a GPU or EFA device missing or faulty)",
    128 + signal.SIGKILL: "killed (SIGKILL: out of memory, or stopped by force)",
    128 + signal.SIGTERM: "stopped (SIGTERM)",
}


def meaning(code: int | None) -> str | None:
    """``killed (SIGKILL: ...)`` for 137, ``ended by SIGSEGV`` for 139; None for 0, for a code
    only the program knows the meaning of, and for no code."""
    if code is None or code == 0:
        return None
    if code in _WORDS:
        return _WORDS[code]
    if 128 < code < 128 + signal.NSIG:
        try:
            return f"ended by {signal.Signals(code - 128).name}"
        except ValueError:  # a number no signal has here
            return None
    return None
