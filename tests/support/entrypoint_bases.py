"""Busybox bases with the entrypoints users' images bring (AWS's DLC, NVIDIA's NGC, tini, none),
for the tests that check the node command survives each of them."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path

from devenv.images import busybox_rootfs, import_and_push

# The shape of AWS's PyTorch training images for EC2 (deep-learning-containers,
# pytorch/training/docker/build_artifacts/dockerd_entrypoint.sh, run as
# ENTRYPOINT ["bash", "-m", "dockerd_entrypoint.sh"]): some setup, then eval "$@".
DLC_ENTRYPOINT = """#!/usr/bin/env bash
export DLC_SETUP=done
eval "$@"
"""
# The shape of NVIDIA's NGC entrypoint (/opt/nvidia/nvidia_entrypoint.sh): it sources
# entrypoint.d/*.sh (whose exports reach the command), then exec "$@".
NGC_ENTRYPOINT = """#!/bin/bash
for part in /opt/nvidia/entrypoint.d/*.sh; do [ -f "$part" ] && source "$part"; done
if [[ $# -eq 0 ]]; then exec /bin/bash; else exec "$@"; fi
"""
NGC_PART = "export NGC_SETUP=done\n"
TINI = Path("/usr/bin/tini-static")  # Debian's tini


def _add_file(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def _add_dirs(tar: tarfile.TarFile, *names: str) -> None:
    for name in names:
        info = tarfile.TarInfo(name)
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)


def _add_bash(tar: tarfile.TarFile) -> None:
    """This machine's bash and the shared libraries it loads (as ldd lists them)."""
    from devenv.images import shared_libraries

    libraries = shared_libraries(["/bin/bash"])
    dirs = sorted({str(Path(name).parent) for name in libraries} | {"usr", "usr/bin"})
    _add_dirs(tar, *(d for d in dirs if d not in ("bin",)))
    for name in sorted(libraries):
        tar.add(libraries[name], name)
    tar.add("/bin/bash", "bin/bash")
    info = tarfile.TarInfo("usr/bin/env")
    info.type, info.linkname, info.mode = tarfile.SYMTYPE, "/bin/busybox", 0o777
    tar.addfile(info)


def _dlc(tar: tarfile.TarFile) -> None:
    _add_bash(tar)
    _add_dirs(tar, "usr/local", "usr/local/bin")
    _add_file(tar, "usr/local/bin/dockerd_entrypoint.sh", DLC_ENTRYPOINT.encode())


def _ngc(tar: tarfile.TarFile) -> None:
    _add_bash(tar)
    _add_dirs(tar, "opt", "opt/nvidia", "opt/nvidia/entrypoint.d")
    _add_file(tar, "opt/nvidia/nvidia_entrypoint.sh", NGC_ENTRYPOINT.encode())
    _add_file(tar, "opt/nvidia/entrypoint.d/10-setup.sh", NGC_PART.encode(), 0o644)


def _tini(tar: tarfile.TarFile) -> None:
    _add_dirs(tar, "usr", "usr/bin")
    tar.add(TINI, "usr/bin/tini")


# kind -> (extra files, ENTRYPOINT), after the images users bring: AWS's DLC (eval "$@"),
# NVIDIA's NGC (exec "$@"), tini (execvp), and none.
ENTRYPOINTS: dict[str, tuple[Callable[[tarfile.TarFile], None] | None, list[str] | None]] = {
    "dlc-eval": (_dlc, ["bash", "-m", "dockerd_entrypoint.sh"]),
    "ngc-exec": (_ngc, ["/opt/nvidia/nvidia_entrypoint.sh"]),
    "tini": (_tini, ["/usr/bin/tini", "--"]),
    "none": (None, None),
}


def push_entrypoint_base(
    client, repository: str, kind: str, tag: str = "1", entrypoint: list[str] | None = None
) -> str:
    """A busybox base with the ``kind`` of entrypoint (or this ``entrypoint``), imported and
    pushed; ``REPO:TAG``."""
    extra, kind_entrypoint = ENTRYPOINTS[kind]
    entrypoint = entrypoint or kind_entrypoint
    changes = ['CMD ["/bin/sh"]', "ENV PATH=/usr/local/bin:/usr/bin:/bin"]
    if entrypoint:
        changes.append(f"ENTRYPOINT {json.dumps(entrypoint)}")
    import_and_push(client, busybox_rootfs(extra), repository, tag, changes)
    return f"{repository}:{tag}"
