"""A TCP proxy on 127.0.0.1 that cuts connections on purpose: the network failing midway.

Every connection is forwarded to ``upstream``; ``cut_up(n, times)`` drops the next
``times`` connections that have carried ``n`` bytes towards the server (an upload cut
midway), ``cut_down(n, times)`` likewise for bytes towards the client (a download), and
``cut_request(b"PATCH ", 2)`` drops the connection that is about to send the second request
starting so, before the server sees a byte of it. It also counts connections and how many
were open at once.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from dataclasses import dataclass, field


@dataclass
class _Budget:
    after: int = 0
    times: int = 0


@dataclass
class CuttingProxy:
    upstream: tuple[str, int]
    listener: socket.socket
    up: _Budget = field(default_factory=_Budget)
    down: _Budget = field(default_factory=_Budget)
    request: tuple[bytes, int] = (b"", 0)  # (request start, which occurrence to cut)
    requests_seen: int = 0
    cuts: int = 0
    connections: int = 0
    open_now: int = 0
    most_open: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def start(cls, upstream: str) -> CuttingProxy:
        host, port = upstream.rsplit(":", 1)
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        proxy = cls((host, int(port)), listener)
        threading.Thread(target=proxy._accept, daemon=True).start()
        return proxy

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.listener.getsockname()[1]}"

    def cut_up(self, after: int, times: int = 1) -> None:
        self.up = _Budget(after, times)

    def cut_down(self, after: int, times: int = 1) -> None:
        self.down = _Budget(after, times)

    def cut_request(self, start: bytes, nth: int) -> None:
        self.request, self.requests_seen = (start, nth), 0

    def stop(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            with self.lock:
                self.connections += 1
                self.open_now += 1
                self.most_open = max(self.most_open, self.open_now)
            state = {"closed": False}
            for src, dst, budget in ((client, server, "up"), (server, client, "down")):
                threading.Thread(
                    target=self._pump, args=(src, dst, budget, client, server, state), daemon=True
                ).start()

    def _should_cut(self, direction: str, carried: int, data: bytes) -> bool:
        with self.lock:
            start, nth = self.request
            if direction == "up" and start and data.startswith(start):
                self.requests_seen += 1
                if self.requests_seen == nth:
                    self.cuts += 1
                    return True
            budget = self.up if direction == "up" else self.down
            if budget.times and carried >= budget.after:
                budget.times -= 1
                self.cuts += 1
                return True
        return False

    def _pump(self, src, dst, direction, client, server, state) -> None:  # noqa: ANN001
        carried = 0
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                carried += len(data)
                if self._should_cut(direction, carried, data):
                    for s in (client, server):  # RST, as a dropped connection looks
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self.lock:
                if not state["closed"]:
                    state["closed"] = True
                    self.open_now -= 1
            for s in (client, server):
                # shutdown wakes the other direction's recv, which a close alone would not
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    s.close()
