"""``launcher logs``: a job's log lines, per node, escaped on a terminal unless ``--raw``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from launcher.cli import interrupt
from launcher.cli.base import Command, console, job_from, output_argument, print_err
from launcher.errors import UsageError

if TYPE_CHECKING:
    from launcher.api import Job


class Logs(Command):
    name = "logs"
    help = "print a job's logs, per node"
    examples = (
        'launcher logs --follow "$JOB"',
        'launcher logs --node 1 --since 10m "$JOB"',
        'launcher logs "$JOB" -o json | jq -r "select(.node == 0) | .message"',
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("job", help="job id (or QUEUE:JOB_ID)")
        parser.add_argument("--node", type=int, help="only this node (default: all)")
        parser.add_argument("--index", type=int, metavar="K", help="an array job's child K")
        parser.add_argument(
            "--follow", "-f", action="store_true", help="keep printing new lines until it ends"
        )
        parser.add_argument("--since", help="only the last DURATION, e.g. 10m")
        parser.add_argument(
            "--attempt", type=int, help="an earlier attempt's logs (1-based; default the latest)"
        )
        parser.add_argument(
            "--raw",
            action="store_true",
            help="pass the job's bytes to the terminal as they are, escape sequences included "
            "(by default a terminal gets control characters other than tab and newline as "
            "\\x1b-style escapes; piped output is never changed)",
        )
        output_argument(
            parser, 'one JSON object a line: {"node": N, "message": ..., "timestamp": ...}'
        )

    def run(self, args: argparse.Namespace) -> int:
        import time

        from launcher.cli.escapes import for_terminal, visible
        from launcher.job import jobspec

        since = time.time() - jobspec.parse_since(args.since) if args.since else None
        if args.attempt is not None and args.attempt < 1:
            raise UsageError(f"--attempt {args.attempt}: attempts count from 1")
        job = job_from(args, args.job)
        again = interrupt.Again.of(args, job, args.index, args.node)
        if args.index is not None:
            job = job.child(args.index)
        progress = console()
        lines = job.logs(
            node=args.node,
            since=since,
            follow=args.follow,
            attempt=args.attempt,
            waiting=progress,
        )
        escaped = for_terminal(sys.stdout, raw=args.raw)
        printed = False
        try:
            for line in lines:
                message = visible(line.message) if escaped else line.message
                if args.output == "json":  # JSON escapes control characters itself
                    text = json.dumps(
                        {"node": line.node, "message": line.message, "timestamp": line.timestamp}
                    )
                elif args.node is not None:
                    text = message
                else:
                    text = f"[node {line.node}] {message}"
                print(text, flush=True)
                printed = True
        except KeyboardInterrupt:
            if not args.follow:  # a read, not a follow: nothing goes on that was ours
                raise
            return interrupt.stopped(again, progress)
        if not printed and not args.follow:
            _not_started(job, again)
        return 0


def _not_started(job: Job, again: interrupt.Again) -> None:
    """A job with no lines because it has not started yet: why, in the line ``logs --follow``
    first draws (``launcher.job.waiting``: its state, reason, time waited and one fact, for
    one call), and how to follow it."""
    from launcher.job.info import JobState
    from launcher.job.waiting import WAITING_STATES
    from launcher.progress import Event, EventKind

    info = job.status()
    if info.state not in (*WAITING_STATES, JobState.STARTING):
        return
    heard: list[Event] = []
    job.backend.watch(heard.append).observe(info)  # STARTING: no line, the state says it
    why = next(
        (e.text for e in heard if e.kind is EventKind.WAITING),
        str(info.state) + (f" · {info.reason}" if info.reason else ""),
    )
    print_err(f"launcher: job {job.job_id} has not started, so it has no lines yet: {why}")
    print_err(f"  follow it: {again.follow()}")
