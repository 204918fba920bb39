"""``launcher describe``: a job's details as ``key  value`` lines, one row a node."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from launcher.cli.base import Command, job_from, output_argument, print_fields, print_json

if TYPE_CHECKING:
    from launcher.job.info import NodeStatus


class Describe(Command):
    name = "describe"
    help = "show a job's details and each node's state"
    examples = (
        'launcher describe "$JOB"',
        'launcher describe "$JOB" -o json | jq ".node_status[] | .state"',
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("job", help="job id (or QUEUE:JOB_ID, or ID:K for an array's child K)")
        output_argument(
            parser, "the job's fields (the Python API's JobInfo), lost_nodes and what_to_do"
        )

    def run(self, args: argparse.Namespace) -> int:
        from launcher.aws.explain import explain

        job = job_from(args, args.job)
        info = job.describe()
        lost = job.lost_nodes(info)
        nodes = lost.text() if lost else None
        if args.output == "json":
            print_json({**info.as_dict(), "lost_nodes": nodes, "what_to_do": explain(info)})
            return 0
        why = info.outcome()
        rows: dict[str, object] = {
            "job": f"{info.job_id} ({info.name})",
            "status": f"{info.state}" + (f" ({why})" if why else ""),
        }
        if info.reason and info.reason != why:  # Batch's own words, beside the exit code's
            rows["reason"] = info.reason
        rows |= {
            "queue": info.queue or "-",
            "team": info.team or "-",  # its efa-batch:team tag (a stack with teams)
            "share": info.share or "-",  # its fair-share identifier
            "definition": info.definition or "-",
            "nodes": info.nodes,
            "image": info.image or "-",
            "attempts": info.attempts,
        }
        if info.is_array:
            rows["array"] = f"{info.array_size} children: {info.children_line() or 'none yet'}"
        elif info.array_index is not None:
            rows["array"] = f"child {info.array_index} of {info.array_size}"
        if info.depends_on:
            rows["after"] = ", ".join(info.depends_on)
        if info.detail:
            rows["container"] = info.detail
        for node in info.node_status:
            rows[f"node {node.index}"] = _node_row(node)
        if nodes:
            rows["lost nodes"] = nodes
        if info.capped_ulimits:
            from launcher.cli.cmd_status import ulimits_text

            rows["ulimits"] = ulimits_text(info)
        advice = explain(info)
        if advice:
            rows["what to do"] = advice
        print_fields(rows)
        return 0


def _node_row(node: NodeStatus) -> str:
    """``FAILED, exit 143``; a node its record says was lost or never started says so, a lost
    one with Batch's reason (``FAILED, lost: Host EC2 (instance i-0abc) terminated.``)."""
    from launcher.job.info import NodeFate

    code = "" if node.exit_code is None else f", exit {node.exit_code}"
    fate = f", {node.fate}" if node.fate else ""
    why = f": {node.reason}" if node.fate is NodeFate.LOST and node.reason else ""
    return f"{node.state}{code}{fate}{why}"
