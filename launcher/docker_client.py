"""The user's Docker daemon, through the docker SDK (DOCKER_HOST, else the default socket)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from launcher.errors import RemoteError

if TYPE_CHECKING:
    import docker


def docker_client() -> docker.DockerClient:
    import docker

    try:
        client = docker.from_env(version="auto", timeout=600)
        client.ping()
    except Exception as exc:  # docker raises DockerException or requests' errors
        host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise RemoteError(
            f"no Docker daemon at {host}: start one (e.g. `sudo dockerd` or Docker Desktop) or "
            f"set DOCKER_HOST ({exc.__class__.__name__})"
        ) from None
    return client
