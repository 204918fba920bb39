"""A job definition's node as a container: pure translation, no engine involved.

The job definition is the one ``jobdef.build`` made for AWS; ``node_container`` turns each
node's range of it into the keyword arguments of ``docker.containers.run``: the job's own
network (``LocalNetwork``), Batch's multi-node environment, the EFS stand-in directory, devices,
ulimits and shared memory as Batch would give them.

A local job runs the user's chosen image, as root, on the user's machine: by default its nodes
share one network namespace of their own with loopback only (node 0's, which the others join),
so the rendezvous stays on 127.0.0.1 while the machine's interfaces, its traffic and its
loopback services (credential helpers, notebooks, databases) are out of reach; every node runs
without CAP_NET_RAW and with no-new-privileges unless the job is privileged.
"""

from __future__ import annotations

import enum
import os
import re
import resource
from datetime import datetime
from typing import TYPE_CHECKING, Any

from launcher.job import capacity
from launcher.job.container import ULIMITS
from launcher.job.environment import AWS_NCCL_INTERFACES
from launcher.job.jobspec import DEVICE_PERMISSIONS, ULIMIT_NAMES
from launcher.job.node_ranges import node_ranges
from launcher.job.shapes import ARRAY_INDEX_ENV, ARRAY_SIZE_ENV
from launcher.job.volumes import FSX_VOLUME
from launcher.local import secret_values
from launcher.node.prelude import REHEARSAL_ENV

if TYPE_CHECKING:
    import docker.types

PREFIX = "local-"  # a local job id's


class LocalNetwork(str, enum.Enum):
    """What a local job's nodes reach (``--local-network``)."""

    NONE = "none"  # their own namespace, loopback only: nothing outside the job
    BRIDGE = "bridge"  # that, and the engine's default bridge for outbound traffic
    HOST = "host"  # the machine's own network: every interface and loopback service

    def __str__(self) -> str:
        return self.value


# The interface names a job definition gives NCCL on AWS exclude loopback, the only interface
# of a job's own network: there NCCL, Gloo and TensorPipe are pointed at it instead.
LOOPBACK_SOCKETS = {
    "NCCL_SOCKET_IFNAME": "lo",
    "GLOO_SOCKET_IFNAME": "lo",
    "TP_SOCKET_IFNAME": "lo",
}
LABEL = "efa-batch.job"  # the label naming a container's job
# Where a node sees the start gate (launcher.node.prelude START_GATE), and the file it waits for.
START_GATE_ENV = "LAUNCHER_START_GATE"
START_GATE_DIR = "/run/launcher-start"
START_GATE_FILE = "go"
_LETTERS = {word: letter for letter, word in DEVICE_PERMISSIONS.items()}


# ``[QUEUE:]local-UUID[:INDEX]``: an array child is its parent's id and its index, as on Batch
# ("the array index for the child job is appended to the end of the parent ID, such as
# example_job_ID:0", array_jobs.html).
_HANDLE = re.compile(rf"(?:^|:)({PREFIX}[0-9a-f-]+(?::\d+)?)$")


def local_id(handle: str) -> str | None:
    """The local job id in a handle, or None when it names no local job."""
    match = _HANDLE.search(handle.strip())
    return match.group(1) if match else None


def is_local(handle: str) -> bool:
    return local_id(handle) is not None


def container_name(job_id: str, attempt: int, node: int) -> str:
    """Docker's name for a node's container (no ':' allowed: a child's index joins with '-')."""
    uuid, _, index = job_id.removeprefix(PREFIX).partition(":")
    return f"efa-batch-{uuid[:12]}{f'-i{index}' if index else ''}-{attempt}-{node}"


# A rehearsal setting: check the nodes as if on the pool's instances (the type's GPUs and EFA
# devices expected) on a machine without them, to see the health check and fabric guard fail
# with fake nvidia-smi and device files (docs/local-runs.md). Off: the prelude expects none.
CHECK_DEVICES_ENV = "LAUNCHER_LOCAL_CHECK_DEVICES"


def rehearse_devices() -> bool:
    return os.environ.get(CHECK_DEVICES_ENV, "") not in ("", "0")


def placement(container: dict[str, Any], now: float) -> str:
    """The compute environment an attempt that starts ``now`` runs in, as Batch would place it
    and name it in AWS_BATCH_CE_NAME: for a job in a Capacity Block's pool the block's or the
    fallback's (``launcher.job.capacity.placement``), so that the prelude's checkpoint timer decides
    as on AWS; ``local`` for any other job."""
    env = {e["name"]: e["value"] for e in container.get("environment", [])}
    return capacity.placement(env, now) or "local"


def node_container(
    container: dict[str, Any],
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
    fsx_dir: str | None = None,
    single: bool = False,
    array: tuple[int, int] | None = None,
    main_port: int | None = None,
    network: LocalNetwork = LocalNetwork.NONE,
    secrets_file: str | None = None,
    start_gate: str | None = None,
    compute_environment: str = "local",
) -> dict[str, Any]:
    """Keyword arguments for ``docker.containers.run`` for one node of the job;
    ``secrets_file``: the host file holding the container's ``secrets`` (read as the ECS agent
    would read them at start, launcher.local.secret_values), mounted read-only for the prelude.
    ``single``: a container job (Batch's single-job variables, no node ones); ``array``: an
    array child's (index, size); ``main_port``: the rendezvous port instead of the job's;
    ``network``: what the nodes reach (node 0's namespace, which the others join);
    ``start_gate``: the host directory where the backend marks that every node is up, which
    the prelude waits for (launcher.node.prelude START_GATE); ``compute_environment``: the attempt's
    AWS_BATCH_CE_NAME (``placement``)."""
    env = {e["name"]: e["value"] for e in container.get("environment", [])}
    if network is not LocalNetwork.HOST:
        for name, value in LOOPBACK_SOCKETS.items():
            if env.get(name, AWS_NCCL_INTERFACES) == AWS_NCCL_INTERFACES:  # unset, or AWS's
                env[name] = value
    env.update(
        {
            "AWS_BATCH_JOB_ID": job_id if single else f"{job_id}#{node}",
            "AWS_BATCH_JOB_ATTEMPT": str(attempt),
            "AWS_BATCH_JQ_NAME": queue,
            "AWS_BATCH_CE_NAME": compute_environment,
            REHEARSAL_ENV: "local",  # the prelude's sign of a rehearsal (no EFA expected)
            # Every node is on this machine: keep the main node off its non-loopback addresses.
            "LAUNCHER_MAIN_ADDR": "127.0.0.1",
        }
    )
    if not single:  # a multi-node job's nodes (job_env_vars.html: "multi-node parallel jobs")
        env.update(
            {
                "AWS_BATCH_JOB_NUM_NODES": str(nodes),
                "AWS_BATCH_JOB_NODE_INDEX": str(node),
                "AWS_BATCH_JOB_MAIN_NODE_INDEX": "0",
            }
        )
    if array is not None:
        env[ARRAY_INDEX_ENV], env[ARRAY_SIZE_ENV] = str(array[0]), str(array[1])
    if main_port is not None:
        env["LAUNCHER_MAIN_PORT"] = str(main_port)
    if node != 0:  # as on Batch: only the workers are told where the main node is
        env["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"] = "127.0.0.1"
    if not infiniband and "LAUNCHER_EFA_DEVICES" in env and not rehearse_devices():
        # The devices are dropped here (warned about once): the prelude expects none.
        env["LAUNCHER_EFA_DEVICES"] = "0"
    if not gpus and not rehearse_devices():
        # No GPU is given to a local node here: the prelude's health check expects none.
        env["LAUNCHER_GPUS_PER_NODE"] = "0"
    volumes: dict[str, dict[str, str]] = {}
    if secrets_file is not None:
        env[secret_values.FILE_ENV] = secret_values.CONTAINER_PATH
        volumes[secrets_file] = {"bind": secret_values.CONTAINER_PATH, "mode": "ro"}
    if start_gate is not None:
        env[START_GATE_ENV] = f"{START_GATE_DIR}/{START_GATE_FILE}"
        volumes[start_gate] = {"bind": START_GATE_DIR, "mode": "ro"}
    sources = {v["name"]: v for v in container.get("volumes", [])}
    for mount in container.get("mountPoints", []):
        volume = sources[mount["sourceVolume"]]
        if "efsVolumeConfiguration" in volume:
            host = efs_dir
        elif volume["name"] == FSX_VOLUME and fsx_dir is not None:
            host = fsx_dir  # the node's FSx for Lustre mount, stood in for by a directory
        else:
            host = volume["host"]["sourcePath"]
        volumes[host] = {
            "bind": mount["containerPath"],
            "mode": "ro" if mount.get("readOnly") else "rw",
        }
    linux = container.get("linuxParameters", {})
    devices = [
        f"{d['hostPath']}:{d['containerPath']}:{''.join(_LETTERS[p] for p in d['permissions'])}"
        for d in linux.get("devices", [])
        if infiniband or not d["hostPath"].startswith("/dev/infiniband/")
    ]
    import docker.types

    privileged = bool(container.get("privileged"))
    if network is LocalNetwork.HOST or node == 0:
        network_mode = network.value
    else:  # the job's nodes share node 0's namespace: its loopback is the rendezvous
        network_mode = f"container:{container_name(job_id, attempt, 0)}"
    kwargs: dict[str, Any] = {
        **node_name(network, node, container_name(job_id, attempt, 0)),
        "image": container["image"],
        "command": container["command"],
        "environment": env,
        "network_mode": network_mode,
        "name": container_name(job_id, attempt, node),
        "labels": {LABEL: job_id, f"{LABEL}.node": str(node), f"{LABEL}.name": job_name},
        "ulimits": [
            _ulimit(u, (ulimit_caps or {}).get(u["name"])) for u in container.get("ulimits", [])
        ],
        "shm_size": f"{linux.get('sharedMemorySize', 64)}m",
        "init": bool(linux.get("initProcessEnabled")),
        "devices": devices,
        "volumes": volumes,
        "tmpfs": {t["containerPath"]: f"size={t['size']}m" for t in linux.get("tmpfs", [])},
        "privileged": privileged,
        "detach": True,
    }
    if not privileged:
        # A sniffer needs raw sockets (Docker grants NET_RAW by default), and a setuid binary
        # of the image would give its caller more than the job asked for.
        kwargs["cap_drop"] = ["NET_RAW"]
        kwargs["security_opt"] = ["no-new-privileges"]
    wanted = next(
        (int(r["value"]) for r in container.get("resourceRequirements", []) if r["type"] == "GPU"),
        0,
    )
    if wanted and gpus:
        kwargs["device_requests"] = [
            docker.types.DeviceRequest(count=wanted, capabilities=[["gpu"]])
        ]
    return kwargs


def node_name(network: LocalNetwork, node: int, name: str) -> dict[str, Any]:
    """``docker.containers.run``'s name keywords: each node's name resolves, as
    on AWS (VPC DNS), where torchrun's c10d rendezvous hands its node's name to the others
    (torch.distributed.elastic agent: MASTER_ADDR = socket.getfqdn(socket.gethostname())).
    Node 0 is named ``name``; in a namespace of its own with loopback only (``none``) no DNS
    server answers, so the name is in its /etc/hosts as 127.0.0.1. On a bridge Docker maps the
    name to the node's address itself; with ``host`` the node has the machine's name and hosts
    file (Docker writes a hosts file of its own, without the machine's entries, when given one
    more). The other nodes join node 0's namespace and get its name, hosts file and resolver
    (Docker refuses a hostname or host entry of their own there: "conflicting options").
    Sharing a name, the nodes' process ids are kept apart by the prelude (START_GATE), as
    torchrun tells nodes apart by name and process id."""
    if node != 0:
        return {}
    if network is LocalNetwork.HOST:
        return {}
    if network is LocalNetwork.BRIDGE:
        return {"hostname": name}
    return {"hostname": name, "extra_hosts": {name: "127.0.0.1"}}


def _ulimit(limit: dict[str, Any], cap: int | None) -> docker.types.Ulimit:
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
    caps = {}
    for name in ULIMIT_NAMES:
        which = getattr(resource, f"RLIMIT_{name.upper()}", None)  # Python has no RLIMIT_LOCKS
        if which is not None:
            hard = resource.getrlimit(which)[1]
            caps[name] = -1 if hard == resource.RLIM_INFINITY else hard
    return caps


# Limits counted in bytes (setrlimit(2)); the others are counts or seconds.
_BYTE_LIMITS = frozenset({"core", "data", "fsize", "memlock", "msgqueue", "rss", "stack"})


def limit_text(name: str, value: int) -> str:
    """``unlimited``, ``8 MiB`` (a limit in bytes) or the number."""
    if value < 0:
        return "unlimited"
    if name not in _BYTE_LIMITS:
        return str(value)
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:.4g} {unit}"
    return f"{value} B"


def capped_limits(asked: list[dict[str, Any]], caps: dict[str, int]) -> list[str]:
    """The job's ulimits that ``caps`` (this machine's hard limits) lower, each as
    ``memlock 8 MiB (asked unlimited)``; limits the job did not ask for are left out."""
    said = []
    for limit in asked:
        name, hard = limit["name"], int(limit["hardLimit"])
        cap = caps.get(name)
        if cap is None or cap < 0 or 0 <= hard <= cap:
            continue
        said.append(f"{name} {limit_text(name, cap)} (asked {limit_text(name, hard)})")
    return said


def asked_ulimits(register: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ulimit the job definition's containers ask for, each once (ranges repeat them)."""
    asked: list[dict[str, Any]] = []
    for _, container in node_ranges(register):
        asked += [u for u in container.get("ulimits", []) if u not in asked]
    return asked


def own_limits(asked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The limits the job set itself (--ulimit), not the launcher's own for EFA and NCCL at
    scale (launcher.job.container.ULIMITS), which a local run, with no EFA, does not need."""
    return [u for u in asked if u not in ULIMITS]


def capped_line(asked: list[dict[str, Any]], caps: dict[str, int], efa: bool) -> str | None:
    """The line said at submit for the job's limits that ``caps`` lowered, where it matters:
    with EFA devices here (EFA pins the memory it registers: memlock), or for limits the job
    set itself. The launcher's own, for EFA and NCCL at scale, do not matter to a run without
    EFA: None, and describe (status, for a failed job) shows them from the record."""
    capped = capped_limits(asked if efa else own_limits(asked), caps)
    if not capped:
        return None
    return (
        f"ulimits capped at this machine's hard limits: {', '.join(capped)} "
        "(Docker here cannot raise them)"
    )


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
