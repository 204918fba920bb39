"""Which nodes an attempt lost or never started: the nodes' own records as fact, the main
node's log line as its claim.

The main node's watch ends an attempt with NODE_LOST_EXIT and says in one line of its log which
workers it lost or never heard from (``LOST_NODES_LINE``, launcher.node.prelude). That stream is
written by the job's own code, and on AWS by anyone allowed logs:PutLogEvents on the job log
group: the nodes' instance role may on every group (AmazonEC2ContainerServiceforEC2Role), and
every single-node job reaches that role through IMDS. Any line there may be forged. So a node is
lost, or never started, where its own record says so (``NodeStatus.fate``: Batch's record of the
node, launcher.aws.batch.node_fate); the line adds only the nodes the records do not name, as the
main node's words, and only as numbers of the job's workers, never its text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from launcher.job.info import NodeFate, NodeStatus
from launcher.node.prelude import LOST_NODES_LINE

# A node index has at most this many digits (Batch: up to 1,000 nodes a job); a longer run of
# digits is no node, and Python refuses to read past 4,300 of them (int_max_str_digits).
INDEX_DIGITS = 4


@dataclass(frozen=True)
class LostNodes:
    """An attempt's lost and never-started nodes by the records, and the nodes the main node's
    log names beyond them (``claimed``, with what it says of them, ``claim``)."""

    lost: tuple[int, ...] = ()
    never_started: tuple[int, ...] = ()
    claim: NodeFate | None = None
    claimed: tuple[int, ...] = ()

    def text(self) -> str | None:
        """One line: the records' nodes as fact, then the claim, labelled; None for none."""
        parts = []
        if self.lost:
            parts.append(f"node(s) {_numbers(self.lost)} lost (their hosts went, by their records)")
        if self.never_started:
            parts.append(f"node(s) {_numbers(self.never_started)} never started (by their records)")
        if self.claimed:
            parts.append(
                f"the main node's log says node(s) {_numbers(self.claimed)} {self.claim} "
                "(its own words: their records do not say so)"
            )
        return "; ".join(parts) or None


def _numbers(indexes: tuple[int, ...]) -> str:
    return " ".join(str(i) for i in indexes)


def claimed(message: str, nodes: int) -> tuple[NodeFate, tuple[int, ...]] | None:
    """What a LOST_NODES_LINE says, and of which of the job's workers (1 to ``nodes`` - 1);
    None for any other line."""
    found = LOST_NODES_LINE.match(message)
    if not found:
        return None
    words = message[: found.start(1)].split()
    numbers = {int(w) for w in words if w.isdigit() and len(w) <= INDEX_DIGITS}
    fate = NodeFate.LOST if found.group(1) == "lost" else NodeFate.NEVER_STARTED
    return fate, tuple(sorted(n for n in numbers if 0 < n < nodes))


def lost_nodes(node_status: Iterable[NodeStatus], nodes: int, lines: Iterable[str]) -> LostNodes:
    """The records' lost and never-started nodes; of the main node's ``lines``, the last
    LOST_NODES_LINE, for the nodes the records do not name."""
    status = list(node_status)
    lost = tuple(n.index for n in status if n.fate is NodeFate.LOST)
    never = tuple(n.index for n in status if n.fate is NodeFate.NEVER_STARTED)
    said = None
    for line in lines:
        said = claimed(line, nodes) or said
    if said is None:
        return LostNodes(lost, never)
    fate, indexes = said
    rest = tuple(i for i in indexes if i not in {*lost, *never})
    return LostNodes(lost, never, fate if rest else None, rest)
