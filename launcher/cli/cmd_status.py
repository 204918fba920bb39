"""``launcher status``: a job's state line and what it waits for, its lost nodes, its Capacity
Block and what to do; a query, so exit 0 whatever the state."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from launcher.cli.base import Command, cluster_from, job_from, output_argument, print_json
from launcher.errors import LauncherError

if TYPE_CHECKING:
    from launcher.job.info import JobInfo


class Status(Command):
    name = "status"
    help = "print a job's state (one DescribeJobs call)"
    notes = (
        "A query: the exit status is 0 whatever the job's state (launcher wait JOB exits with "
        "its result). For an unfinished job of the stack's pools that run in a Capacity Block, "
        "the block's window too (two more calls: the stack, the block). For a RUNNABLE job, "
        "what EC2 says about its pool once it has waited 90 seconds: the latest failed "
        "launch, instances that never joined the cluster and the last line of one's console "
        "(up to 8 more calls; what the caller may not read is left out)."
    )
    examples = (
        'launcher status "$JOB"',
        'launcher status "$JOB" -o json | jq -r .state',
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("job", help="job id (or QUEUE:JOB_ID)")
        output_argument(
            parser, "the job's fields, with waiting_for, lost_nodes and what_to_do (or null)"
        )

    def run(self, args: argparse.Namespace) -> int:
        from launcher.aws.explain import explain
        from launcher.job.info import JobState

        job = job_from(args, args.job)
        info = job.status()
        waiting = job.waiting_for(info)
        lost = job.lost_nodes(info)
        nodes = lost.text() if lost else None
        advice = explain(info)
        block = _capacity_block_of(args, info)
        ec2 = job.ec2_side(info)
        ec2_side = {
            "launch": ec2.launch or None if ec2 else None,
            "instances": ec2.joining or None if ec2 else None,
            "console": ec2.console or None if ec2 else None,
        }
        if args.output == "json":
            print_json(
                {
                    **info.as_dict(),
                    "waiting_for": waiting,
                    "lost_nodes": nodes,
                    "what_to_do": advice,
                    "capacity_window": block,
                    "ec2": ec2_side if any(ec2_side.values()) else None,
                }
            )
            return 0
        print(info.status_line())
        if info.is_array:
            print(f"  children: {info.children_line() or 'none yet'} (of {info.array_size})")
        if waiting:
            print(f"  waiting for: {waiting}")
        if nodes:
            print(f"  nodes: {nodes}")
        for line in info.replacements:  # the stack's node replacer (launcher.job.replacements)
            print(f"  replaced: {line}")
        if block:
            print(f"  capacity: {block}")
        if ec2_side["launch"]:
            print(f"  launches: {ec2_side['launch']}")
        if ec2_side["instances"]:
            print(f"  instances: {ec2_side['instances']}")
        if ec2_side["console"]:
            print(f"  console: {ec2_side['console']}")
        if advice:
            print(f"  what to do: {advice}")
        if info.capped_ulimits and info.state is JobState.FAILED:
            # Quiet while jobs succeed (a local run needs no EFA limits); a failure may be one.
            print(f"  ulimits: {ulimits_text(info)}")
        return 0


def ulimits_text(info: JobInfo) -> str:
    """A local run's limits this machine lowered, and why (its engine may not raise them)."""
    return (
        f"{', '.join(info.capped_ulimits)}: this machine's hard limits "
        "(Docker here cannot raise them)"
    )


def _capacity_block_of(args: argparse.Namespace, info: JobInfo) -> str | None:
    """An unfinished AWS job's Capacity Block and its window in words, where the job is in a
    pool of the stack (``--stack``) that runs in one; None otherwise, or when the stack cannot
    be read (a job of another stack, or no access to it: status goes on without it)."""
    from launcher.job.info import BackendName

    if info.state.terminal or info.backend is not BackendName.AWS or not info.queue:
        return None
    try:
        cluster = cluster_from(args)
    except LauncherError:
        return None
    pool = cluster.pool_of(info)
    block = cluster.in_pool(pool).block() if pool else None
    return block.text(time.time()) if block else None
