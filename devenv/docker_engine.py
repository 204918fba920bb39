"""A Docker engine: the one DOCKER_HOST points at, or a private dockerd we start."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import docker

from devenv.processes import allowed, stop, wait_until


@dataclass
class DockerEngine:
    host: str  # DOCKER_HOST value
    process: subprocess.Popen[bytes] | None = None
    root: Path | None = None

    @classmethod
    def start(cls, root: Path) -> DockerEngine:
        allowed("docker")
        import docker

        for host in filter(None, (os.environ.get("DOCKER_HOST"), "unix:///var/run/docker.sock")):
            try:
                docker.DockerClient(base_url=host, version="auto", timeout=5).ping()
                return cls(host)
            except Exception:
                continue
        binary = shutil.which("dockerd")
        if binary is None or os.geteuid() != 0:
            raise FileNotFoundError(
                "no reachable Docker daemon, and dockerd cannot be started "
                "(needs Debian's docker.io and root)"
            )
        root.mkdir(parents=True, exist_ok=True)
        sock = root / "docker.sock"
        log = open(root / "dockerd.log", "wb")  # noqa: SIM115 - written until stopped
        process = subprocess.Popen(
            [
                binary,
                "--iptables=false",
                "--ip-masq=false",
                "--bridge=none",
                "--storage-driver=vfs",
                "--data-root",
                str(root / "data"),
                "--exec-root",
                str(root / "exec"),
                "--pidfile",
                str(root / "docker.pid"),
                "--host",
                f"unix://{sock}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        engine = cls(f"unix://{sock}", process, root)

        def ready() -> bool:
            try:
                engine.client().ping()
                return True
            except Exception:
                return False

        wait_until(ready, 60, "dockerd", process)
        return engine

    def client(self) -> docker.DockerClient:
        import docker

        return docker.DockerClient(base_url=self.host, version="auto", timeout=600)

    def stop(self) -> None:
        if self.process is None or self.root is None:
            return  # an engine we did not start
        stop(self.process)
        # dockerd leaves its network namespace bind-mounted under exec-root.
        netns = self.root / "exec" / "netns"
        for entry in netns.glob("*") if netns.is_dir() else ():
            subprocess.run(["umount", "-l", str(entry)], check=False, capture_output=True)
