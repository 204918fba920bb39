"""The reference distribution registry (Debian's docker-registry) on 127.0.0.1."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from devenv.processes import allowed, free_port, stop, wait_until

_ACCESS = re.compile(r'"(GET|HEAD|POST|PUT|PATCH|DELETE) (/v2/[^ ]*) HTTP/[\d.]+" (\d{3}) (\d+|-)')


@dataclass
class Request:
    method: str
    path: str
    status: int


@dataclass
class RegistryServer:
    process: subprocess.Popen[bytes]
    host: str
    root: Path
    log_path: Path
    user: tuple[str, str] | None = None

    @classmethod
    def start(cls, root: Path, user: tuple[str, str] | None = None) -> RegistryServer:
        allowed("registry")
        binary = shutil.which("docker-registry")
        if binary is None:
            raise FileNotFoundError("docker-registry (Debian package docker-registry)")
        port = free_port()
        root.mkdir(parents=True, exist_ok=True)
        config = [
            "version: 0.1",
            "log: {level: error, accesslog: {disabled: false}}",
            f"storage: {{filesystem: {{rootdirectory: {root / 'data'}}}, "
            "delete: {enabled: true}}",
            f"http: {{addr: 127.0.0.1:{port}}}",
        ]
        if user:
            import bcrypt

            hashed = bcrypt.hashpw(user[1].encode(), bcrypt.gensalt(rounds=4)).decode()
            (root / "htpasswd").write_text(f"{user[0]}:{hashed}\n")
            config.append(f"auth: {{htpasswd: {{realm: test, path: {root / 'htpasswd'}}}}}")
        (root / "config.yml").write_text("\n".join(config) + "\n")
        log_path = root / "registry.log"
        log = open(log_path, "wb")  # noqa: SIM115 - the server writes to it until stopped
        process = subprocess.Popen(
            [binary, "serve", str(root / "config.yml")], stdout=log, stderr=subprocess.STDOUT
        )
        server = cls(process, f"127.0.0.1:{port}", root, log_path, user)

        def ready() -> bool:
            try:
                return requests.get(f"http://{server.host}/v2/", timeout=1).status_code in (
                    200,
                    401,
                )
            except requests.RequestException:
                return False

        wait_until(ready, 30, "docker-registry", process)
        server.requests()  # drop the readiness probes from the count
        return server

    def stop(self) -> None:
        stop(self.process)

    def settle(self, quiet: float = 0.5, timeout: float = 15) -> None:
        """Wait until the access log has stopped growing: the registry writes a request's line
        after it has answered, and may still finish a killed client's upload."""
        deadline = time.monotonic() + timeout
        size, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            now = self.log_path.stat().st_size
            if now != size:
                size, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return
            time.sleep(0.05)

    def requests(self) -> list[Request]:
        """Requests logged since the last call (the access log of the registry)."""
        text = self.log_path.read_text(errors="replace")
        offset = getattr(self, "_offset", 0)
        self._offset = len(text)
        return [Request(m[0], m[1], int(m[2])) for m in _ACCESS.findall(text[offset:])]
