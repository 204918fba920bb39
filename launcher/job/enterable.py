"""Which node of a job ``launcher exec`` may enter now, and the one line when it may not.

Pure, and shared by both backends' sessions (launcher.aws.node_shell for AWS, launcher.local.shell
for the local engine), so neither imports the other.
"""

from __future__ import annotations

from launcher.errors import UsageError
from launcher.job.info import JobInfo, JobState

# No command: bash where the image has it, else sh (busybox, distroless-with-shell images).
DEFAULT_COMMAND = (
    "/bin/sh",
    "-c",
    "if command -v bash >/dev/null 2>&1; then exec bash; else exec sh; fi",
)



def refusal(info: JobInfo, node: int) -> UsageError | None:
    """Why ``node`` of this job cannot be entered now, in one line (None: it can)."""
    job = info.job_id
    if info.is_array:
        return UsageError(
            f"job {job} is an array job and runs nothing itself; enter a child: "
            f"launcher exec {job}:K"
        )
    if not 0 <= node < info.nodes:
        nodes = "one node, 0" if info.nodes == 1 else f"nodes 0-{info.nodes - 1}"
        return UsageError(f"--node {node}: job {job} has {nodes}")
    if info.state.terminal:
        return UsageError(
            f"job {job} has ended ({info.state}); nothing runs to enter: its output is in "
            f"launcher logs {job}"
        )
    if info.state is not JobState.RUNNING:
        return UsageError(
            f"job {job} is {info.state}, not running yet; launcher status {job} says what it "
            "waits for"
        )
    return None


def node_refusal(job: str, node: int, state: str) -> UsageError | None:
    """A running job's node that is not running itself (a worker that ended or has yet to
    start)."""
    if state == JobState.RUNNING.value:
        return None
    return UsageError(
        f"node {node} of job {job} is {state}; its output is in launcher logs {job} --node {node}"
    )
