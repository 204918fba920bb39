"""A waiting or failed job explained in the user's terms, from the reasons AWS documents."""

from __future__ import annotations

import pytest

from launcher.aws.explain import explain
from launcher.job.info import JobInfo, JobState


def job(state: str, reason: str | None = None, detail: str | None = None) -> JobInfo:
    return JobInfo("j", "train", JobState(state), reason=reason, detail=detail)


# statusReason texts from the Batch user guide (job_stuck_in_runnable*.html) and ECS/Batch errors.
@pytest.mark.parametrize(
    ("state", "reason", "detail", "advice"),
    [
        (
            "RUNNABLE",
            "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - Service cannot fulfill the capacity "
            "requested for instance type [p5.48xlarge]",
            None,
            "waiting for EC2 capacity",
        ),
        (
            "FAILED",
            "Canceled by JobStateTimeLimit action due to reason: "
            "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
            None,
            "cancelled it after waiting too long for instances",
        ),
        (
            "RUNNABLE",
            "MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE - CE(s) associated with the job "
            "queue cannot meet the CPU requirement of the job.",
            None,
            "more nodes than the compute environment may run",
        ),
        (
            "RUNNABLE",
            "MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT - The job resource requirement (vCPU/"
            "memory/GPU) is higher than that can be met by the CE(s) attached to the job queue.",
            None,
            "more vCPUs, memory or GPUs than one instance",
        ),
        (
            "RUNNABLE",
            "ACTION_REQUIRED - CE(s) associated with the job queue are invalid.",
            None,
            "INVALID",
        ),
        (
            "FAILED",
            "Essential container in task exited",
            "CannotPullContainerError: pull image manifest has been retried 5 time(s)",
            "could not be pulled",
        ),
        (
            "FAILED",
            "Essential container in task exited",
            "ResourceInitializationError: failed to invoke EFS utils commands to set up EFS "
            "volumes: stderr: mount.nfs4: Connection timed out",
            "NFS (2049) from the VPC's default group",
        ),
        (
            "FAILED",
            "Host EC2 (instance i-0123456789abcdef0) terminated.",
            None,
            "instance was lost",
        ),
        ("FAILED", "Job attempt duration exceeded timeout", None, "longer than --timeout"),
        ("FAILED", "Essential container in task exited", None, "`launcher logs j` shows why"),
    ],
)
def test_reasons_get_advice(state, reason, detail, advice):
    assert advice in explain(job(state, reason, detail))


def test_running_and_succeeded_jobs_need_no_advice():
    assert explain(job("RUNNING", "whatever")) is None
    assert explain(job("SUCCEEDED")) is None
    assert explain(job("FAILED", "something nobody documented")) is None


def test_a_lost_or_missing_node_is_explained_whatever_batchs_reason():
    """Exit code 75 is the node watch's: a worker lost, or never started in time."""
    info = JobInfo(
        "j",
        "train",
        JobState.RUNNABLE,
        reason="Essential container in task exited",
        attempts=1,
        last_exit_code=75,
    )
    assert "a node was lost, or never started" in explain(info)
    failed_by_the_command = JobInfo(
        "j", "train", JobState.FAILED, reason="Essential container in task exited", last_exit_code=3
    )
    assert "the main node's command exited with an error" in explain(failed_by_the_command)
