"""The launcher's errors: the CLI maps each kind to an exit code and one line on stderr."""

from __future__ import annotations


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


class Throttled(RemoteError):
    """AWS refused a request for its rate quota, or could not answer it just now (a 5xx, a
    dropped connection): the same request may succeed after a pause (``launcher.aws.pacing``)."""


class UnsafeDirectory(LauncherError):
    """A directory the launcher would keep the user's files in is not the user's alone (another
    user owns it, may write it, or it is a symbolic link): the machine's setup, not the input."""

    exit_code = 1
