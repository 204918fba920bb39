"""The Docker engine's part of a local job: images, the node containers, their ends.

The one place the local backend talks to the engine (through ``launcher.docker_client``);
every failure leaves as ``RemoteError`` naming what Docker refused.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from launcher import private
from launcher.backend import Say
from launcher.errors import RemoteError, UsageError
from launcher.job.node_ranges import node_ranges
from launcher.local import secret_values
from launcher.local.containers import (
    START_GATE_FILE,
    LocalNetwork,
    asked_ulimits,
    capped_line,
    host_ulimit_caps,
    node_container,
    placement,
)
from launcher.local.state import Record


def failure(what: str, exc: Exception) -> RemoteError:
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return RemoteError(f"Docker: {what}: {detail}")


def pull(client: Any, image: str) -> None:
    import docker.errors

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        try:
            client.images.pull(image)
        except docker.errors.APIError as exc:
            raise failure(f"could not pull {image}", exc) from exc


def remove(client: Any, container_id: str) -> None:
    import docker.errors

    with contextlib.suppress(docker.errors.NotFound):
        client.containers.get(container_id).remove(force=True)


def exit_code(client: Any, container_id: str) -> int | None:
    """The container's exit code; None while it runs, -1 once it is gone."""
    import docker.errors

    try:
        container = client.containers.get(container_id)
    except docker.errors.NotFound:
        return -1
    if container.status in ("created", "running", "restarting"):
        return None
    return int(container.attrs["State"]["ExitCode"])


def free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 now (the kernel's choice)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_gate(runtime: Path) -> Path:
    """An empty directory for the attempt's start gate, readable in any container (0755; its
    parent, the attempt's runtime directory, stays the user's alone)."""
    return private.subdirectory(runtime / "start", 0o755)


def runtime_needed(record: Record) -> bool:
    """Whether an attempt needs a runtime directory: a start gate (more than one node) or
    secrets to deliver."""
    return record.nodes > 1 or record.secrets_file is not None


def forget_runtime(record: Record) -> None:
    """Remove the attempt's runtime directory (its secrets, its gate): the next start makes
    another."""
    private.forget_runtime(record.runtime_dir)
    record.runtime_dir = None


def _main_ended(client: Any, main: str, exc: Exception) -> bool:
    """Whether a worker could not start because the main node (whose network it joins) ended."""
    return "non running container" in str(exc) and exit_code(client, main) is not None


def _container_for(record: Record, node: int) -> dict[str, Any]:
    for (first, last), container in node_ranges(record.register):
        if first <= node <= last:
            return container
    raise UsageError(f"node {node} is in no node range of job {record.job_id}")


NO_BRIDGE = (
    "Docker: this engine has no default bridge network (dockerd --bridge=none), so "
    "--local-network bridge cannot reach out; use none, or host"
)


def start_nodes(client: Any, record: Record, say: Say) -> tuple[list[str], dict[str, int] | None]:
    """Start every node, the main node first; return container ids and the ulimit caps used
    (the machine's hard limits, where the daemon may not raise them)."""
    caps = record.ulimit_caps
    started: list[str] = []
    network = LocalNetwork(record.network)
    # On the machine's network, array children would share it, where on Batch each has its own
    # node: a port of its own, so that children running torchrun at once do not meet on one.
    port = (
        free_loopback_port()
        if record.array_index is not None and network is LocalNetwork.HOST
        else None
    )
    # Batch places a multi-node job whole in one compute environment: one name for every node.
    compute_environment = placement(_container_for(record, 0), time.time())
    runtime = private.job_runtime(record.job_id) if runtime_needed(record) else None
    record.runtime_dir = None if runtime is None else str(runtime)
    gate: Path | None = None
    try:
        if runtime is not None and record.nodes > 1:
            gate = _start_gate(runtime)
        if network is LocalNetwork.BRIDGE and not client.networks.list(names=["bridge"]):
            # An engine without its default bridge (dockerd --bridge=none) starts a "bridge"
            # container with loopback only and says nothing (docker.io 20.10): say it here.
            raise RemoteError(NO_BRIDGE)
        for node in range(record.nodes):
            container = _container_for(record, node)
            secrets = (
                secret_values.values(container, Path(record.secrets_file))
                if record.secrets_file
                else {}
            )
            secrets_file = (
                str(secret_values.delivery(secrets, runtime, node))
                if secrets and runtime is not None
                else None
            )
            while True:
                run = node_container(
                    container,
                    job_id=record.job_id,
                    job_name=record.name,
                    queue=record.queue,
                    node=node,
                    nodes=record.nodes,
                    efs_dir=record.efs_dir or "",
                    infiniband=record.infiniband,
                    gpus=record.gpus,
                    attempt=record.attempt,
                    ulimit_caps=caps,
                    fsx_dir=record.fsx_dir,
                    secrets_file=secrets_file,
                    network=network,
                    start_gate=None if gate is None else str(gate),
                    single=record.single_node,
                    array=None
                    if record.array_index is None or record.array_size is None
                    else (record.array_index, record.array_size),
                    main_port=port,
                    compute_environment=compute_environment,
                )
                try:
                    started.append(client.containers.run(**run).id)
                    break
                except Exception as exc:
                    if node and _main_ended(client, started[0], exc):
                        # A worker joins the main node's network, which is gone once the
                        # main node has ended; its exit code is the attempt's, as on Batch,
                        # where the workers stop when the main node ends.
                        remove(client, run["name"])
                        forget_runtime(record)
                        return started, caps
                    if caps is not None or "rlimit" not in str(exc):
                        raise
                    remove(client, run["name"])
                    caps = host_ulimit_caps()
                    # Docker cannot raise a limit past its own hard limit here (no
                    # CAP_SYS_RESOURCE): said once, where it matters (capped_line); the
                    # record keeps the caps for describe and a failed job's status.
                    line = capped_line(asked_ulimits(record.register), caps, record.infiniband)
                    if line:
                        say(line)
        if gate is not None:
            private.create(gate / START_GATE_FILE, b"", 0o644)  # every node is up: go
    except BaseException as exc:  # Ctrl-C too: no node of a job that did not start runs on
        for cid in started:
            remove(client, cid)
        forget_runtime(record)
        if isinstance(exc, UsageError | RemoteError) or not isinstance(exc, Exception):
            raise
        if network is LocalNetwork.BRIDGE and "network bridge not found" in str(exc):
            raise RemoteError(NO_BRIDGE) from exc
        raise failure("could not start the job's containers", exc) from exc
    return started, caps
