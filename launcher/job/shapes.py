"""Job shapes: a gang of nodes (a multi-node job), one node (a container job), an array of
one-node children, and the jobs a job waits for.

The vocabulary ``jobspec``, ``jobdef`` and both backends share, so it sits below them all:
the limits (with their sources), a dependency as a value, and the readers that take a job
definition of either shape apart. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from launcher.errors import UsageError

# "you specify an array size (between 2 and 10,000) to define how many child jobs should run
# in the array" (Batch user guide, array_jobs.html); "Maximum array size for array jobs |
# 10000" (service_limits.html). botocore's model carries no min/max, so nothing else checks it.
ARRAY_MIN, ARRAY_MAX = 2, 10_000
# "A job can depend upon a maximum of 20 jobs." (botocore SubmitJobRequest.dependsOn);
# "Maximum number of job dependencies for a job | 20" (service_limits.html).
MAX_DEPENDENCIES = 20
EACH = "each"  # --after JOB:each
# Variables Batch sets in array children ("AWS_BATCH_JOB_ARRAY_INDEX - This variable is only
# set in child array jobs. The array job index begins at 0"; AWS_BATCH_JOB_ARRAY_SIZE "is set
# to the size of the parent array job": job_env_vars.html).
ARRAY_INDEX_ENV = "AWS_BATCH_JOB_ARRAY_INDEX"
ARRAY_SIZE_ENV = "AWS_BATCH_JOB_ARRAY_SIZE"


@dataclass(frozen=True)
class Dependency:
    """A job this job waits for (Batch ``dependsOn``). ``each``: both are arrays and child i
    waits for the other's child i only (``N_TO_N``: "each index child of this job must wait
    for the corresponding index child of each dependency to complete before it can begin",
    botocore SubmitJobRequest.dependsOn)."""

    job_id: str
    each: bool = False

    def as_batch(self) -> dict[str, str]:
        return {"jobId": self.job_id, **({"type": "N_TO_N"} if self.each else {})}

    @classmethod
    def from_batch(cls, entry: dict[str, Any]) -> Dependency:
        return cls(str(entry.get("jobId", "")), entry.get("type") == "N_TO_N")

    def __str__(self) -> str:
        return f"{self.job_id}:{EACH}" if self.each else self.job_id


def parse_after(text: str) -> Dependency:
    """``JOB`` or ``JOB:each``."""
    job_id, sep, word = text.strip().rpartition(":")
    if sep and word == EACH:
        each = True
    else:
        job_id, each = text.strip(), False
    if not job_id:
        raise UsageError(f"--after {text!r}: expected a job id, or JOB:each for array to array")
    return Dependency(job_id, each)


def parse_indexes(text: str) -> tuple[int, ...]:
    """``--index`` of ``launcher cancel``: array children as ``K``, ``K-M`` and lists of them
    (``0-9,12``), in order, each once; no I/O (the array's size is checked against it later)."""
    indexes: dict[int, None] = {}
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise UsageError(
                f"--index {text!r}: expected child indexes as K, K-M or a list, e.g. 0-9,12"
            )
        low, high = int(first), int(last) if dash else int(first)
        if high < low:
            raise UsageError(f"--index {text!r}: {part.strip()} runs backwards; write {high}-{low}")
        if high >= ARRAY_MAX:
            raise UsageError(
                f"--index {text!r}: children are numbered 0-{ARRAY_MAX - 1} (arrays have at "
                f"most {ARRAY_MAX:,})"
            )
        indexes.update(dict.fromkeys(range(low, high + 1)))
    return tuple(indexes)


def check_array(size: int | None, nodes: int) -> None:
    """Batch's array sizes; arrays of one-node jobs only."""
    if size is None:
        return
    if not ARRAY_MIN <= size <= ARRAY_MAX:
        raise UsageError(
            f"--array {size}: AWS Batch runs arrays of {ARRAY_MIN}-{ARRAY_MAX:,} children "
            "(Batch user guide, array jobs); for one job leave --array out"
        )
    if nodes > 1:
        # AWS documents neither support nor refusal of multi-node array jobs (no statement in
        # the Batch user guide, the API reference or botocore's model): refused here, so that
        # nothing is submitted whose behaviour no one can point to. Submit N jobs instead.
        raise UsageError(
            f"--array with --nodes {nodes}: array jobs are single-node here (AWS documents no "
            "multi-node array jobs); submit one multi-node job per shard instead"
        )


def check_dependencies(after: tuple[Dependency, ...], array_size: int | None) -> None:
    """Batch's count, no job twice, and ``:each`` only from an array."""
    if len(after) > MAX_DEPENDENCIES:
        raise UsageError(
            f"--after: {len(after)} jobs; AWS Batch lets a job wait for at most "
            f"{MAX_DEPENDENCIES} (Batch service quotas)"
        )
    ids = [d.job_id for d in after]
    if len(set(ids)) != len(ids):
        raise UsageError("--after: a job is named twice; name each once")
    each = next((d for d in after if d.each), None)
    if each is not None and array_size is None:
        raise UsageError(
            f"--after {each}: ':each' pairs array children index by index (N_TO_N); it needs "
            "--array N on this job too (or drop ':each' to wait for the whole job)"
        )


# --- reading a job definition (or a DescribeJobs entry) of either shape ------------------------


def is_single(definition: dict[str, Any]) -> bool:
    """A container job (``containerProperties``, or a described job's ``container``)."""
    return "nodeProperties" not in definition


def single_container(definition: dict[str, Any]) -> dict[str, Any]:
    """A container job's container: the definition's properties, or the described job's."""
    container: dict[str, Any] = definition.get("containerProperties") or definition.get(
        "container", {}
    )
    return container
