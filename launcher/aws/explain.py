"""A waiting or failed job in the user's terms: what Batch said, and what to do about it.

Batch puts the reason a job waits in ``statusReason`` while it is RUNNABLE (Batch user guide,
job_stuck_in_runnable.html) and the reason it failed there or in the container's ``reason``.
Patterns follow the texts AWS documents for each case. Advice names the job by its id
(``{job}`` in the texts below), so a command in it can be run as it is.
"""

from __future__ import annotations

import re

from launcher.job.info import CANCEL_REASON, JobInfo, JobState
from launcher.node.prelude import NODE_LOST_EXIT

# (pattern over "statusReason | detail", advice); the first match wins. A job cancelled on
# request has none: its status line says so, and there is nothing to do.
_ADVICE: tuple[tuple[str, str], ...] = (
    (
        r"^Canceled by JobStateTimeLimit action due to reason: CAPACITY",
        "the queue cancelled it after waiting too long for instances (capacity_wait_minutes): "
        "EC2 had no capacity for the nodes; use a capacity reservation or block "
        "(capacity_reservation_id, capacity_block_id), fewer nodes, or another time",
    ),
    (
        r"^Canceled by JobStateTimeLimit action due to reason: MISCONFIGURATION",
        "the queue cancelled it because the cluster can never run it "
        "(misconfigured_wait_minutes): see the reason, then fix the job or the stack",
    ),
    (
        r"^CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
        "waiting for EC2 capacity: the zone (or the reservation) has no free instances of "
        "this type for all the job's nodes; wait, target a capacity reservation or block, or "
        "ask for fewer nodes",
    ),
    (
        r"^MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE",
        "the job needs more nodes than the compute environment may run (max_nodes): redeploy "
        "with a larger -c max_nodes, or submit fewer --nodes",
    ),
    (
        r"^MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT",
        "a node asks for more vCPUs, memory or GPUs than one instance of the cluster offers: "
        "lower --gpus-per-node or --shm-size, or use the launcher's defaults",
    ),
    (
        r"^ACTION_REQUIRED",
        "the compute environment is INVALID: `aws batch describe-compute-environments` shows "
        "why (often the launch template, the instance role or the subnet)",
    ),
    (
        r"CannotPullContainerError|pull image|manifest unknown",
        "the image could not be pulled: check that it exists, that the execution role may pull "
        "it (extra_pull_repository_arns for other ECR repositories), and that the nodes reach "
        "the registry (endpoints or NAT)",
    ),
    (
        r"EFS|efs-utils|mount\.nfs|ResourceInitializationError",
        "a volume could not be mounted: the EFS mount target must admit NFS (2049) from the "
        "VPC's default group, where the job's task interfaces are, and the file system policy "
        "only allows TLS mounts through the stack's access point",
    ),
    (
        r"^Host EC2|instance .* terminated|Spot",
        "an instance was lost (host failure, reclamation): Batch retries this while attempts "
        "remain (--retries); resume from a checkpoint",
    ),
    (
        r"attempt duration exceeded timeout",
        "the job ran longer than --timeout: raise it, or checkpoint and resubmit",
    ),
    (rf"{re.escape(CANCEL_REASON)}|killed via torchx", ""),
    (
        r"Essential container in task exited",
        "the main node's command exited with an error: `launcher logs {job}` shows why",
    ),
)


NODE_LOST_ADVICE = (
    "a node was lost, or never started (exit code {code}: the main node's watch gave up on "
    "it): Batch tries the job again while attempts remain (--retries); `launcher describe "
    "{job}` names the nodes their records show lost, and apart what the main node's log says"
)


# AWS documents that a dependant fails with its dependency ("If any of the job dependencies
# fail, the dependent job automatically transitions from PENDING to FAILED",
# job_dependencies.html) but not the words of its reason: it is told by its shape, a failed job
# that waited for others and never ran.
DEPENDENCY_ADVICE = (
    "a job it waited for (--after) did not succeed, so this one never ran: see that job's "
    "status, fix it, and submit both again"
)
ARRAY_ADVICE = (
    "at least one child failed: the counts above say how many; `launcher logs {job} --index K` "
    "shows child K's lines"
)


def explain(info: JobInfo) -> str | None:
    """Advice for a job that waits or failed; None when there is nothing to add."""
    if info.state not in (JobState.RUNNABLE, JobState.FAILED, JobState.STARTING):
        return None
    if info.cancelled:
        return None
    if info.state is JobState.FAILED:
        if info.depends_on and info.attempts == 0:
            return DEPENDENCY_ADVICE
        if info.is_array and info.children.get("FAILED"):
            return ARRAY_ADVICE.format(job=info.job_id)
    if info.last_exit_code == NODE_LOST_EXIT:
        return NODE_LOST_ADVICE.format(code=NODE_LOST_EXIT, job=info.job_id)
    text = " | ".join(t for t in (info.reason, info.detail) if t)
    if not text:
        return None
    for pattern, advice in _ADVICE:
        if re.search(pattern, text):
            return advice.format(job=info.job_id) or None
    return None
