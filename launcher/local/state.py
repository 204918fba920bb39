"""The local backend's state: one typed record per job, and one writer at a time.

State lives in ``$LAUNCHER_LOCAL_STATE`` (default ``~/.local/state/efa-batch``): ``jobs/ID.json``
per job and ``jobs/ID/attempt-N/node-K.log`` per node, the user's alone (directories 0700,
files 0600: records hold ``--env`` values, logs the job's output). A record names its one writer:
its role (``Record.owner``) and its process (``Record.writer``). The launcher that schedules the
job writes until it hands the job to the job's supervisor, the supervisor from then on, and a
cancel only once the writer is gone. ``Store.save`` refuses a write by anyone else, and checks and
writes under one lock, so the protocol is held by the code rather than by care. A writer is
recorded as a ``Process``, its pid with its start time, so that no signal ever reaches another
process that got the pid later.

An array's children (``ID:0`` .. ``ID:N-1``, records of their own) are created by the parent's
supervisor, which is their one writer from the start; a cancel of one child leaves a request
beside its record (``request_cancel``) that the supervisor acts on; a cancel that finds the
supervisor gone takes the parent and every unfinished child over, as it does a single job.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import fcntl
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher import private
from launcher.errors import UsageError
from launcher.job.info import JobState
from launcher.local.containers import PREFIX, local_id

if TYPE_CHECKING:
    import psutil

STATE_ENV = "LAUNCHER_LOCAL_STATE"


def now_ms() -> int:
    """Now, as Batch gives times: milliseconds since the epoch."""
    return int(time.time() * 1000)


class Owner(str, enum.Enum):
    """Who may write a job's record."""

    SCHEDULER = "scheduler"  # the launcher starting the job, until the supervisor takes it
    SUPERVISOR = "supervisor"  # the job's supervisor (python -m launcher.local.supervisor)
    CANCELLER = "canceller"  # a cancel that found the supervisor gone


class OwnershipError(RuntimeError):
    """A write by a process that does not own the record: a bug, never the user's doing."""


@dataclass(frozen=True)
class Process:
    """A process, named so that it cannot be mistaken for a later one given the same pid."""

    pid: int
    started: float  # its start time, as psutil reads it

    @classmethod
    def of(cls, pid: int) -> Process:
        import psutil

        return cls(pid, psutil.Process(pid).create_time())

    def alive(self) -> bool:
        """The same process is there, and has not exited (a zombie has)."""
        import psutil

        try:
            process = psutil.Process(self.pid)
            return self._same(process) and process.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def _same(self, process: psutil.Process) -> bool:
        # Start times are read from the clock ticks since boot: equal for the same process.
        return abs(process.create_time() - self.started) < 0.01

    def terminate(self) -> bool:
        """SIGTERM, if it is still this process; whether it was sent."""
        import psutil

        try:
            process = psutil.Process(self.pid)
            if not self._same(process):
                return False
            process.send_signal(signal.SIGTERM)
        except psutil.Error:
            return False
        return True


@dataclass
class Attempt:
    attempt: int
    exit_codes: list[int | None]
    status_reason: str | None


@dataclass
class Record:
    """Everything the local backend knows of one job."""

    job_id: str
    name: str
    definition: str
    queue: str
    status: JobState
    created_at: int  # milliseconds since the epoch, as Batch says them
    register: dict[str, Any]  # the RegisterJobDefinition request, as one multi-node job
    submit: dict[str, Any]  # the SubmitJob request
    efs_dir: str | None
    infiniband: bool  # /dev/infiniband is on this machine: EFA devices are passed
    gpus: bool  # an NVIDIA GPU is on this machine
    timeout: int | None = None  # seconds an attempt may run
    attempt: int = 1
    containers: list[str] = field(default_factory=list)  # this attempt's, node by node
    ulimit_caps: dict[str, int] | None = None
    history: list[Attempt] = field(default_factory=list)  # the attempts that ended
    started_at: int | None = None
    stopped_at: int | None = None
    status_reason: str | None = None
    exit_codes: list[int | None] = field(default_factory=list)
    owner: Owner = Owner.SCHEDULER
    writer: Process | None = None  # the owner's process
    fsx_dir: str | None = None  # the directory standing in for the nodes' FSx mount
    secrets_file: str | None = None  # where the job's secrets are read at each start
    single_node: bool = False  # a container job: Batch's single-job variables, not a node's
    array_size: int | None = None  # an array's (parent and children): children ID:0 .. ID:N-1
    array_index: int | None = None  # an array child's index (None: not a child)
    # Batch's dependsOn entries ({"jobId", "type"?}); a child's name its counterparts (N_TO_N).
    depends_on: list[dict[str, str]] = field(default_factory=list)
    network: str = "none"  # what the nodes reach: a LocalNetwork's value
    # This attempt's runtime directory (its secrets, its start gate; launcher.private): named
    # at random, so the record is where its path is found again.
    runtime_dir: str | None = None
    # The stack's pool the job was given (the default pool's name when it named none), for
    # list --local without a stack; None in records written before it was kept.
    pool: str | None = None

    @property
    def node_properties(self) -> dict[str, Any]:
        properties: dict[str, Any] = self.register["nodeProperties"]
        return properties

    @property
    def is_array(self) -> bool:
        """An array's parent, which runs no container of its own."""
        return self.array_size is not None and self.array_index is None

    @property
    def nodes(self) -> int:
        return int(self.node_properties["numNodes"])

    @property
    def retry_strategy(self) -> dict[str, Any]:
        strategy: dict[str, Any] = self.register.get("retryStrategy", {})
        return strategy

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data["status"], data["owner"] = self.status.value, self.owner.value
        return json.dumps(data, indent=2)

    @classmethod
    def from_json(cls, text: str) -> Record:
        data = json.loads(text)
        data["status"], data["owner"] = JobState(data["status"]), Owner(data["owner"])
        data["history"] = [Attempt(**a) for a in data["history"]]
        data["writer"] = Process(**data["writer"]) if data["writer"] else None
        return cls(**data)


class Store:
    """Job records on disk; ``save`` writes only for the record's owner."""

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        unknown_hint: Callable[[Path], str | None] | None = None,
    ) -> None:
        default = Path.home() / ".local" / "state" / "efa-batch"
        self.base = Path(root or os.environ.get(STATE_ENV) or default)
        self.root = self.base / "jobs"
        # Where else the user's jobs may be, said with an unknown job (the API's
        # launcher.api.elsewhere: this floor reads no file of anyone else's).
        self.unknown_hint = unknown_hint

    def _path(self, job_id: str) -> Path:
        return self.root / f"{job_id}.json"

    def log_path(self, job_id: str, node: int, attempt: int = 1) -> Path:
        return self.root / job_id / f"attempt-{attempt}" / f"node-{node}.log"

    def job_dir(self, job_id: str) -> Path:
        return self.root / job_id

    def private_root(self) -> Path:
        """The jobs directory, made 0700 with the state directory above it (launcher.private)."""
        return private.directory(self.root, own_from=self.base)

    @contextlib.contextmanager
    def _locked(self, job_id: str) -> Iterator[None]:
        self.private_root()
        with os.fdopen(private.append(self.root / f"{job_id}.lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def load(self, handle: str) -> Record:
        job_id = local_id(handle) or handle
        try:
            return Record.from_json(self._path(job_id).read_text())
        except FileNotFoundError:
            hint = self.unknown_hint(self.base) if self.unknown_hint else None
            raise UsageError(
                f"no such local job {job_id!r} in {self.base}" + (f"; {hint}" if hint else "")
            ) from None

    def create(self, record: Record) -> None:
        with self._locked(record.job_id):
            if self._path(record.job_id).exists():
                raise OwnershipError(f"{record.job_id}: a record exists already")
            self._write(record)
        self.attempt_dir(record.job_id, 1)

    def attempt_dir(self, job_id: str, attempt: int) -> Path:
        """Where an attempt's node logs go, made 0700 (the job's output is the user's alone)."""
        return private.directory(
            self.log_path(job_id, 0, attempt).parent, own_from=self.job_dir(job_id)
        )

    def open_log(self, job_id: str, node: int, attempt: int) -> int:
        """A descriptor appending to a node's log, created 0600."""
        return private.append(self.log_path(job_id, node, attempt))

    def save(self, record: Record, by: Owner) -> None:
        """Write ``record`` as ``by``, who must own the record on disk."""
        with self._locked(record.job_id):
            self._check(record.job_id, by)
            self._write(record)

    def hand_over(self, record: Record, by: Owner, to: Owner, **changes: Any) -> Record:
        """The record, with ``changes``, passed from ``by`` to ``to`` in one write."""
        with self._locked(record.job_id):
            self._check(record.job_id, by)
            handed = dataclasses.replace(record, owner=to, **changes)
            self._write(handed)
        return handed

    def _check(self, job_id: str, by: Owner) -> None:
        owner = Record.from_json(self._path(job_id).read_text()).owner
        if owner is not by:
            raise OwnershipError(f"{job_id}: written by the {by.value}; the {owner.value} owns it")

    def _write(self, record: Record) -> None:
        private.write(self._path(record.job_id), record.to_json().encode())

    def request_cancel(self, job_id: str) -> None:
        """Ask an array child's writer (its parent's supervisor) to cancel it: a file beside the
        record, which only the writer acts on, so the record keeps its one writer."""
        os.close(private.append(self.root / f"{job_id}.cancel"))

    def cancel_requested(self, job_id: str) -> bool:
        return (self.root / f"{job_id}.cancel").exists()

    def child(self, parent: Record, index: int) -> Record | None:
        """An array's child ``index``; None until the parent's supervisor has made it."""
        try:
            return self.load(f"{parent.job_id}:{index}")
        except UsageError:
            return None

    def records(self) -> Iterator[Record]:
        if not self.root.is_dir():
            return
        for path in self.root.glob(f"{PREFIX}*.json"):
            with contextlib.suppress(FileNotFoundError, ValueError, KeyError, TypeError):
                yield Record.from_json(path.read_text())
