"""A job is never lost to Ctrl-C: the commands that follow or wait for a job (``run --follow``,
``logs --follow``, ``wait``) name it as soon as it exists and, when Ctrl-C stops them, say
that the job goes on and how to follow it again or cancel it, as ``gh run watch`` and
``kubectl logs -f`` leave a run or a pod running.

Ctrl-C stops the launcher only. A job on AWS runs in AWS; a local job's containers belong to
the Docker engine and its supervisor runs in a session of its own
(``launcher.local.backend``), so the terminal's SIGINT reaches neither and the job is not
cancelled. Commands name a job by its id alone (each backend knows its own ids, a local job
needs no ``--local``); an AWS job's commands carry the ``--profile`` and ``--region`` given,
without which they would look in another account or Region.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from launcher.progress import Event, EventKind, ProgressFn, say

if TYPE_CHECKING:
    from launcher.api import Job

INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C ended


@dataclass(frozen=True)
class Again:
    """How a person names a job in a later command: the options of ``launcher`` itself that
    find it, its id, and the part of it they looked at (an array's child, one node)."""

    job_id: str
    top: tuple[str, ...] = ()
    index: int | None = None
    node: int | None = None

    @classmethod
    def of(
        cls,
        args: argparse.Namespace,
        job: Job,
        index: int | None = None,
        node: int | None = None,
    ) -> Again:
        """``job`` (as the command named it: an array's parent with ``index``), found with
        the options of ``launcher`` in ``args``."""
        from launcher.job.info import BackendName

        top: list[str] = []
        if job.backend.name is not BackendName.LOCAL:  # AWS: which account and Region
            for option, value in (("--profile", args.profile), ("--region", args.region)):
                if value:
                    top += [option, value]
        return cls(job.job_id, tuple(top), index, node)

    def _command(self, verb: str, *options: str, node: bool = False) -> str:
        """``launcher [TOP] VERB OPTIONS JOB [--index K] [--node N]``, quoted for a shell."""
        scope = [] if self.index is None else ["--index", str(self.index)]
        if node and self.node is not None:
            scope += ["--node", str(self.node)]
        return shlex.join(["launcher", *self.top, verb, *options, self.job_id, *scope])

    def follow(self) -> str:
        return self._command("logs", "--follow", node=True)

    def wait(self) -> str:
        return self._command("wait")

    def cancel(self) -> str:
        """The job named, or the array's child ``--index`` named (no node stops alone)."""
        return self._command("cancel")


def submitted(again: Again, progress: ProgressFn) -> None:
    """The job's id and the command that follows it, as soon as it exists (stdout gets the id
    at the end, which a ``--follow`` stopped by Ctrl-C would otherwise never show)."""
    say(progress)(f"submitted {again.job_id} (follow: {again.follow()})")


def stopped(again: Again, progress: ProgressFn, *, waiting: bool = False) -> int:
    """What Ctrl-C left: the job, not cancelled, with the commands that go on following it
    (``logs --follow``; ``waiting``: ``wait``) and that cancel it. The exit status to return."""
    doing, label, resume = (
        ("waiting", "wait again", again.wait())
        if waiting
        else ("following", "follow it again", again.follow())
    )
    width = len(label) + 1
    _tell(
        progress,
        f"launcher: stopped {doing}; job {again.job_id} goes on (Ctrl-C does not cancel it)",
        f"  {label + ':':<{width}} {resume}",
        f"  {'cancel it:':<{width}} {again.cancel()}",
    )
    return INTERRUPTED


def not_submitted(progress: ProgressFn) -> int:
    """Ctrl-C before a job existed (while the image was built, say)."""
    _tell(progress, "launcher: interrupted before the job was submitted; nothing runs")
    return INTERRUPTED


def _tell(progress: ProgressFn, *lines: str) -> None:
    """``lines`` on a clean row of a terminal: a waiting line drawn in place is finished, and
    the ``^C`` the terminal echoed is wiped rather than written after."""
    progress(Event("", EventKind.WAITED))
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[K")
    for line in lines:
        say(progress)(line)
