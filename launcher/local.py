"""Run a multi-node job on the local Docker engine, the way AWS Batch runs it on a cluster.

The job definition is the one ``jobdef.build`` made for AWS; ``node_container`` turns it into
one container per node (host networking, so all traffic stays on 127.0.0.1) with Batch's
multi-node environment. The main node starts first. A detached supervisor process enforces
the timeout, follows Batch's rules (the job ends with the main node: its exit code decides,
the other nodes are stopped), saves every node's log and removes the containers.

State lives in ``$LAUNCHER_LOCAL_STATE`` (default ``~/.local/state/efa-batch``): one JSON
file per job and one log file per node.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from launcher.errors import UsageError
from launcher.jobdef import Requests

PREFIX = "local-"
LABEL = "efa-batch.job"
TERMINAL = ("SUCCEEDED", "FAILED")
_PERMS = {"READ": "r", "WRITE": "w", "MKNOD": "m"}
TIMEOUT_REASON = "Job attempt duration exceeded timeout"
EXIT_REASON = "Essential container in task exited"


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
    ulimit_caps: dict[str, int] | None = None,
) -> dict:
    """Keyword arguments for ``docker.containers.run`` for one node of the job."""
    env = {e["name"]: e["value"] for e in container.get("environment", [])}
    env.update(
        {
            "AWS_BATCH_JOB_ID": f"{job_id}#{node}",
            "AWS_BATCH_JOB_ATTEMPT": "1",
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
        "name": f"efa-batch-{job_id.removeprefix(PREFIX)[:12]}-{node}",
        "labels": {LABEL: job_id, f"{LABEL}.node": str(node), f"{LABEL}.name": job_name},
        "ulimits": [_ulimit(u, (ulimit_caps or {}).get(u["name"])) for u in container["ulimits"]],
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


# --- state -----------------------------------------------------------------------------------


def _path(job_id: str) -> Path:
    return state_dir() / f"{job_id}.json"


def load(handle: str) -> dict:
    job_id = handle.rsplit(":", 1)[-1]
    try:
        return json.loads(_path(job_id).read_text())
    except FileNotFoundError:
        raise UsageError(f"job {job_id}: no such local job") from None


def _save(job: dict) -> None:
    tmp = _path(job["jobId"]).with_suffix(".tmp")
    tmp.write_text(json.dumps(job, indent=2))
    tmp.replace(_path(job["jobId"]))


def log_path(job_id: str, node: int) -> Path:
    return state_dir() / job_id / f"node-{node}.log"


def list_jobs(include_finished: bool) -> list[dict]:
    jobs = [json.loads(p.read_text()) for p in state_dir().glob(f"{PREFIX}*.json")]
    if not include_finished:
        jobs = [j for j in jobs if j["status"] not in TERMINAL]
    return sorted(jobs, key=lambda j: j["createdAt"], reverse=True)


# --- starting, supervising, cancelling --------------------------------------------------------


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


def start(
    requests: Requests, queue: str, efs_dir: str, warn: Callable[[str], None] = lambda m: None
) -> str:
    from launcher.docker_client import docker_client

    register, submit = requests.register, requests.submit
    container = register["nodeProperties"]["nodeRangeProperties"][0]["container"]
    env = {e["name"]: e["value"] for e in container["environment"]}
    _check_port(int(env["LAUNCHER_MAIN_PORT"]))
    client = docker_client()
    nodes = register["nodeProperties"]["numNodes"]
    infiniband = Path("/dev/infiniband").is_dir()
    if not infiniband and any(
        d["hostPath"].startswith("/dev/infiniband/")
        for d in container["linuxParameters"].get("devices", [])
    ):
        warn("no /dev/infiniband on this machine: EFA devices dropped (NCCL falls back to TCP)")
    gpus = Path("/dev/nvidia0").exists()
    if not gpus and any(r["type"] == "GPU" for r in container["resourceRequirements"]):
        warn("no NVIDIA GPU on this machine: the job runs without GPUs")
    Path(efs_dir).mkdir(parents=True, exist_ok=True)
    job_id = f"{PREFIX}{uuid.uuid4()}"
    timeout = register.get("timeout", {}).get("attemptDurationSeconds")
    job = {
        "jobId": job_id,
        "jobName": submit["jobName"],
        "jobQueue": "local",
        "jobDefinition": register["jobDefinitionName"],
        "status": "STARTING",
        "createdAt": int(time.time() * 1000),
        "nodeProperties": register["nodeProperties"],
        "timeout": timeout,
        "efsDir": efs_dir,
        "containers": [],
    }
    _save(job)
    (state_dir() / job_id).mkdir(exist_ok=True)
    caps = None
    try:
        _pull(client, container["image"])
        for node in range(nodes):  # the main node first, as Batch does
            while True:
                run = node_container(
                    container,
                    job_id=job_id,
                    job_name=submit["jobName"],
                    queue=queue,
                    node=node,
                    nodes=nodes,
                    efs_dir=efs_dir,
                    infiniband=infiniband,
                    gpus=gpus,
                    ulimit_caps=caps,
                )
                try:
                    job["containers"].append(client.containers.run(**run).id)
                    break
                except Exception as exc:
                    if caps is not None or "rlimit" not in str(exc):
                        raise
                    _remove(client, run["name"])
                    caps = host_ulimit_caps()
                    warn(
                        "the Docker daemon may not raise ulimits here: memlock/stack/nofile "
                        f"capped at this machine's hard limits {caps}"
                    )
            _save(job)
    except Exception as exc:
        for cid in job["containers"]:
            _remove(client, cid)
        job.update(
            status="FAILED",
            statusReason=f"could not start: {exc}".splitlines()[0],
            stoppedAt=int(time.time() * 1000),
        )
        _save(job)
        raise UsageError(f"local job could not start: {str(exc).splitlines()[0]}") from None
    job.update(status="RUNNING", startedAt=int(time.time() * 1000))
    _save(job)
    subprocess.Popen(
        [sys.executable, "-m", "launcher.local", job_id],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=open(state_dir() / job_id / "supervisor.log", "ab"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    return job_id


def _pull(client, image: str) -> None:
    import docker.errors

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        client.images.pull(image)


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


def supervise(job_id: str, poll: float = 0.2) -> None:
    """Follow a started job to its end; run detached from the CLI by ``start``."""
    from launcher.docker_client import docker_client

    client = docker_client()
    job = load(job_id)
    containers = job["containers"]

    def copy_logs(node: int, cid: str) -> None:
        with open(log_path(job_id, node), "ab") as out:
            try:
                for chunk in client.containers.get(cid).logs(stream=True, follow=True):
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
    deadline = job["startedAt"] / 1000 + job["timeout"] if job.get("timeout") else None
    reason = None
    while (main_exit := _exit_code(client, containers[0])) is None:
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
    job = load(job_id)  # a cancel may have recorded its reason meanwhile
    reason = job.get("cancelReason") or reason
    success = reason is None and main_exit == 0
    job.update(
        status="SUCCEEDED" if success else "FAILED",
        statusReason=reason or (None if success else EXIT_REASON),
        exitCodes=codes,
        stoppedAt=int(time.time() * 1000),
    )
    _save(job)


def cancel(handle: str) -> dict:
    from launcher.docker_client import docker_client

    job = load(handle)
    if job["status"] in TERMINAL:
        raise UsageError(f"job {job['jobId']} already {job['status']}; nothing to cancel")
    job["cancelReason"] = "cancelled with launcher cancel"
    _save(job)
    client = docker_client()
    for cid in job["containers"]:
        with contextlib.suppress(Exception):
            client.containers.get(cid).kill()
    return job


def wait(handle: str, timeout: float | None = None, poll: float = 0.2) -> dict:
    end = time.time() + timeout if timeout else None
    while (job := load(handle))["status"] not in TERMINAL:
        if end and time.time() > end:
            return job
        time.sleep(poll)
    return job


def iter_logs(
    handle: str, node: int | None, follow: bool, poll: float = 0.2
) -> Iterator[tuple[int, str]]:
    job = load(handle)
    count = job["nodeProperties"]["numNodes"]
    if node is not None and not 0 <= node < count:
        raise UsageError(f"--node {node}: job {job['jobId']} has nodes 0-{count - 1}")
    nodes = [node] if node is not None else list(range(count))
    offsets = dict.fromkeys(nodes, 0)
    partial = dict.fromkeys(nodes, b"")
    while True:
        done = load(handle)["status"] in TERMINAL
        for n in nodes:
            path = log_path(job["jobId"], n)
            if not path.exists():
                continue
            with open(path, "rb") as f:
                f.seek(offsets[n])
                data = partial[n] + f.read()
                offsets[n] = f.tell()
            *lines, partial[n] = data.split(b"\n")
            for line in lines:
                yield n, line.decode(errors="replace")
        if not follow or done:
            for n in nodes:
                if partial[n]:
                    yield n, partial[n].decode(errors="replace")
            return
        time.sleep(poll)


if __name__ == "__main__":
    supervise(sys.argv[1])
