"""The local backend: a multi-node job on the local Docker engine, run as AWS Batch runs it.

``schedule`` validates, starts every node (``engine``) and hands the job to a detached
supervisor (``supervisor``), which enforces the timeout and the retry rules, copies the logs and
records the outcome. Every other call reads the job's record (``state``); ``cancel`` asks the
record's writer to stop the job and writes only when no writer is left.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from launcher import private
from launcher.backend import Say, already_ended, newest_first, no_such_jobs
from launcher.errors import LauncherError, RemoteError, UsageError
from launcher.job.enterable import node_refusal, refusal
from launcher.job.info import (
    CANCEL_REASON,
    BackendName,
    CancelOutcome,
    JobInfo,
    JobState,
    LogLine,
    NodeStatus,
)
from launcher.job.jobdef import Requests
from launcher.job.node_ranges import (
    as_one_node,
    groups_of,
    node_ranges,
    with_environment,
    with_overrides,
)
from launcher.job.resumption import resumption
from launcher.job.shapes import Dependency, is_single
from launcher.job.waiting import Facts, Watch, pending
from launcher.local import engine, secret_values, supervisor
from launcher.local.containers import (
    PREFIX,
    LocalNetwork,
    asked_ulimits,
    capped_limits,
    is_local,
    parse_log_line,
)
from launcher.local.state import Owner, OwnershipError, Process, Record, Store, now_ms
from launcher.progress import ProgressFn

LOST_REASON = "the local supervisor is gone; cancelled with launcher cancel"
INTERRUPTED_REASON = "interrupted (Ctrl-C) before it started"
HANDOVER_SECONDS = 60  # how long a cancel waits for a writer to hand over or stop


def _children_counts(store: Store, parent: Record) -> dict[str, int]:
    """Each state's count among an array's children (as Batch's statusSummary); children the
    supervisor has yet to write are PENDING."""
    assert parent.array_size is not None
    counts: dict[str, int] = {}
    for index in range(parent.array_size):
        child = store.child(parent, index)
        state = child.status if child is not None else JobState.PENDING
        counts[state.value] = counts.get(state.value, 0) + 1
    return counts


def missing_devices(*, efa: bool, gpu: bool) -> str | None:
    """One line for the devices a job asks for that this machine lacks (EFA devices are dropped
    and NCCL uses TCP; GPUs are not requested): usual on a laptop, so said as expected."""
    if efa and gpu:
        return (
            "no EFA or GPU on this machine: the job runs on CPU, NCCL over TCP "
            "(expected for a local run)"
        )
    if efa:
        return "no EFA on this machine: NCCL runs over TCP (expected for a local run)"
    if gpu:
        return "no GPU on this machine: the job runs on CPU (expected for a local run)"
    return None


def job_info(record: Record, store: Store | None = None) -> JobInfo:
    """The record as ``JobInfo``; an array's children's counts need the ``store``."""
    state = record.status
    codes = record.exit_codes
    return JobInfo(
        job_id=record.job_id,
        name=record.name,
        state=state,
        reason=record.status_reason,
        nodes=record.nodes,
        queue=record.queue,
        pool=record.pool,
        definition=record.definition,
        image=record.node_properties["nodeRangeProperties"][0]["container"]["image"],
        # Attempts that ran: none for a job that never started (a failed dependency, a cancel
        # while it waited), as Batch lists none.
        attempts=len(record.history)
        if state.terminal
        else (record.attempt if state is JobState.RUNNING and not record.is_array else 0),
        created_at=record.created_at / 1000,
        started_at=record.started_at / 1000 if record.started_at else None,
        stopped_at=record.stopped_at / 1000 if record.stopped_at else None,
        node_status=tuple(
            NodeStatus(
                index=n,
                state=state,
                reason=record.status_reason if state.terminal else None,
                exit_code=codes[n] if n < len(codes) else None,
            )
            for n in range(record.nodes)
            if not record.is_array
        ),
        groups=groups_of(record.register),
        backend=BackendName.LOCAL,
        cancelled=record.status_reason in (CANCEL_REASON, LOST_REASON),
        last_exit_code=next(iter(record.history[-1].exit_codes), None) if record.history else None,
        array_size=record.array_size,
        array_index=record.array_index,
        children=_children_counts(store, record) if store is not None and record.is_array else {},
        depends_on=tuple(str(Dependency.from_batch(d)) for d in record.depends_on),
        capped_ulimits=tuple(capped_limits(asked_ulimits(record.register), record.ulimit_caps))
        if record.ulimit_caps
        else (),
        tags=dict(record.submit.get("tags") or {}),
    )


NETWORK_ENV = "LAUNCHER_LOCAL_NETWORK"


def local_network(value: LocalNetwork | str | None) -> LocalNetwork:
    """``--local-network`` (or ``$LAUNCHER_LOCAL_NETWORK``), default none; one line if bad."""
    chosen = value or os.environ.get(NETWORK_ENV) or LocalNetwork.NONE.value
    try:
        return LocalNetwork(chosen)
    except ValueError:
        allowed = ", ".join(n.value for n in LocalNetwork)
        raise UsageError(f"--local-network {chosen}: allowed: {allowed}") from None


def _check_port(port: int) -> None:
    with socket.socket() as s:
        # SO_REUSEADDR: a connection of an earlier run in TIME_WAIT is no conflict; a listener is.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError:
            raise UsageError(
                f"--port {port}: 127.0.0.1:{port} is in use; the main node needs it for the "
                "rendezvous (pass another --port)"
            ) from None


def _validate(
    containers: list[dict[str, Any]],
    efs_dir: str | None,
    secrets_file: Path,
    *,
    starts_now: bool,
    network: LocalNetwork,
    nodes: int,
) -> None:
    """Everything a local run refuses, before the first container starts."""
    env = {e["name"]: e["value"] for e in containers[0].get("environment", [])}
    # On the machine's network the rendezvous port is the machine's; in the job's own
    # namespace nothing else listens there.
    if "LAUNCHER_MAIN_PORT" in env and starts_now and network is LocalNetwork.HOST:
        _check_port(int(env["LAUNCHER_MAIN_PORT"]))
    for container in containers:
        secret_values.values(container, secrets_file)  # every secret is there (values unkept)
    if nodes > 1 or any(c.get("secrets") for c in containers):
        private.runtime_base()  # where the start gate and secrets will go is the user's alone
    uses_efs = any("efsVolumeConfiguration" in v for c in containers for v in c.get("volumes", []))
    if uses_efs and efs_dir is None:
        raise UsageError("a local run needs a directory standing in for EFS (--local-efs)")


class LocalBackend:
    name = BackendName.LOCAL

    def __init__(
        self,
        queue: str | None = None,
        efs_dir: str | None = None,
        store: Store | None = None,
        *,
        fsx_dir: str | None = None,
        secrets_file: str | os.PathLike[str] | None = None,
        network: LocalNetwork | str | None = None,
        pool: str | None = None,
    ) -> None:
        self.queue = queue  # the queue (a pool's) jobs go to and list() reads; None: any
        self.pool = pool  # that pool's name, kept in each job's record
        self.network = local_network(network)
        # Absolute: Docker takes a relative bind source for a named volume's name, and the
        # files would land in a volume while the launcher says "EFS at DIR".
        self.efs_dir = os.path.abspath(efs_dir) if efs_dir else None
        self.fsx_dir = os.path.abspath(fsx_dir) if fsx_dir else None  # the nodes' FSx mount
        self.secrets_file = (
            Path(secrets_file) if secrets_file else secret_values.default_file()
        ).absolute()
        self.store = store or Store()

    def owns(self, job_id: str) -> bool:
        return is_local(job_id)

    def schedule(self, requests: Requests, say: Say = lambda _: None) -> str:
        from launcher.docker_client import docker_client

        submit = requests.submit
        register = as_one_node(requests.register, submit.get("parameters", {}))
        register = with_overrides(register, submit)  # e.g. the node watch's token, as on Batch
        containers = [c for _, c in node_ranges(register)]
        depends_on: list[dict[str, str]] = list(submit.get("dependsOn", []))
        array_size = submit.get("arrayProperties", {}).get("size")
        # A job that waits, or an array, starts under its supervisor; a multi-node job that
        # starts now needs its rendezvous port (a one-node job's torchrun finds its own).
        waits = bool(depends_on) or array_size is not None
        single = is_single(requests.register)
        _validate(
            containers,
            self.efs_dir,
            self.secrets_file,
            starts_now=not (waits or single),
            network=self.network,
            nodes=int(register["nodeProperties"]["numNodes"]),
        )
        self._check_dependencies(depends_on, array_size)
        client = docker_client()
        infiniband = Path("/dev/infiniband").is_dir()
        gpus = Path("/dev/nvidia0").exists()
        missing = missing_devices(
            efa=not infiniband
            and any(
                d["hostPath"].startswith("/dev/infiniband/")
                for c in containers
                for d in c.get("linuxParameters", {}).get("devices", [])
            ),
            gpu=not gpus
            and any(r["type"] == "GPU" for c in containers for r in c["resourceRequirements"]),
        )
        if missing:
            say(missing)
        for directory in (self.efs_dir, self.fsx_dir):
            if directory is not None:  # the job's data and checkpoints: the user's alone
                private.directory(Path(os.path.realpath(directory)))
        record = Record(
            job_id=f"{PREFIX}{uuid.uuid4()}",
            name=submit["jobName"],
            definition=register["jobDefinitionName"],
            queue=self.queue or "local",
            status=JobState.PENDING if waits else JobState.STARTING,
            created_at=now_ms(),
            register=register,
            submit=submit,
            efs_dir=self.efs_dir,
            fsx_dir=self.fsx_dir,
            secrets_file=str(self.secrets_file)
            if any(c.get("secrets") for c in containers)
            else None,
            infiniband=infiniband,
            gpus=gpus,
            timeout=register.get("timeout", {}).get("attemptDurationSeconds"),
            writer=Process.of(os.getpid()),
            single_node=single,
            array_size=array_size,
            depends_on=depends_on,
            network=self.network.value,
            pool=self.pool,
        )
        self.store.create(record)
        try:
            for image in sorted({c["image"] for c in containers}):
                engine.pull(client, image)
            if not waits:
                record.containers, record.ulimit_caps = engine.start_nodes(client, record, say)
        except (RemoteError, KeyboardInterrupt) as exc:  # Ctrl-C: no job left STARTING for ever
            record.status = JobState.FAILED
            record.status_reason = (
                INTERRUPTED_REASON if isinstance(exc, KeyboardInterrupt) else "could not start"
            )
            record.stopped_at = now_ms()
            self.store.save(record, Owner.SCHEDULER)
            raise
        if not waits:
            record.status, record.started_at = JobState.RUNNING, now_ms()
        self._hand_to_supervisor(record)
        return record.job_id

    def _check_dependencies(self, depends_on: list[dict[str, str]], size: int | None) -> None:
        """Every job waited for is a local job; ``N_TO_N`` pairs arrays of one size."""
        for entry in depends_on:
            dependency = Dependency.from_batch(entry)
            if not is_local(dependency.job_id):
                raise UsageError(
                    f"--after {dependency}: not a local job id; a local job waits for local "
                    "jobs only"
                )
            other = self.store.load(dependency.job_id)  # UsageError: no such local job
            if dependency.each and other.array_size != size:
                raise UsageError(
                    f"--after {dependency}: that job is "
                    + (f"an array of {other.array_size}" if other.array_size else "no array")
                    + f"; ':each' pairs children of two arrays of one size ({size})"
                )

    def _hand_to_supervisor(self, record: Record) -> None:
        """Start the supervisor, make it the record's writer, then let it go."""
        job_dir = self.store.job_dir(record.job_id)
        with os.fdopen(private.append(job_dir / "supervisor.log"), "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", supervisor.__name__, str(self.store.base), record.job_id],
                start_new_session=True,  # a Ctrl-C in this terminal is not the job's end
                preexec_fn=supervisor.before_exec,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        assert process.stdin is not None
        try:
            self.store.hand_over(
                record, Owner.SCHEDULER, Owner.SUPERVISOR, writer=Process.of(process.pid)
            )
            process.stdin.write(supervisor.GO)
        finally:
            process.stdin.close()  # at EOF without the word, the supervisor leaves the job

    def describe(self, job_id: str, nodes: bool = False) -> JobInfo:
        return job_info(self.store.load(job_id), self.store)

    def cancel(self, job_id: str) -> JobInfo:
        record = self.store.load(job_id)
        if record.status.terminal:
            raise already_ended(record.job_id, record.status)
        info = job_info(record, self.store)
        if record.array_index is not None:
            return self._cancel_child(record, info)
        deadline = time.monotonic() + HANDOVER_SECONDS
        asked: Process | None = None
        while not record.status.terminal:
            writer = record.writer
            if writer is None or not writer.alive():
                try:
                    self._end_abandoned(record)
                except OwnershipError:
                    pass  # a writer took the record over meanwhile: ask it instead
                else:
                    return info
            elif record.owner is Owner.SUPERVISOR and writer != asked:
                writer.terminate()  # the supervisor stops the nodes and records the cancel
                asked = writer
            # else: the launcher scheduling it has yet to hand it to its supervisor
            if time.monotonic() > deadline:
                raise RemoteError(
                    f"local job {record.job_id}: its {record.owner.value} did not stop it"
                )
            time.sleep(0.1)
            record = self.store.load(job_id)
        return info

    def cancel_many(self, job_ids: Sequence[str]) -> list[CancelOutcome]:
        """Every record read first (an unknown id stops it here), then one ``cancel`` a job:
        locally there is no call to save."""
        records: dict[str, Record] = {}
        missing = []
        for handle in dict.fromkeys(job_ids):
            try:
                record = self.store.load(handle)
            except UsageError:
                missing.append(handle)
            else:
                records.setdefault(record.job_id, record)
        if missing:
            raise no_such_jobs(missing, "among the local jobs")
        outcomes = []
        for record in records.values():
            try:
                outcomes.append(CancelOutcome(self.cancel(record.job_id)))
            except LauncherError as exc:
                outcomes.append(CancelOutcome(job_info(record, self.store), exc))
        return outcomes

    def _cancel_child(self, record: Record, info: JobInfo) -> JobInfo:
        """One child of an array: its writer (the parent's supervisor) is asked through the
        store and ends it; the parent fails once its children are done, as on Batch."""
        self.store.request_cancel(record.job_id)
        deadline = time.monotonic() + HANDOVER_SECONDS
        while not record.status.terminal:
            writer = record.writer
            if writer is None or not writer.alive():
                self._end_abandoned(record)
                break
            if time.monotonic() > deadline:
                raise RemoteError(f"local job {record.job_id}: its supervisor did not stop it")
            time.sleep(0.1)
            record = self.store.load(record.job_id)
        return info

    def _end_abandoned(self, record: Record) -> None:
        """The job's writer is gone: take the record over, stop the nodes, record the end."""
        from launcher.docker_client import docker_client

        record = self.store.hand_over(
            record, record.owner, Owner.CANCELLER, writer=Process.of(os.getpid())
        )
        ended = [record]
        if record.is_array:
            assert record.array_size is not None
            children = (self.store.child(record, i) for i in range(record.array_size))
            ended += [
                self.store.hand_over(c, c.owner, Owner.CANCELLER, writer=record.writer)
                for c in children
                if c is not None and not c.status.terminal
            ]
        client = docker_client() if any(r.containers for r in ended) else None
        for each in ended:
            for cid in each.containers:
                engine.remove(client, cid)
            engine.forget_runtime(each)  # the dead supervisor's secrets and gate
            each.status, each.status_reason = JobState.FAILED, LOST_REASON
            each.stopped_at = now_ms()
            self.store.save(each, Owner.CANCELLER)

    def resubmit(self, job_id: str, say: Say = lambda _: None) -> tuple[str, str]:
        """The same job again, with the first one's checkpoint directory; (new id, dir)."""
        record = self.store.load(job_id)
        register, submit = record.register, record.submit
        checkpoint, tags = resumption({**register, "tags": submit.get("tags")}, record.job_id)
        register = with_environment(register, {"LAUNCHER_CHECKPOINT_DIR": checkpoint})
        if record.single_node:  # the record keeps it as one node; schedule wants its shape
            ((_, container),) = node_ranges(register)
            rest = {k: v for k, v in register.items() if k not in ("nodeProperties", "type")}
            register = {**rest, "type": "container", "containerProperties": container}
        self.efs_dir = self.efs_dir or record.efs_dir
        self.fsx_dir = self.fsx_dir or record.fsx_dir
        # Its dependencies are behind it: the resubmission does not wait again (as on AWS).
        again = {k: v for k, v in submit.items() if k != "dependsOn"}
        return self.schedule(Requests(register, {**again, "tags": tags}), say), checkpoint

    def enter(self, job_id: str, node: int, command: Sequence[str]) -> int:
        from launcher.local.shell import local_session

        return local_session(self._running_container(job_id, node), command)

    def _running_container(self, job_id: str, node: int) -> str:
        """The running container of ``node`` in the job's current attempt; UsageError in one
        line when the job, or that node, is not running."""
        from launcher.docker_client import docker_client

        record = self.store.load(job_id)
        if (refused := refusal(job_info(record), node)) is not None:
            raise refused
        if node >= len(record.containers):  # a worker that could not start: the main node ended
            raise UsageError(f"node {node} of job {record.job_id} has no container in this attempt")
        container = record.containers[node]
        code = engine.exit_code(docker_client(), container)
        state = "RUNNING" if code is None else "SUCCEEDED" if code == 0 else "FAILED"
        if (refused := node_refusal(record.job_id, node, state)) is not None:
            raise refused
        return container

    def list(
        self,
        include_finished: bool = False,
        name: str | None = None,
        images: bool = False,
        tags: bool = False,
    ) -> list[JobInfo]:
        # A record keeps its image and tags, so ``images`` and ``tags`` cost nothing here.
        # Jobs, not array children (Batch lists those only by their parent's id).
        records = (
            r
            for r in self.store.records()
            if r.array_index is None and self.queue in (None, r.queue)
        )
        jobs = (job_info(r, self.store) for r in records)
        return newest_first((j for j in jobs if name in (None, j.name)), include_finished)

    def log_iter(
        self,
        job_id: str,
        node: int | None = None,
        since: float | None = None,
        follow: bool = False,
        attempt: int | None = None,
        waiting: ProgressFn | None = None,
        poll: float = 0.2,
    ) -> Iterator[LogLine]:
        record = self.store.load(job_id)
        watch = self.watch(waiting) if waiting is not None and follow else None
        if record.is_array:
            raise UsageError(
                f"job {record.job_id} is an array of {record.array_size}: its children have the "
                f"logs; pass --index 0-{(record.array_size or 1) - 1}"
            )
        if node is not None and not 0 <= node < record.nodes:
            raise UsageError(f"--node {node}: job {record.job_id} has nodes 0-{record.nodes - 1}")
        latest = record.attempt
        if attempt is not None and not 1 <= attempt <= latest:
            raise UsageError(
                f"--attempt {attempt}: job {record.job_id} has "
                + (f"attempts 1-{latest}" if latest > 1 else "one attempt so far")
            )
        # Following without --attempt goes on into each retry, as the AWS follower's streams
        # do: the attempt read is the record's latest at each poll.
        chosen = attempt
        attempt = attempt or latest
        nodes = [node] if node is not None else list(range(record.nodes))
        offsets = dict.fromkeys(nodes, 0)
        partial = dict.fromkeys(nodes, b"")

        def lines(n: int, data: bytes) -> Iterator[LogLine]:
            stamp, message = parse_log_line(data)
            if since is None or stamp is None or stamp >= since:
                yield LogLine(n, message, stamp)

        def read(n: int) -> Iterator[LogLine]:
            path = self.store.log_path(record.job_id, n, attempt)
            if not path.exists():
                return
            with open(path, "rb") as f:
                f.seek(offsets[n])
                data = partial[n] + f.read()
                offsets[n] = f.tell()
            *complete, partial[n] = data.split(b"\n")
            for raw in complete:
                yield from lines(n, raw)

        def flush() -> Iterator[LogLine]:
            for n in nodes:
                yield from read(n)
                if partial[n]:
                    yield from lines(n, partial[n])
                offsets[n], partial[n] = 0, b""

        while True:
            now = self.store.load(job_id)
            done = now.status.terminal
            if watch is not None:
                watch.observe(job_info(now, self.store))
            while follow and chosen is None and attempt < now.attempt:
                yield from flush()  # the rest of the attempt that ended, then the next one's
                attempt += 1
            for n in nodes:
                yield from read(n)
            if not follow or done:
                for n in nodes:
                    if partial[n]:
                        yield from lines(n, partial[n])
                return
            time.sleep(poll)

    def watch(self, progress: ProgressFn) -> Watch:
        """A waiting line: a local job waits only for its dependencies (read from their
        records, no call)."""
        return Watch(_DependencyProbe(self), progress)

    def wait(self, job_id: str, timeout: float | None = None, poll: float = 0.2) -> JobInfo:
        """The job once it ends, or as it is after ``timeout`` seconds; for tests and the demo."""
        end = time.monotonic() + timeout if timeout else None
        while not (info := self.describe(job_id)).state.terminal:
            if end and time.monotonic() > end:
                return info
            time.sleep(poll)
        return info


class _DependencyProbe:
    """Why a local job waits (``launcher.job.waiting.Probe``): the dependencies not yet done."""

    def __init__(self, backend: LocalBackend) -> None:
        self.backend = backend

    def probe(self, info: JobInfo, turn: int) -> Facts:
        def state_of(job_id: str) -> str:
            try:
                return self.backend.describe(job_id).state.value
            except UsageError:
                return "unknown"

        return Facts(waits_for=pending(info.depends_on, state_of) or "")

    def look(self, info: JobInfo) -> Facts:
        return self.probe(info, 0)
