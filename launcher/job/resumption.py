"""Where a resubmitted job continues: its first job's checkpoint directory, carried as a tag
(``CHECKPOINT_TAG``) from each resubmission to the next.
"""

from __future__ import annotations

from typing import Any

from launcher.job.jobspec import DEFAULT_EFS_PATH
from launcher.job.node_ranges import node_ranges
from launcher.job.replacements import is_replacer_tag

CHECKPOINT_TAG = "efa-batch:checkpoint"


def resumption(job: dict[str, Any], job_id: str) -> tuple[str, dict[str, str]]:
    """The checkpoint directory a resubmission of ``job`` continues in, and the tags it gets:
    the job's own plus the directory, so that resubmitting the resubmission finds it again
    (a job's tags come back from DescribeJobs as they were submitted). The node replacer's
    record of the old job's attempts stays with the old job: on the new one it would name
    attempts that never ran, and take one of its 50 tags."""
    tags = {k: v for k, v in (job.get("tags") or {}).items() if not is_replacer_tag(k)}
    checkpoint = tags.get(CHECKPOINT_TAG) or checkpoint_dir(job, job_id)
    return checkpoint, {**tags, CHECKPOINT_TAG: checkpoint}


def checkpoint_dir(definition: dict[str, Any], job_id: str) -> str:
    """Where a job's attempts keep their checkpoints (the prelude's default, unless the job
    was itself a resubmission and carries its first job's directory)."""
    (_, container), *_ = node_ranges(definition)
    env: dict[str, str] = {e["name"]: e["value"] for e in container.get("environment", [])}
    if "LAUNCHER_CHECKPOINT_DIR" in env:
        return env["LAUNCHER_CHECKPOINT_DIR"]
    return f"{env.get('LAUNCHER_EFS', DEFAULT_EFS_PATH)}/checkpoints/{job_id}"
