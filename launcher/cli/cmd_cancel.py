"""``launcher cancel``: jobs (or an array's children) terminated, 50 to an AWS call; the exit
status says whether any was left."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from launcher.cli.base import Command, output_argument, print_err, print_json
from launcher.errors import LauncherError, UsageError

if TYPE_CHECKING:
    from launcher.job.info import JobInfo


class Cancel(Command):
    name = "cancel"
    help = "terminate jobs in any state (an array with all its children), 50 to an AWS call"
    notes = (
        "One line per job on stderr. Exit status: 0 when every job was cancelled, 1 when "
        "AWS failed to cancel one, else 2 (a job had ended already; an unknown id or a bad "
        "--index cancels nothing)."
    )
    examples = (
        'launcher cancel "$JOB"',
        'launcher cancel "$POST" "$TRAIN" "$PRE"',
        "# only children 0 and 1 of an array",
        'launcher cancel "$PRE" --index 0-1',
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "job",
            nargs="+",
            metavar="JOB",
            help="job id (or QUEUE:JOB_ID, or ID:K for an array's child K); all of one kind, "
            "AWS or local",
        )
        parser.add_argument(
            "--index",
            metavar="K[-M][,...]",
            help="only these children of the array JOB, e.g. 0-9,12 (default: the whole array)",
        )
        output_argument(
            parser,
            'on stdout, one object a job: {"job_id", "name", "was", "error"} (error: null when '
            "it was cancelled)",
        )

    def run(self, args: argparse.Namespace) -> int:
        from launcher.api import attach, cancel_jobs
        from launcher.job.shapes import parse_indexes

        indexes = parse_indexes(args.index) if args.index is not None else None  # before calls
        if indexes is not None and len(args.job) > 1:
            raise UsageError(f"--index {args.index}: give one array job, not {len(args.job)}")
        jobs = attach(args.job, profile=args.profile, region=args.region)
        if indexes is not None:
            jobs = jobs[0].children(indexes, args.index)
        if len(jobs) == 1:  # one job: one TerminateJob, its error raised as ever
            info = jobs[0].cancel()
            print_err(_cancelled(info))
            if args.output == "json":
                print_json([_cancel_record(info, None)])
            return 0
        outcomes = cancel_jobs(jobs)
        for outcome in outcomes:
            error = outcome.error
            print_err(_cancelled(outcome.info) if error is None else f"launcher: error: {error}")
        if args.output == "json":
            print_json([_cancel_record(o.info, o.error) for o in outcomes])
        codes = {o.error.exit_code for o in outcomes if o.error is not None}
        # AWS failing a job (1) outranks jobs that had ended already (2, as for one job).
        return min(codes, default=0)


def _cancelled(info: JobInfo) -> str:
    return f"cancelled {info.job_id} ({info.name}, was {info.state})"


def _cancel_record(info: JobInfo, error: LauncherError | None) -> dict[str, object]:
    return {
        "job_id": info.job_id,
        "name": info.name,
        "was": info.state.value,
        "error": None if error is None else str(error),
    }
