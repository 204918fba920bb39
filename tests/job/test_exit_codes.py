"""A finished job's status line: its exit code and what it means, not ECS's words for "the
container exited" (launcher.job.info.JobInfo.outcome, launcher.job.exit_codes)."""

from __future__ import annotations

import pytest

from launcher.job.exit_codes import meaning
from launcher.job.info import CANCEL_REASON, CONTAINER_EXITED, JobInfo, JobState, NodeStatus
from launcher.node import prelude


def failed(code: int | None, reason: str | None = CONTAINER_EXITED, **kwargs) -> JobInfo:
    return JobInfo("j", "train", JobState.FAILED, reason=reason, last_exit_code=code, **kwargs)


@pytest.mark.parametrize(
    ("code", "line"),
    [
        (3, "j train FAILED (exit code 3)"),
        (127, "j train FAILED (exit code 127: the command was not found in the image)"),
        (126, "j train FAILED (exit code 126: the command could not be run (not executable))"),
        (
            137,
            "j train FAILED (exit code 137: killed (SIGKILL: out of memory, or stopped by force))",
        ),
        (139, "j train FAILED (exit code 139: ended by SIGSEGV)"),
        (prelude.NODE_LOST_EXIT, "j train FAILED (exit code 75: a node was lost or never started)"),
        (
            prelude.BAD_HOST_EXIT,
            "j train FAILED (exit code 79: a bad host (a GPU or EFA device missing or faulty))",
        ),
        # No exit code (Batch gave none): its reason, as before.
        (None, f"j train FAILED ({CONTAINER_EXITED})"),
    ],
)
def test_a_failed_job_shows_its_exit_code_and_what_it_means(code, line):
    assert failed(code).status_line() == line
    assert failed(code).as_dict()["exit_code"] == code


def test_a_reason_that_says_more_than_the_exit_stays_and_a_success_says_nothing_more():
    timeout = failed(137, "Job attempt duration exceeded timeout")
    assert timeout.status_line() == (
        "j train FAILED (exit code 137: Job attempt duration exceeded timeout)"
    )
    cancelled = failed(143, CANCEL_REASON, cancelled=True)
    assert cancelled.status_line() == f"j train FAILED ({CANCEL_REASON})"
    done = JobInfo("j", "train", JobState.SUCCEEDED, reason=CONTAINER_EXITED, last_exit_code=0)
    assert done.status_line() == "j train SUCCEEDED"
    waiting = JobInfo("j", "train", JobState.RUNNABLE, reason="CAPACITY:INSUFFICIENT")
    assert waiting.status_line() == "j train RUNNABLE (CAPACITY:INSUFFICIENT)"


def test_the_main_nodes_record_decides_over_the_latest_attempt_and_a_running_job_has_none():
    """Describe reads the nodes' records (node 0 is the main node), status only the job's."""
    nodes = (NodeStatus(0, JobState.FAILED, exit_code=1), NodeStatus(1, JobState.FAILED, 3))
    assert failed(None, node_status=nodes).exit_code == 1
    running = JobInfo("j", "t", JobState.RUNNING, last_exit_code=75)  # retrying after a loss
    assert running.exit_code is None and running.as_dict()["exit_code"] is None


def test_only_codes_with_a_known_meaning_get_words():
    assert meaning(0) is None and meaning(1) is None and meaning(3) is None
    assert meaning(None) is None and meaning(255) is None
    assert meaning(143) == "stopped (SIGTERM)"
