"""The instances the stack's node replacer took out from under a job, read from the job's tags.

The replacer (infra/node_replacer_function.py) tags the Batch job with one tag per node it
replaced, ``efa-batch:replaced:ATTEMPT:NODE`` = ``INSTANCE exit CODE``; DescribeJobs returns
them, so the launcher says what happened with no permission beyond the one it has.
"""

from __future__ import annotations

from collections.abc import Mapping

from launcher.prelude import BAD_HOST_EXIT, NODE_LOST_EXIT

JOB_TAG_PREFIX = "efa-batch:replaced:"  # + ATTEMPT:NODE, on the job
INSTANCE_TAG = "efa-batch:replaced"  # on the instance: why, which job, attempt and node
WHY = {BAD_HOST_EXIT: "bad host", NODE_LOST_EXIT: "lost"}


def replacement_lines(tags: Mapping[str, str] | None) -> tuple[str, ...]:
    """One line per replaced node, in attempt and node order, e.g.
    ``attempt 1: node 3 (i-0abc) replaced: bad host (exit 79)``. Tags of any other shape
    (a user's own, a newer replacer's) are passed over."""
    found = []
    for key, value in (tags or {}).items():
        attempt, _, node = key.removeprefix(JOB_TAG_PREFIX).partition(":")
        words = value.split()
        if not key.startswith(JOB_TAG_PREFIX) or not (attempt.isdigit() and node.isdigit()):
            continue
        if len(words) != 3 or words[1] != "exit" or not words[2].lstrip("-").isdigit():
            continue
        found.append((int(attempt), int(node), words[0], int(words[2])))
    return tuple(
        f"attempt {attempt}: node {node} ({instance}) replaced: "
        f"{WHY.get(code, 'exit code')} (exit {code})"
        for attempt, node, instance, code in sorted(found)
    )
