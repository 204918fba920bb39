"""The instances the stack's node replacer took out from under a job, read from the job's tags.

The replacer (infra/node_replacer_function.py) keeps one tag on the job for all its attempts,
``efa-batch:replaced``: a Batch job holds at most 50 tags, job and job definition together,
and SubmitJob fails the job past that (Batch API reference, SubmitJob ``propagateTags``), so
one tag per replaced node cannot scale with the nodes. Its value is one entry per attempt,
separated by spaces, each ``ATTEMPT/CODE:ITEMS`` with ``+`` between items: ``NODE=INSTANCE``
while the instance ids fit in Batch's 256 characters, else ``NODE`` or ``FIRST-LAST``; a final
``more`` says that not every node fitted (the function's log and the instances' own
``efa-batch:replaced`` tags have them all). Only letters, digits, spaces and ``+ - = . _ : / @``
are allowed in a Batch tag (user guide, tag-restrictions.html), hence no commas. E.g.
``1/79:3=i-0abc12345def67890 2/75:1-64``.

The replacer before this one wrote one tag per node, ``efa-batch:replaced:ATTEMPT:NODE`` =
``INSTANCE exit CODE``; jobs it tagged still read. DescribeJobs returns the tags, so the
launcher says what happened with no permission beyond the one it has.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from launcher.node.prelude import BAD_HOST_EXIT, NODE_LOST_EXIT

JOB_TAG = "efa-batch:replaced"  # on the job: every attempt's replaced nodes
INSTANCE_TAG = "efa-batch:replaced"  # on the instance: why, which job, attempt and node
JOB_TAG_PREFIX = "efa-batch:replaced:"  # + ATTEMPT:NODE: the previous replacer's, one per node
MORE = "more"  # the last entry of a record that could not hold every node
WHY = {BAD_HOST_EXIT: "bad host", NODE_LOST_EXIT: "lost"}
# What ECS puts in a task's stoppedReason, and Batch in the job's (or node's) statusReason, when
# the host went under it: "Host EC2 (instance i-0e234208f6fc9291f) terminated." (as Batch shows
# it, calypr/funnel#973); the same start the job definition's retry rule matches (onStatusReason
# "Host EC2*", launcher.job.jobdef). The Batch backend reads each node's fate by it
# (launcher.aws.batch.node_fate), and the stack's node replacer too (infra/node_replacer.py).
HOST_LOST_REASON = re.compile(r"^Host EC2\b")
_ENTRY = re.compile(r"(\d+)/(-?\d+):(\S+)")
_ITEM = re.compile(r"(\d+)(?:=(\S+)|-(\d+))?")


def replacement_lines(tags: Mapping[str, str] | None) -> tuple[str, ...]:
    """One line per replaced node (or run of nodes), in attempt and node order, e.g.
    ``attempt 1: node 3 (i-0abc) replaced: bad host (exit 79)`` or ``attempt 2: nodes 1-64
    replaced: lost (exit 75)``. Tags of any other shape (a user's own, a newer replacer's) are
    passed over."""
    tags = tags or {}
    found = [*_record(tags.get(JOB_TAG, "")), *_per_node(tags)]
    lines = [
        f"attempt {attempt}: {nodes} replaced: {WHY.get(code, 'exit code')} (exit {code})"
        for attempt, _, nodes, code in sorted(found)
    ]
    if MORE in tags.get(JOB_TAG, "").split():
        lines.append(
            f"more nodes were replaced than the job's {JOB_TAG} tag can list; the node "
            "replacer's log has every one"
        )
    return tuple(lines)


def _record(value: str) -> list[tuple[int, int, str, int]]:
    """(attempt, first node, what, code) of each item of the one-tag record."""
    found = []
    for entry in value.split():
        matched = _ENTRY.fullmatch(entry)
        if matched is None:
            continue
        attempt, code = int(matched[1]), int(matched[2])
        for item in matched[3].split("+"):
            node = _ITEM.fullmatch(item)
            if node is None:
                continue
            first, instance, last = int(node[1]), node[2], node[3]
            if instance:
                what = f"node {first} ({instance})"
            elif last is not None and int(last) > first:
                what = f"nodes {first}-{last}"
            else:
                what = f"node {first}"
            found.append((attempt, first, what, code))
    return found


def _per_node(tags: Mapping[str, str]) -> list[tuple[int, int, str, int]]:
    """The previous replacer's tags: ``efa-batch:replaced:ATTEMPT:NODE`` = ``I exit CODE``."""
    found = []
    for key, value in tags.items():
        attempt, _, node = key.removeprefix(JOB_TAG_PREFIX).partition(":")
        words = value.split()
        if not key.startswith(JOB_TAG_PREFIX) or not (attempt.isdigit() and node.isdigit()):
            continue
        if len(words) != 3 or words[1] != "exit" or not words[2].lstrip("-").isdigit():
            continue
        found.append((int(attempt), int(node), f"node {node} ({words[0]})", int(words[2])))
    return found


def is_replacer_tag(key: str) -> bool:
    """A tag the node replacer wrote on a job: a record of that job's attempts, which a new
    job (a resubmission) must not inherit."""
    return key == JOB_TAG or key.startswith(JOB_TAG_PREFIX)
