"""The launcher's errors: the CLI maps each kind to an exit code and one line on stderr; and
the suggestion a bad-input line makes for a misspelt name (a job file's key, a command, an
option), here at the bottom so that the job file and the command line say it alike."""

from __future__ import annotations

from collections.abc import Sequence


def closest(word: str, allowed: Sequence[str]) -> str | None:
    """The allowed name ``word`` is most likely a misspelling of, if one is close enough."""
    import difflib  # only on the way to an error: not on every command's import

    close = difflib.get_close_matches(word, allowed, n=1)
    return close[0] if close else None


def did_you_mean(word: str, allowed: Sequence[str]) -> str:
    """``did you mean NAME?`` for a misspelt ``word``, else the names that are allowed."""
    close = closest(word, allowed)
    return f"did you mean {close}?" if close else "allowed: " + ", ".join(allowed)


class LauncherError(Exception):
    """Base class; ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class UsageError(LauncherError):
    """Bad input: a flag, a value, or a cluster that cannot run what was asked. Nothing was
    created or submitted."""

    exit_code = 2


class RemoteError(LauncherError):
    """AWS or a registry refused or failed a request."""

    exit_code = 1


class FunctionError(LauncherError):
    """A remote call failed without an exception of its own to raise here: the job ended with
    no result (cancelled, timed out, a lost node), or the function raised something that could
    not be rebuilt on this side. ``traceback``: the remote one, when there is one."""

    def __init__(self, message: str, traceback: str = "") -> None:
        super().__init__(message + (f"\n{traceback}" if traceback else ""))
        self.traceback = traceback


# The codes AWS answers a request the caller may not make with: the generic one, EC2's, and
# Service Quotas' and Auto Scaling's (as their API references name them).
DENIED_CODES = ("AccessDenied", "UnauthorizedOperation", "NotAuthorized")


def is_denied(exc: RemoteError) -> bool:
    """Whether AWS refused a request for want of permission (the caller may read around it)."""
    return any(code in str(exc) for code in DENIED_CODES)


class Throttled(RemoteError):
    """AWS refused a request for its rate quota, or could not answer it just now (a 5xx, a
    dropped connection): the same request may succeed after a pause (``launcher.aws.pacing``)."""


class UnsafeDirectory(LauncherError):
    """A directory the launcher would keep the user's files in is not the user's alone (another
    user owns it, may write it, or it is a symbolic link): the machine's setup, not the input."""

    exit_code = 1
