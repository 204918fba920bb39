"""``launcher outputs``: the cluster the stack's outputs describe, its pools and its teams as
tables and each Capacity Block's window."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from launcher.cli.base import Command, cluster_from, output_argument, print_fields, print_json

if TYPE_CHECKING:
    from launcher.api import Cluster
    from launcher.stack.cluster import ClusterInfo


class Outputs(Command):
    name = "outputs"
    help = "show the cluster discovered from the stack outputs"
    examples = (
        "launcher outputs",
        "launcher --stack Dev outputs --all",
        "launcher outputs -o json | jq -r .repository_uri",
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        output_argument(parser, "every value, the pools' included")
        parser.add_argument(
            "--all", action="store_true", help="every value the stack outputs (ARNs, ids)"
        )

    def run(self, args: argparse.Namespace) -> int:
        cluster = cluster_from(args)
        info = cluster.info
        data = info.as_dict()
        blocks = _capacity_blocks(cluster)
        if args.output == "json":
            print_json({**data, "capacity_windows": blocks})
            return 0
        del data["pools"], data["teams"]  # tables of their own
        windows = {f"capacity ({pool})": window for pool, window in blocks.items()}
        if args.all:
            print_fields({**data, "internet": info.internet, **windows})
        else:  # what a user needs to run a job; ARNs and ids are for --all
            print_fields(
                {
                    "stack": f"{info.stack_name} ({info.region})",
                    "images": info.repository_uri,
                    "internet": info.internet,
                    **windows,
                }
            )
        print()
        _pool_table(info)
        print("* the default pool: jobs go there unless they name one (--pool)")
        if info.teams:
            print()
            _team_table(info)
            print("> the team you submit as (--team, $LAUNCHER_TEAM, or the stack's only team)")
        if not args.all:
            print("every value (ARNs, ids): launcher outputs --all")
        return 0


def _capacity_blocks(cluster: Cluster) -> dict[str, str]:
    """Each pool in a Capacity Block: the block and its window in words (one call each)."""
    now = time.time()
    found = {p.name: cluster.in_pool(p.name).block() for p in cluster.info.pools}
    return {name: block.text(now) for name, block in found.items() if block is not None}


def _pool_table(info: ClusterInfo) -> None:
    """The pools of ``launcher outputs``: what a job in each gets, the default one marked."""
    from launcher.cli import tables

    headers = (
        "POOL",
        "QUEUE",
        "INSTANCE",
        "MAX NODES",
        "GPUS",
        "VCPUS",
        "MEMORY",
        "EFA",
        "SPOT",
        "FALLBACK",
    )
    rows: list[tuple[str, ...]] = []
    for p in info.pools:
        rows.append(
            (
                p.name + (" *" if p.name == info.pool_name else ""),
                p.queue_name,
                p.instance_type,
                str(p.max_nodes),
                str(p.gpus_per_node),
                str(p.vcpus_per_node),
                f"{p.memory_mib_per_node} MiB",
                str(p.efa_interfaces or "-"),
                "yes: one-node jobs" if p.spot else "no",
                p.fallback or "-",
            )
        )
    tables.render(headers, rows)


def _team_table(info: ClusterInfo) -> None:
    """The teams of a stack deployed with teams: what each may use, and the managed policy the
    platform team attaches to its users; the team this view submits as marked."""
    from launcher.cli import tables

    headers = ("TEAM", "SHARE", "POOLS", "COMMON", "FSX", "USER POLICY")
    rows = [
        (
            t.name + (" >" if t.name == info.team else ""),
            t.share_id,
            ",".join(t.pools),
            t.common.value,
            t.fsx.value,
            t.user_policy_arn,
        )
        for t in info.teams
    ]
    tables.render(headers, rows)
