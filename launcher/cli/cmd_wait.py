"""``launcher wait``: poll a job until it ends and exit with its result (0 only for SUCCEEDED)."""

from __future__ import annotations

import argparse

from launcher.cli import interrupt
from launcher.cli.base import Command, console, job_from, output_argument, print_err, print_json
from launcher.errors import UsageError


class Wait(Command):
    name = "wait"
    help = "wait for a job to end; exit 0 if it succeeded, 1 if not"
    notes = (
        "Asks for the job's state every --poll seconds (one DescribeJobs call each), prints "
        "its status line when it ends, and exits 0 when it SUCCEEDED, 1 when it FAILED or "
        "--timeout passed first."
    )
    examples = (
        'launcher wait "$JOB" && launcher run --workspace demo/workspace -- sh /workspace/'
        "rendezvous.sh",
        'launcher wait "$JOB" --timeout 2h',
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("job", help="job id (or QUEUE:JOB_ID)")
        parser.add_argument(
            "--timeout", help="give up after DURATION, e.g. 90m, exiting 1 (default: never)"
        )
        parser.add_argument(
            "--poll",
            type=float,
            default=10.0,
            metavar="SECONDS",
            help="seconds between two looks at the job (default 10)",
        )
        output_argument(parser, "the job's fields when it ends, with what_to_do (or null)")

    def run(self, args: argparse.Namespace) -> int:
        from launcher.aws.explain import explain
        from launcher.job import jobspec
        from launcher.job.info import JobState

        try:
            timeout = jobspec.parse_since(args.timeout) if args.timeout else None
        except UsageError:
            raise UsageError(
                f"--timeout {args.timeout!r}: expected a duration like 90m, 2h or 30s"
            ) from None
        if args.poll <= 0:
            raise UsageError(f"--poll {args.poll:g}: give a number of seconds above 0")
        job = job_from(args, args.job)
        progress = console()
        try:
            info = job.wait(timeout=timeout, poll=args.poll, waiting=progress)
        except KeyboardInterrupt:
            return interrupt.stopped(interrupt.Again.of(args, job), progress, waiting=True)
        advice = explain(info)
        if args.output == "json":
            print_json({**info.as_dict(), "what_to_do": advice})
        else:
            print(info.status_line())
            if advice:
                print(f"  what to do: {advice}")
        if not info.state.terminal:
            print_err(f"launcher: {info.job_id} still {info.state} after {args.timeout}")
        return 0 if info.state is JobState.SUCCEEDED else 1
