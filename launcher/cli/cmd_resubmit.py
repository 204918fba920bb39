"""``launcher resubmit``: a job run again with its own definition, resuming from its checkpoint
directory."""

from __future__ import annotations

import argparse

from launcher.cli.base import Command, console, job_from, output_argument, print_job_id


class Resubmit(Command):
    name = "resubmit"
    help = "run a job again, resuming from its checkpoint directory"
    notes = "Prints the new job's id alone on stdout."
    examples = ('AGAIN=$(launcher resubmit "$JOB")',)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("job", help="the job to run again: job id (or QUEUE:JOB_ID)")
        output_argument(parser, '{"job_id": NEW_ID}')

    def run(self, args: argparse.Namespace) -> int:
        new = job_from(args, args.job).resubmit(progress=console())
        print_job_id(args, new.job_id)
        return 0
