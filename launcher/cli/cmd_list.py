"""``launcher list``: a queue's jobs (or the local ones) as a table, newest first, with age and
duration."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from launcher.cli.base import (
    Command,
    cluster_from,
    output_argument,
    pool_argument,
    print_err,
    print_json,
)
from launcher.errors import UsageError

if TYPE_CHECKING:
    from launcher.job.info import JobInfo


class List(Command):
    name = "list"
    help = "list the cluster queue's jobs (active ones unless --all)"
    notes = (
        "Newest first: ID, NAME, POOL, TEAM (its efa-batch:team tag; on a stack with teams), "
        "SHARE (its fair-share identifier; where a job has one), STATE, NODES, AGE (since it "
        "was submitted) and DURATION (how long it ran, or has run). Scripts should read -o "
        "json, which always has team and share, not the table."
    )
    examples = (
        "launcher list",
        "launcher list --all --all-pools",
        "launcher list --local --all",
        "launcher list -o json | jq -r '.[] | select(.state == \"FAILED\") | .job_id'",
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--all", action="store_true", help="include finished jobs")
        pool_argument(parser, "the pool whose queue to list")
        parser.add_argument("--all-pools", action="store_true", help="every pool's queue")
        output_argument(parser, "a list of the jobs' fields (the Python API's JobInfo) and pool")
        parser.add_argument("--local", action="store_true", help="jobs run with run --local")

    def run(self, args: argparse.Namespace) -> int:
        if args.pool and args.all_pools:
            raise UsageError("--pool and --all-pools: give one")
        if args.local and not (args.pool or args.all_pools):  # local jobs need no stack
            from launcher.api import local_jobs

            listed, pools = local_jobs(all=args.all), None
        else:
            pools = cluster_from(args, args.local)
            listed = pools.list(
                all=args.all,
                pool=args.pool,
                every_pool=args.all_pools,
                images=args.output == "json",  # the table has no image column
            )
        if args.local and not listed:
            _say_where_else(args.all)
        # The stack's pool of each job's queue; without a stack, the one a local job was given.
        pool_of = {j.job_id: pools.pool_of(j) if pools else j.pool for j in listed}
        if args.output == "json":
            print_json([{**j.as_dict(), "pool": pool_of[j.job_id]} for j in listed])
            return 0
        from launcher.cli import tables

        now = time.time()
        # Whose job it is, where that can differ: TEAM on a stack with teams, SHARE there and
        # wherever a job has a fair-share identifier. A one-team stack's table stays as it was.
        teams = bool(pools and pools.info.teams)
        shares = teams or any(j.share for j in listed)
        columns: list[tuple[str, Callable[[JobInfo], str]]] = [
            ("ID", lambda j: j.job_id),
            ("NAME", lambda j: j.name),
            ("POOL", lambda j: pool_of[j.job_id] or "-"),
            *([("TEAM", lambda j: j.team or "-")] if teams else []),
            *([("SHARE", lambda j: j.share or "-")] if shares else []),
            ("STATE", lambda j: j.state.value),
            ("NODES", lambda j: str(j.nodes)),
            ("AGE", lambda j: tables.age(j.created_at, now)),
            ("DURATION", lambda j: tables.duration(j.started_at, j.stopped_at, now)),
        ]
        headers = tuple(name for name, _ in columns)
        rows = [tuple(cell(job) for _, cell in columns) for job in listed]
        tables.render(headers, rows, styles={headers.index("STATE"): tables.STATE_STYLES})
        return 0


def _say_where_else(everything: bool) -> None:
    """An empty local listing read from another state directory than the one ``./.demo/env``
    names: where the demo's jobs are (stderr: scripts read stdout)."""
    from launcher.api import local_jobs_elsewhere

    hint = local_jobs_elsewhere()
    if hint:
        print_err(f"launcher: no {'' if everything else 'active '}local jobs, {hint}")
