"""Base images made offline: a busybox root file system, imported into Docker and pushed."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

BUSYBOX = Path("/bin/busybox")  # Debian's busybox-static
APPLETS = (
    "sh",
    "echo",
    "cat",
    "ls",
    "hostname",
    "cut",
    "sleep",
    "sha256sum",
    "stat",
    "env",
    "nc",
    "wc",
    "head",
    "true",
    "false",
    "kill",
    "ps",
    "grep",
)


def busybox_rootfs() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in ("bin", "tmp", "etc"):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
            tar.addfile(info)
        tar.add(BUSYBOX, "bin/busybox")
        for applet in APPLETS:
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type, info.linkname, info.mode = tarfile.SYMTYPE, "busybox", 0o777
            tar.addfile(info)
    return buffer.getvalue()


def push_busybox_base(client, repository: str, tag: str = "1") -> None:
    """``docker import`` of the rootfs, then ``docker push`` (the registry is on loopback)."""
    client.api.import_image_from_data(
        busybox_rootfs(),
        repository=repository,
        tag=tag,
        changes=['CMD ["/bin/sh"]', "ENV PATH=/bin"],
    )
    for event in client.api.push(repository, tag=tag, stream=True, decode=True):
        if "error" in event:
            raise RuntimeError(event["error"])
