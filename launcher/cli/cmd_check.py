"""``launcher check``: the cluster proved by a job (EFA, GPUs, NCCL all-reduce, rendezvous,
EFS on every node); exit 1 when a check failed."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from launcher.cli.base import (
    Command,
    cluster_from,
    console,
    local_network_argument,
    output_argument,
    pool_argument,
    print_json,
    team_argument,
)
from launcher.errors import UsageError
from launcher.job.jobspec import DEFAULT_RENDEZVOUS_PORT

if TYPE_CHECKING:
    from launcher.job.check import Report


class Check(Command):
    name = "check"
    help = "prove the cluster: EFA, GPUs, NCCL all-reduce, rendezvous and EFS on every node"
    notes = (
        "First, without starting anything, each pool is read for what would keep a job "
        "waiting: the EC2 vCPU quota, the instance type in the zone, free subnet addresses, "
        "the Capacity Block or reservation, the AMI and the compute environment; a pool that "
        "would wait ends the check before its job. --preflight stops there. "
        "Exit status: 0 when every check passed, 1 when one failed."
    )
    examples = (
        "launcher check",
        "launcher check --preflight",
        "launcher --region us-west-2 check --pool cpu --nodes 1",
        'launcher check --local --image "$LAUNCHER_IMAGE"',
        "launcher check -o json | jq .passed",
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--nodes", type=int, help="nodes to test (default: 2, or max_nodes; 1 on a Spot pool)"
        )
        parser.add_argument("--image", help="an nccl-tests image with EFA (default: AWS's)")
        parser.add_argument("--timeout", default="30m", help="give up after (default 30m)")
        parser.add_argument(
            "--port", type=int, default=DEFAULT_RENDEZVOUS_PORT, help="rendezvous port"
        )
        pool_argument(parser, "the pool whose nodes to prove")
        parser.add_argument(
            "--share-id", help="fair-share identifier, where the policy names teams"
        )
        team_argument(parser, "the team whose roles and pools the check runs with")
        output_argument(parser, "the report: each node's checks and the all-reduce's numbers")
        parser.add_argument(
            "--preflight",
            action="store_true",
            help="only read the account (every pool, or --pool): no job, nothing started",
        )
        parser.add_argument("--local", action="store_true", help="run on the local Docker engine")
        parser.add_argument("--local-efs", metavar="DIR", help="EFS stand-in with --local")
        parser.add_argument("--local-fsx", metavar="DIR", help="FSx stand-in with --local")
        local_network_argument(parser)

    def run(self, args: argparse.Namespace) -> int:
        from launcher.job import jobspec

        timeout = jobspec.parse_duration(args.timeout)
        if args.nodes is not None and args.nodes < 1:
            raise UsageError(f"--nodes {args.nodes}: a check needs at least 1 node")
        if args.preflight:
            pools = [args.pool] if args.pool else []
            report = cluster_from(args, args.local).preflight(pools)
            return self.show(report, args.output)
        report = cluster_from(args, args.local).check(
            nodes=args.nodes,
            image=args.image,
            timeout=timeout,
            port=args.port,
            progress=console(),
            pool=args.pool,
            share_id=args.share_id,
        )
        return self.show(report, args.output)

    @staticmethod
    def show(report: Report, output: str | None) -> int:
        if output == "json":
            print_json(report.as_dict())
        else:
            print(report.table())
        return 0 if report.passed else 1
