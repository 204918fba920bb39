"""``launcher exec`` on the local engine: ``docker exec`` into a node's container.

The session is the docker CLI's, which this process becomes (``os.execvpe``): raw terminal
mode, window resizes, the detach keys, stdin's end and the exit status are then exactly
``docker exec -it``'s, with nothing copied through Python. The Docker SDK's exec API would
hand over a bare socket, leaving all of that to be written here again.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence

from launcher.errors import LauncherError

NO_DOCKER_CLI = (
    "launcher exec on a local job needs the docker CLI on PATH (it runs docker exec): install "
    "Docker's command-line client (Debian: docker.io or docker-ce-cli)"
)
# docker.from_env's default when DOCKER_HOST is unset: the CLI is pointed at the same engine,
# not at whatever `docker context use` chose.
DEFAULT_HOST = "unix:///var/run/docker.sock"


def docker_exec_argv(container: str, command: Sequence[str], tty: bool) -> list[str]:
    """``docker exec -i`` (stdin kept open), with ``-t`` when this side is a terminal."""
    return ["docker", "exec", "-i", *(["-t"] if tty else []), container, *command]


def docker_environment(environ: dict[str, str]) -> dict[str, str]:
    """The CLI's environment: the engine the local backend uses (DOCKER_HOST, else the SDK's
    default), never another one a Docker context names."""
    env = {k: v for k, v in environ.items() if k != "DOCKER_CONTEXT"}
    env["DOCKER_HOST"] = environ.get("DOCKER_HOST") or DEFAULT_HOST
    return env


def local_session(container: str, command: Sequence[str]) -> int:
    """Become ``docker exec`` into a node's running container (``LocalBackend.enter`` found it);
    never returns, but when the docker CLI is missing."""
    docker = shutil.which("docker")
    if docker is None:
        raise LauncherError(NO_DOCKER_CLI)
    argv = docker_exec_argv(container, command, sys.stdin.isatty())
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os.execvpe(docker, argv, docker_environment(dict(os.environ)))
