"""Which nodes an attempt lost: the nodes' own records as fact, the main node's log line as its
claim (launcher.job.lost_nodes, launcher.aws.batch.node_fate), on Batch's record shapes."""

from __future__ import annotations

from launcher.aws.batch import node_fate
from launcher.job.info import JobState, NodeFate, NodeStatus
from launcher.job.lost_nodes import LostNodes, claimed, lost_nodes

# ECS's stoppedReason for a task whose host went, as Batch gives it (calypr/funnel#973).
HOST_LOST = "Host EC2 (instance i-0e234208f6fc9291f) terminated."
STREAM = "train/default/0f1e2d3c"


def _record(*attempts: dict, reason: str | None = None) -> dict:
    """A node's record (JOB#N): JobDetail with attempts (AttemptDetail: container, an
    AttemptContainerDetail, and statusReason) and the latest statusReason."""
    return {"status": "FAILED", "statusReason": reason, "attempts": list(attempts)}


def _attempt(stream: str | None = STREAM, code: int | None = None, reason: str | None = None):
    container = {k: v for k, v in {"logStreamName": stream, "exitCode": code}.items() if v}
    return {"container": container, **({"statusReason": reason} if reason else {})}


def test_a_nodes_record_says_lost_never_started_or_nothing():
    """Lost: Batch's reason says its host went, for the attempt or (latest) the node. Never
    started: no attempt of its own, or no log stream ("Each container attempt receives a log
    stream name when they reach the RUNNING status", AttemptContainerDetail). A node with an
    exit code and a stream ran to its own end, whatever its exit code says."""
    assert node_fate(_record(_attempt(reason=HOST_LOST)), 1) is NodeFate.LOST
    assert node_fate(_record(_attempt(), reason=HOST_LOST), 1) is NodeFate.LOST
    assert node_fate(_record(_attempt(stream=None)), 1) is NodeFate.NEVER_STARTED
    assert node_fate(_record(), 1) is NodeFate.NEVER_STARTED
    assert node_fate(_record(_attempt(code=143)), 1) is None
    # The node's statusReason is its latest attempt's: an earlier host lost is that attempt's.
    assert node_fate(_record(_attempt(reason=HOST_LOST), _attempt(code=0)), 2) is None
    assert node_fate(_record(_attempt(reason=HOST_LOST), _attempt(code=0)), 1) is NodeFate.LOST
    assert node_fate(_record(_attempt()), 0) is None  # no attempt ended yet


def test_the_main_nodes_line_is_read_as_worker_numbers_only():
    """A line is anyone's who may write the stream: only its node numbers of the job's workers
    count (not 0, the main node; not past the job's nodes; not a run of digits no index has,
    which Python would refuse to read past 4,300 digits), never its text."""
    line = "launcher: node(s) 0 2 2 3 9 " + "9" * 5000 + " lost: anything at all"
    assert claimed(line, 4) == (NodeFate.LOST, (2, 3))
    assert claimed("launcher: node(s) 1 never started (no word within 3 s)", 2) == (
        NodeFate.NEVER_STARTED,
        (1,),
    )
    assert claimed("node(s) 1 lost", 2) is None  # not the launcher's line


def test_the_records_nodes_are_fact_and_the_line_adds_only_its_claim_beyond_them():
    status = [
        NodeStatus(0, JobState.FAILED, exit_code=75),
        NodeStatus(1, JobState.FAILED, exit_code=143),
        NodeStatus(2, JobState.FAILED, reason=HOST_LOST, fate=NodeFate.LOST),
        NodeStatus(3, JobState.FAILED, fate=NodeFate.NEVER_STARTED),
    ]
    lines = ["launcher: node(s) 1 lost: old", "step 9", "launcher: node(s) 1 2 lost: ending"]
    found = lost_nodes(status, 4, lines)
    assert found == LostNodes(lost=(2,), never_started=(3,), claim=NodeFate.LOST, claimed=(1,))
    assert found.text() == (
        "node(s) 2 lost (their hosts went, by their records); node(s) 3 never started (by "
        "their records); the main node's log says node(s) 1 lost (its own words: their records "
        "do not say so)"
    )
    agreed = lost_nodes(status, 4, ["launcher: node(s) 2 lost: ending"])
    assert agreed.text() == (
        "node(s) 2 lost (their hosts went, by their records); node(s) 3 never started (by "
        "their records)"
    )
    assert lost_nodes(status[:2], 2, ["training"]).text() is None
