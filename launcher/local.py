"""The local backend: a multi-node job on the local Docker engine, run as AWS Batch runs it.

The job definition is the one ``jobdef.build`` made for AWS; ``node_container`` turns each
node's range of it into one container (host networking, so all traffic stays on 127.0.0.1)
with Batch's multi-node environment. The main node starts first. A detached supervisor
process enforces the timeout, follows Batch's rules (the job ends with the main node: its exit
code decides, the other nodes are stopped), saves every node's log with timestamps and
removes the containers.

State lives in ``$LAUNCHER_LOCAL_STATE`` (default ``~/.local/state/efa-batch``): one JSON file
per job and one log file per node. The state file has one writer at a time: ``schedule`` until
it hands the job to the supervisor, the supervisor from then on. ``cancel`` asks the
supervisor (SIGTERM) and never writes the file while the supervisor lives.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from launcher.backend import Say, newest_first
from launcher.errors import RemoteError, UsageError
from launcher.job import CANCEL_REASON, BackendName, JobInfo, JobState, LogLine, NodeStatus
from launcher.jobdef import (
    Requests,
    as_one_node,
    groups_of,
    node_ranges,
    resumption,
    with_environment,
)
from launcher.jobspec import DEVICE_PERMISSIONS

PREFIX = "local-"
LABEL = "efa-batch.job"
_PERMS = {word: letter for letter, word in DEVICE_PERMISSIONS.items()}
TIMEOUT_REASON = "Job attempt duration exceeded timeout"
EXIT_REASON = "Essential container in task exited"
LOST_REASON = "the local supervisor is gone; cancelled with launcher cancel"


def state_dir() -> Path:
    default = Path.home() / ".local" / "state" / "efa-batch"
    path = Path(os.environ.get("LAUNCHER_LOCAL_STATE", default)) / "jobs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def is_local(handle: str) -> bool:
    return handle.rsplit(":", 1)[-1].startswith(PREFIX)


# --- pure: job definition -> docker run arguments --------------------------------------------


def node_container(
    container: dict,
    *,
    job_id: str,
    job_name: str,
    queue: str,
    node: int,
    nodes: int,
    efs_dir: str,
    infiniband: bool,
    gpus: bool,
    attempt: int = 1,
    ulimit_caps: dict[str, int] | None = None,
) -> dict:
    """Keyword arguments for ``docker.containers.run`` for one node of the job."""
    env = {e["name"]: e["value"] for e in container.get("environment", [])}
    env.update(
        {
            "AWS_BATCH_JOB_ID": f"{job_id}#{node}",
            "AWS_BATCH_JOB_ATTEMPT": str(attempt),
            "AWS_BATCH_JOB_NUM_NODES": str(nodes),
            "AWS_BATCH_JOB_NODE_INDEX": str(node),
            "AWS_BATCH_JOB_MAIN_NODE_INDEX": "0",
            "AWS_BATCH_JQ_NAME": queue,
            "AWS_BATCH_CE_NAME": "local",
            # Every node is on this machine: keep the main node off its non-loopback addresses.
            "LAUNCHER_MAIN_ADDR": "127.0.0.1",
        }
    )
    if node != 0:  # as on Batch: only the workers are told where the main node is
        env["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"] = "127.0.0.1"
    if not infiniband and "LAUNCHER_EFA_DEVICES" in env:
        # The devices are dropped here (warned about once): the prelude expects none.
        env["LAUNCHER_EFA_DEVICES"] = "0"
    volumes: dict[str, dict] = {}
    sources = {v["name"]: v for v in container.get("volumes", [])}
    for mount in container.get("mountPoints", []):
        volume = sources[mount["sourceVolume"]]
        host = efs_dir if "efsVolumeConfiguration" in volume else volume["host"]["sourcePath"]
        volumes[host] = {
            "bind": mount["containerPath"],
            "mode": "ro" if mount.get("readOnly") else "rw",
        }
    linux = container.get("linuxParameters", {})
    devices = [
        f"{d['hostPath']}:{d['containerPath']}:{''.join(_PERMS[p] for p in d['permissions'])}"
        for d in linux.get("devices", [])
        if infiniband or not d["hostPath"].startswith("/dev/infiniband/")
    ]
    import docker.types

    kwargs = {
        "image": container["image"],
        "command": container["command"],
        "environment": env,
        "network_mode": "host",
        "name": f"efa-batch-{job_id.removeprefix(PREFIX)[:12]}-{attempt}-{node}",
        "labels": {LABEL: job_id, f"{LABEL}.node": str(node), f"{LABEL}.name": job_name},
        "ulimits": [
            _ulimit(u, (ulimit_caps or {}).get(u["name"])) for u in container.get("ulimits", [])
        ],
        "shm_size": f"{linux.get('sharedMemorySize', 64)}m",
        "init": bool(linux.get("initProcessEnabled")),
        "devices": devices,
        "volumes": volumes,
        "detach": True,
    }
    wanted = next(
        (int(r["value"]) for r in container.get("resourceRequirements", []) if r["type"] == "GPU"),
        0,
    )
    if wanted and gpus:
        kwargs["device_requests"] = [
            docker.types.DeviceRequest(count=wanted, capabilities=[["gpu"]])
        ]
    return kwargs


def _ulimit(limit: dict, cap: int | None):
    import docker.types

    def capped(value: int) -> int:
        if cap is None or cap < 0:
            return value
        return cap if value < 0 else min(value, cap)

    return docker.types.Ulimit(
        name=limit["name"], soft=capped(limit["softLimit"]), hard=capped(limit["hardLimit"])
    )


def host_ulimit_caps() -> dict[str, int]:
    """This machine's hard limits, for a daemon that may not raise them (no CAP_SYS_RESOURCE)."""
    import resource

    caps = {}
    for name, which in (
        ("memlock", resource.RLIMIT_MEMLOCK),
        ("stack", resource.RLIMIT_STACK),
        ("nofile", resource.RLIMIT_NOFILE),
    ):
        hard = resource.getrlimit(which)[1]
        caps[name] = -1 if hard == resource.RLIM_INFINITY else hard
    return caps


def parse_log_line(raw: bytes) -> tuple[float | None, str]:
    """Docker's ``--timestamps`` line (RFC 3339, nanoseconds) -> (epoch seconds, message)."""
    text = raw.decode(errors="replace")
    stamp, sep, message = text.partition(" ")
    if not sep or not stamp.endswith("Z") or "T" not in stamp:
        return None, text
    whole, _, fraction = stamp[:-1].partition(".")
    try:
        seconds = datetime.fromisoformat(whole + "+00:00").timestamp()
    except ValueError:
        return None, text
    return seconds + float(f"0.{fraction or 0}"), message


# --- state (one writer at a time, see the module docstring) -----------------------------------


def _path(job_id: str) -> Path:
    return state_dir() / f"{job_id}.json"


def load(handle: str) -> dict:
    job_id = handle.rsplit(":", 1)[-1]
    try:
        return json.loads(_path(job_id).read_text())
    except FileNotFoundError:
        raise UsageError(f"job {job_id}: no such local job") from None


def _save(job: dict) -> None:
    tmp = _path(job["jobId"]).with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(job, indent=2))
    tmp.replace(_path(job["jobId"]))


def log_path(job_id: str, node: int, attempt: int = 1) -> Path:
    return state_dir() / job_id / f"attempt-{attempt}" / f"node-{node}.log"


def _supervisor_pid(job_id: str) -> int | None:
    try:
        return int((state_dir() / job_id / "supervisor.pid").read_text())
    except (OSError, ValueError):
        return None


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    return True


def job_info(job: dict) -> JobInfo:
    codes = job.get("exitCodes") or []
    state = JobState(job["status"])
    nodes = job["nodeProperties"]["numNodes"]
    return JobInfo(
        job_id=job["jobId"],
        name=job["jobName"],
        state=state,
        reason=job.get("statusReason"),
        nodes=nodes,
        queue="local",
        definition=job.get("jobDefinition"),
        image=job["nodeProperties"]["nodeRangeProperties"][0]["container"]["image"],
        attempts=job.get("attempt", 1) if state != JobState.STARTING else 0,
        detail=job.get("reason"),
        created_at=job["createdAt"] / 1000,
        started_at=job["startedAt"] / 1000 if job.get("startedAt") else None,
        stopped_at=job["stoppedAt"] / 1000 if job.get("stoppedAt") else None,
        node_status=tuple(
            NodeStatus(
                index=n,
                state=state,
                reason=job.get("statusReason") if state.terminal else None,
                exit_code=codes[n] if n < len(codes) else None,
            )
            for n in range(nodes)
        ),
        groups=groups_of(job),
        backend=BackendName.LOCAL,
        cancelled=job.get("statusReason") in (CANCEL_REASON, LOST_REASON),
        last_exit_code=next(iter(job["history"][-1]["exitCodes"]), None)
        if job["history"]
        else None,
    )


# --- starting ---------------------------------------------------------------------------------


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


def _docker_failure(what: str, exc: Exception) -> RemoteError:
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return RemoteError(f"Docker: {what}: {detail}")


class LocalBackend:
    name = BackendName.LOCAL

    def __init__(self, queue: str = "local", efs_dir: str | None = None) -> None:
        self.queue = queue
        self.efs_dir = efs_dir

    def owns(self, job_id: str) -> bool:
        return is_local(job_id)

    def schedule(self, requests: Requests, say: Say = lambda _: None) -> str:
        from launcher.docker_client import docker_client

        submit = requests.submit
        register = as_one_node(requests.register, submit.get("parameters", {}))
        ranges = node_ranges(register)
        containers = [c for _, c in ranges]
        env = {e["name"]: e["value"] for e in containers[0].get("environment", [])}
        if "LAUNCHER_MAIN_PORT" in env:
            _check_port(int(env["LAUNCHER_MAIN_PORT"]))
        if any(c.get("secrets") for c in containers):
            raise UsageError("a local run cannot read Secrets Manager secrets (job 'secrets')")
        uses_efs = any(
            "efsVolumeConfiguration" in v for c in containers for v in c.get("volumes", [])
        )
        if uses_efs and self.efs_dir is None:
            raise UsageError("a local run needs a directory standing in for EFS (--local-efs)")
        client = docker_client()
        infiniband = Path("/dev/infiniband").is_dir()
        if not infiniband and any(
            d["hostPath"].startswith("/dev/infiniband/")
            for c in containers
            for d in c.get("linuxParameters", {}).get("devices", [])
        ):
            say("no /dev/infiniband on this machine: EFA devices dropped (NCCL falls back to TCP)")
        gpus = Path("/dev/nvidia0").exists()
        if not gpus and any(
            r["type"] == "GPU" for c in containers for r in c["resourceRequirements"]
        ):
            say("no NVIDIA GPU on this machine: the job runs without GPUs")
        if self.efs_dir is not None:
            Path(self.efs_dir).mkdir(parents=True, exist_ok=True)
        job_id = f"{PREFIX}{uuid.uuid4()}"
        job = {
            "jobId": job_id,
            "jobName": submit["jobName"],
            "jobQueue": "local",
            "jobDefinition": register["jobDefinitionName"],
            "status": "STARTING",
            "createdAt": int(time.time() * 1000),
            "nodeProperties": register["nodeProperties"],
            "timeout": register.get("timeout", {}).get("attemptDurationSeconds"),
            "retryStrategy": register.get("retryStrategy", {}),
            "requests": {"register": register, "submit": submit},
            "history": [],
            "efsDir": self.efs_dir,
            "queueName": self.queue,
            "infiniband": infiniband,
            "gpus": gpus,
            "attempt": 1,
            "containers": [],
        }
        _save(job)
        (state_dir() / job_id / "attempt-1").mkdir(parents=True, exist_ok=True)
        try:
            for image in sorted({c["image"] for c in containers}):
                _pull(client, image)
            job["containers"], caps = _start_nodes(client, job, say)
        except RemoteError:
            job.update(status="FAILED", statusReason="could not start", stoppedAt=_now_ms())
            _save(job)
            raise
        job.update(status="RUNNING", startedAt=_now_ms(), ulimitCaps=caps)
        _save(job)  # the last write before the supervisor owns the file
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "launcher.local", job_id],
            start_new_session=True,
            # SIGTERM (a cancel) stays pending until the supervisor's handler is installed.
            preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM}),
            stdin=subprocess.DEVNULL,
            stdout=open(state_dir() / job_id / "supervisor.log", "ab"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        (state_dir() / job_id / "supervisor.pid").write_text(str(supervisor.pid))
        return job_id

    def describe(self, job_id: str, nodes: bool = False) -> JobInfo:
        return job_info(load(job_id))

    def cancel(self, job_id: str) -> JobInfo:
        job = load(job_id)
        if JobState(job["status"]).terminal:
            raise UsageError(f"job {job['jobId']} already {job['status']}; nothing to cancel")
        info = job_info(job)
        pid = _supervisor_pid(job["jobId"])
        if _alive(pid):
            os.kill(pid, signal.SIGTERM)  # the supervisor stops the nodes and records it
            deadline = time.monotonic() + 60
            while _alive(pid):
                if JobState(load(job_id)["status"]).terminal:
                    return info
                if time.monotonic() > deadline:
                    raise RemoteError(f"local job {job['jobId']}: the supervisor did not stop it")
                time.sleep(0.1)
            job = load(job_id)
            if JobState(job["status"]).terminal:
                return info
        # No supervisor (it died, or never started): nobody else writes the state now.
        from launcher.docker_client import docker_client

        client = docker_client()
        for cid in job["containers"]:
            _remove(client, cid)
        job.update(status="FAILED", statusReason=LOST_REASON, stoppedAt=_now_ms())
        _save(job)
        return info

    def resubmit(self, job_id: str, say: Say = lambda _: None) -> tuple[str, str]:
        """The same job again, with the first one's checkpoint directory; (new id, dir)."""
        job = load(job_id)
        register, submit = job["requests"]["register"], job["requests"]["submit"]
        checkpoint, tags = resumption({**register, "tags": submit.get("tags")}, job["jobId"])
        register = with_environment(register, {"LAUNCHER_CHECKPOINT_DIR": checkpoint})
        submit = {**submit, "tags": tags}
        if self.efs_dir is None:
            self.efs_dir = job["efsDir"]
        return self.schedule(Requests(register, submit), say), checkpoint

    def list(self, include_finished: bool = False, name: str | None = None) -> list[JobInfo]:
        jobs = (job_info(json.loads(p.read_text())) for p in state_dir().glob(f"{PREFIX}*.json"))
        return newest_first((j for j in jobs if name in (None, j.name)), include_finished)

    def log_iter(
        self,
        job_id: str,
        node: int | None = None,
        since: float | None = None,
        follow: bool = False,
        attempt: int | None = None,
        poll: float = 0.2,
    ) -> Iterator[LogLine]:
        job = load(job_id)
        count = job["nodeProperties"]["numNodes"]
        if node is not None and not 0 <= node < count:
            raise UsageError(f"--node {node}: job {job['jobId']} has nodes 0-{count - 1}")
        latest = job.get("attempt", 1)
        if attempt is not None and not 1 <= attempt <= latest:
            raise UsageError(
                f"--attempt {attempt}: job {job['jobId']} has "
                + (f"attempts 1-{latest}" if latest > 1 else "one attempt so far")
            )
        attempt = attempt or latest
        nodes = [node] if node is not None else list(range(count))
        offsets = dict.fromkeys(nodes, 0)
        partial = dict.fromkeys(nodes, b"")

        def lines(n: int, data: bytes) -> Iterator[LogLine]:
            stamp, message = parse_log_line(data)
            if since is None or stamp is None or stamp >= since:
                yield LogLine(n, message, stamp)

        while True:
            done = JobState(load(job_id)["status"]).terminal
            for n in nodes:
                path = log_path(job["jobId"], n, attempt)
                if not path.exists():
                    continue
                with open(path, "rb") as f:
                    f.seek(offsets[n])
                    data = partial[n] + f.read()
                    offsets[n] = f.tell()
                *complete, partial[n] = data.split(b"\n")
                for raw in complete:
                    yield from lines(n, raw)
            if not follow or done:
                for n in nodes:
                    if partial[n]:
                        yield from lines(n, partial[n])
                return
            time.sleep(poll)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _container_for(job: dict, node: int) -> dict:
    for (first, last), container in node_ranges(job):
        if first <= node <= last:
            return container
    raise UsageError(f"node {node} is in no node range of job {job['jobId']}")


def _start_nodes(client, job: dict, say: Say) -> tuple[list[str], dict | None]:
    """Start every node, the main node first; return container ids and the ulimit caps used."""
    caps = job.get("ulimitCaps")
    started: list[str] = []
    nodes = job["nodeProperties"]["numNodes"]
    try:
        for node in range(nodes):
            while True:
                run = node_container(
                    _container_for(job, node),
                    job_id=job["jobId"],
                    job_name=job["jobName"],
                    queue=job["queueName"],
                    node=node,
                    nodes=nodes,
                    efs_dir=job["efsDir"],
                    infiniband=job["infiniband"],
                    gpus=job["gpus"],
                    attempt=job["attempt"],
                    ulimit_caps=caps,
                )
                try:
                    started.append(client.containers.run(**run).id)
                    break
                except Exception as exc:
                    if caps is not None or "rlimit" not in str(exc):
                        raise
                    _remove(client, run["name"])
                    caps = host_ulimit_caps()
                    say(
                        "the Docker daemon may not raise ulimits here: memlock/stack/nofile "
                        f"capped at this machine's hard limits {caps}"
                    )
    except Exception as exc:
        for cid in started:
            _remove(client, cid)
        if isinstance(exc, UsageError):
            raise
        raise _docker_failure("could not start the job's containers", exc) from exc
    return started, caps


def _pull(client, image: str) -> None:
    import docker.errors

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        try:
            client.images.pull(image)
        except docker.errors.APIError as exc:
            raise _docker_failure(f"could not pull {image}", exc) from exc


def _remove(client, container_id: str) -> None:
    import docker.errors

    with contextlib.suppress(docker.errors.NotFound):
        client.containers.get(container_id).remove(force=True)


def _exit_code(client, container_id: str) -> int | None:
    import docker.errors

    try:
        c = client.containers.get(container_id)
    except docker.errors.NotFound:
        return -1
    return (
        None if c.status in ("created", "running", "restarting") else c.attrs["State"]["ExitCode"]
    )


# --- the supervisor (python -m launcher.local JOB_ID) ---------------------------------------


def supervise(job_id: str, poll: float = 0.2) -> None:
    """Follow a started job to its end, attempt after attempt as its retry rules say; the
    state file's only writer from here on."""
    from launcher.docker_client import docker_client
    from launcher.retry import retries

    cancelled = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: cancelled.set())
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # blocked by schedule()
    client = docker_client()
    job = load(job_id)
    while True:
        reason, main_exit, codes = _run_attempt(client, job, cancelled, poll)
        success = reason is None and main_exit == 0
        status_reason = reason or (None if success else EXIT_REASON)
        job["history"].append(
            {"attempt": job["attempt"], "exitCodes": codes, "statusReason": status_reason}
        )
        again = (
            not success
            and reason is None  # a cancel or a timeout ends the job
            and retries(
                job["retryStrategy"],
                job["attempt"],
                status_reason=status_reason,
                reason=None,
                exit_code=main_exit,
            )
        )
        if not again:
            break
        job["attempt"] += 1
        (state_dir() / job_id / f"attempt-{job['attempt']}").mkdir(parents=True, exist_ok=True)
        try:
            job["containers"], job["ulimitCaps"] = _start_nodes(client, job, lambda _: None)
        except RemoteError as exc:
            status_reason, codes = f"could not start attempt {job['attempt']}: {exc}", []
            break
        job.update(status="RUNNING", startedAt=_now_ms())
        _save(job)
    job.update(
        status="SUCCEEDED" if success else "FAILED",
        statusReason=status_reason,
        exitCodes=codes,
        stoppedAt=_now_ms(),
    )
    _save(job)


def _run_attempt(client, job: dict, cancelled: threading.Event, poll: float):
    """One attempt: copy the logs, wait for the main node (or the timeout, or a cancel), stop
    every node, remove the containers; (reason or None, main exit code, every exit code)."""
    containers, attempt = job["containers"], job["attempt"]

    def copy_logs(node: int, cid: str) -> None:
        with open(log_path(job["jobId"], node, attempt), "ab") as out:
            try:
                stream = client.containers.get(cid).logs(stream=True, follow=True, timestamps=True)
                for chunk in stream:
                    out.write(chunk)
                    out.flush()
            except Exception:
                pass  # container removed: nothing more to copy

    threads = [
        threading.Thread(target=copy_logs, args=(n, c), daemon=True)
        for n, c in enumerate(containers)
    ]
    for t in threads:
        t.start()
    deadline = time.time() + job["timeout"] if job.get("timeout") else None
    reason = None
    while (main_exit := _exit_code(client, containers[0])) is None:
        if cancelled.is_set():
            reason = CANCEL_REASON
            break
        if deadline and time.time() > deadline:
            reason = TIMEOUT_REASON
            break
        time.sleep(poll)
    for cid in containers:  # the main node ended (or time ran out): stop every node
        with contextlib.suppress(Exception):
            client.containers.get(cid).stop(timeout=5)
    for t in threads:
        t.join(timeout=10)
    codes = [_exit_code(client, cid) for cid in containers]
    for cid in containers:
        _remove(client, cid)
    if cancelled.is_set() and reason is None:
        reason = CANCEL_REASON  # the cancel arrived as the main node ended
    return reason, main_exit, codes


def wait(job_id: str, timeout: float | None = None, poll: float = 0.2) -> JobInfo:
    """Until the job ends (or ``timeout`` seconds pass); for tests and the demo."""
    end = time.monotonic() + timeout if timeout else None
    while not (info := job_info(load(job_id))).state.terminal:
        if end and time.monotonic() > end:
            return info
        time.sleep(poll)
    return info


if __name__ == "__main__":
    supervise(sys.argv[1])
