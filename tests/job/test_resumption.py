"""Where a resubmitted job continues (launcher/job/resumption.py): its first job's checkpoint
directory, from the job's own variables or the tag an earlier resubmission left, and the tag
that carries it on to the next."""

from __future__ import annotations

import pytest

from launcher.job.resumption import checkpoint_dir, resumption


@pytest.mark.parametrize(
    ("environment", "directory"),
    [
        (
            [{"name": "LAUNCHER_CHECKPOINT_DIR", "value": "/mnt/efs/checkpoints/first"}],
            "/mnt/efs/checkpoints/first",
        ),
        ([{"name": "LAUNCHER_EFS", "value": "/data"}], "/data/checkpoints/job-1"),
        ([], "/mnt/efs/checkpoints/job-1"),
    ],
)
def test_a_resubmission_continues_in_its_first_jobs_checkpoints(environment, directory):
    """``resume``: the directory the job's attempts used, and the tag that carries it on to the
    next resubmission."""
    job = {"container": {"environment": environment}, "tags": {"team": "ml"}}
    assert checkpoint_dir(job, "job-1") == directory
    assert resumption(job, "job-1") == (
        directory,
        {"team": "ml", "efa-batch:checkpoint": directory},
    )
    assert checkpoint_dir({"container": {}}, "job-1") == "/mnt/efs/checkpoints/job-1"
    tagged = job | {"tags": {"efa-batch:checkpoint": "/x/checkpoints/0"}}
    assert resumption(tagged, "job-2")[0] == "/x/checkpoints/0"
