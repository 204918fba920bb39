"""What every backend reports about a job, as typed values (Batch's shapes stay in ``batch``).

The states are AWS Batch's, which the local executor follows too, so a job reads the same
whether it ran on the cluster or on the local Docker engine.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any

from launcher.errors import LauncherError

# What a job cancelled on request is told (Batch's TerminateJob reason, the local supervisor's).
CANCEL_REASON = "cancelled with launcher cancel"
# ECS's stoppedReason, which Batch gives a job whose command ended, however it ended: the exit
# code says more (the local supervisor gives it too).
CONTAINER_EXITED = "Essential container in task exited"


class BackendName(str, enum.Enum):
    AWS = "aws"  # AWS Batch
    LOCAL = "local"  # the local Docker engine

    def __str__(self) -> str:
        return self.value


class JobState(str, enum.Enum):
    SUBMITTED = "SUBMITTED"
    PENDING = "PENDING"
    RUNNABLE = "RUNNABLE"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    @property
    def terminal(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED)

    def __str__(self) -> str:
        return self.value


class NodeFate(str, enum.Enum):
    """What a node's own record says became of it in the job's latest ended attempt
    (``launcher.aws.batch.node_fate``): never the main node's log, which the job writes."""

    LOST = "lost"  # its host went under it
    NEVER_STARTED = "never started"  # its container never reached RUNNING

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class NodeStatus:
    """One node of a multi-node job (Batch's ``JOB_ID#N``, the local executor's container N)."""

    index: int
    state: JobState
    reason: str | None = None
    exit_code: int | None = None
    fate: NodeFate | None = None  # lost or never started, where its record says so


@dataclass(frozen=True)
class GroupInfo:
    """A node range of the job (a TorchX role): nodes ``first``..``last``, and what its
    definition gives each of them, where it was read (``launcher.job.node_ranges.groups_of``):
    the user's command (the prelude taken off), the container's variables and resources."""

    name: str
    first: int
    last: int
    image: str | None = None
    command: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    vcpus: int | None = None
    memory_mib: int | None = None
    gpus: int | None = None


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    name: str
    state: JobState
    reason: str | None = None
    nodes: int = 1
    queue: str | None = None
    detail: str | None = None  # the container's own reason, when Batch gives one
    definition: str | None = None
    image: str | None = None
    attempts: int = 0
    created_at: float | None = None  # seconds since the epoch
    started_at: float | None = None
    stopped_at: float | None = None
    node_status: tuple[NodeStatus, ...] = field(default_factory=tuple)
    groups: tuple[GroupInfo, ...] = field(default_factory=tuple)
    backend: BackendName = BackendName.AWS
    cancelled: bool = False  # ended by a cancel on request (launcher cancel, TorchX's cancel)
    # The main node's exit code in the latest attempt that ended (a job being retried has one).
    last_exit_code: int | None = None
    # Shapes: an array's size (its parent and its children), a child's index, the parent's
    # children by state (Batch's statusSummary), and the jobs it waits for (``ID``/``ID:each``).
    array_size: int | None = None
    array_index: int | None = None
    children: dict[str, int] = field(default_factory=dict)
    depends_on: tuple[str, ...] = ()
    # The nodes whose instances the stack replaced after an attempt (launcher.job.replacements).
    replacements: tuple[str, ...] = ()
    # A local run's limits that this machine lowered (``memlock 8 MiB (asked unlimited)``): its
    # engine could not raise them. Shown by describe, and by status when the job failed.
    capped_ulimits: tuple[str, ...] = ()
    # The pool, where the backend keeps it (a local job's record); an AWS job's is its queue's
    # pool in the stack (Cluster.pool_of), which a job of Batch does not carry.
    pool: str | None = None
    # The job's tags, where the backend read them: a local job's record keeps them; an AWS
    # job's come with DescribeJobs, not ListJobs (``Backend.list(tags=True)`` asks for them).
    tags: dict[str, str] = field(default_factory=dict)
    # Whose job it is on a stack with teams: its share identifier (where its queue has a
    # fair-share policy) and its team (its efa-batch:team tag, launcher.stack.teams; an AWS
    # job's where its tags were read). A local job has neither.
    share: str | None = None
    team: str | None = None

    @property
    def is_array(self) -> bool:
        """An array's parent: its state summarises children, it runs nothing itself."""
        return self.array_size is not None and self.array_index is None

    def children_line(self) -> str:
        """``3 SUCCEEDED, 1 RUNNING, 4 PENDING`` in Batch's order of states."""
        order = [s.value for s in JobState]
        counts = sorted(self.children.items(), key=lambda kv: order.index(kv[0]))
        return ", ".join(f"{n} {state}" for state, n in counts if n)

    @property
    def exit_code(self) -> int | None:
        """The job's exit code once it ended: its main node's. Batch follows the main node ("The
        final job status (SUCCEEDED or FAILED) is determined by the final job status of the main
        node", and fills a multi-node job's exit information in from it: Batch user guide,
        multi-node-parallel-jobs.html); the node prelude gives the main node a failed worker's
        code (launcher/node/prelude.sh, RUN). From the nodes' records where they were read
        (describe), else from the job's latest attempt (one DescribeJobs call: status). None
        while the job runs, and for one that never ran."""
        if not self.state.terminal:
            return None
        main = next((n.exit_code for n in self.node_status if n.index == 0), None)
        return main if main is not None else self.last_exit_code

    def outcome(self) -> str | None:
        """What the status line says in brackets. For a job whose command ended, its exit code
        and what that means (``exit code 137: killed (SIGKILL: ...)``), or Batch's reason where
        it says more than that the container exited (a timeout); a job that succeeded, nothing.
        Otherwise Batch's reason: why it waits, a cancel, a dependency that failed."""
        from launcher.job.exit_codes import meaning

        code = self.exit_code
        if self.cancelled or code is None:
            return self.reason
        generic = self.reason is None or self.reason.startswith(CONTAINER_EXITED)
        if self.state is JobState.SUCCEEDED:
            return None if generic else self.reason
        words = meaning(code) if generic else self.reason
        return f"exit code {code}" + (f": {words}" if words else "")

    def status_line(self) -> str:
        """``ID NAME FAILED (exit code 3)``: the state and its outcome."""
        line = f"{self.job_id} {self.name} {self.state}"
        why = self.outcome()
        return line + (f" ({why})" if why else "")

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["state"] = self.state.value
        data["backend"] = self.backend.value
        data["exit_code"] = self.exit_code  # a property: asdict leaves it out
        data["node_status"] = [
            {**n, "state": n["state"].value, "fate": n["fate"] and n["fate"].value}
            for n in data["node_status"]
        ]
        return data


@dataclass(frozen=True)
class LogLine:
    node: int
    message: str
    timestamp: float | None = None  # seconds since the epoch, when the backend knows it


@dataclass(frozen=True)
class CancelOutcome:
    """One job of a cancel of several (``Backend.cancel_many``): what it was before, and why
    it was not cancelled (``error``, as a cancel of that job alone would have raised it)."""

    info: JobInfo
    error: LauncherError | None = None
