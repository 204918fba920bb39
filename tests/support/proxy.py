"""A TCP proxy on 127.0.0.1 that cuts connections on purpose: the network failing midway.

Every connection is forwarded to ``upstream``; ``cut_up(n, times)`` drops the next
``times`` connections that have carried ``n`` bytes towards the server (an upload cut
midway), ``cut_down(n, times)`` likewise for bytes towards the client (a download), and
``cut_request(b"PATCH ", 2)`` drops the connection that is about to send the second request
starting so, before the server sees a byte of it. It also counts connections and how many
were open at once.

``Host`` is an HTTP(S) server of its own on a loopback address (another host, as far as a
client can tell): it records the Authorization of every request, may answer some itself and
forwards the others to a registry, rewriting the Location and WWW-Authenticate it answers.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
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


class ThrottledProxy(CuttingProxy):
    """A ``CuttingProxy`` whose upload link (bytes towards the server) carries at most
    ``rate`` bytes a second, all its connections together, as one uplink does: each piece is
    held until the link would have sent it. Downloads go at loopback speed. The client's
    socket buffers take a few MB before it feels the pace, so a request's end (the server's
    answer), not its last write, is when its bytes are through.
    """

    rate: float = 0.0  # bytes a second; 0: no limit
    _free_at: float = 0.0  # monotonic time the link is through with what it was given

    @classmethod
    def throttled(cls, upstream: str, rate: float) -> ThrottledProxy:
        proxy = cls.start(upstream)
        assert isinstance(proxy, ThrottledProxy)
        proxy.rate = rate
        return proxy

    def _should_cut(self, direction: str, carried: int, data: bytes) -> bool:
        if direction == "up" and self.rate > 0:
            with self.lock:
                now = time.monotonic()
                self._free_at = max(self._free_at, now) + len(data) / self.rate
                wait = self._free_at - now
            time.sleep(wait)
        return super()._should_cut(direction, carried, data)


# --- an HTTP(S) host of its own, in front of a registry or standing alone -------------------

Answer = tuple[int, dict[str, str], bytes]  # (status, headers, body)


@dataclass
class Seen:
    """One request a ``Host`` received: what it was and the Authorization it carried."""

    method: str
    path: str
    authorization: str | None


@dataclass
class Host:
    """An HTTP(S) server on a loopback address, playing a host of its own: another registry
    front, a storage backend, a token service.

    It records every request (``seen``). ``local`` may answer a request itself; the others go
    to ``upstream`` (a registry on 127.0.0.1) with the Authorization ``upstream_auth`` makes of
    the one received (a storage backend's pre-signed URL carries its own authority; a token
    service's front trades its token for the registry's login), and the answer's Location and
    WWW-Authenticate pass through ``rewrite`` (pointing them at another host). Bodies are read
    whole: the blobs the tests move are small.
    """

    address: str  # 127.0.0.x it listens on
    name: str  # the host name clients use for it (resolved to ``address`` by the test)
    upstream: str | None = None  # host:port of the registry behind it
    tls: ssl.SSLContext | None = None
    local: Callable[[str, str, str | None], Answer | None] = lambda m, p, a: None
    upstream_auth: Callable[[str | None], str | None] = lambda a: a
    rewrite: Callable[[str, str], str] | None = None  # (header, value) -> value
    seen: list[Seen] = field(default_factory=list)
    server: http.server.ThreadingHTTPServer | None = None

    def start(self) -> Host:
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle_one_request(self) -> None:
                self.raw_requestline = self.rfile.readline(65537)
                if not self.raw_requestline or not self.parse_request():
                    self.close_connection = True
                    return
                front._serve(self)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer((self.address, 0), Handler)
        self.server.daemon_threads = True
        if self.tls is not None:
            self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    @property
    def netloc(self) -> str:
        return f"{self.name}:{self.port}"

    @property
    def origin(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.netloc}"

    def authorizations(self) -> list[str]:
        return [s.authorization for s in self.seen if s.authorization]

    def _serve(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        authorization = handler.headers.get("Authorization")
        self.seen.append(Seen(handler.command, handler.path, authorization))
        body = _read_body(handler)
        answer = self.local(handler.command, handler.path, authorization)
        if answer is None and self.upstream is not None:
            answer = self._forward(handler, body, self.upstream_auth(authorization))
        status, headers, payload = answer or (404, {}, b"")
        head = handler.command == "HEAD"  # its Content-Length is the GET's, with no body
        length = next((v for k, v in headers.items() if k.lower() == "content-length"), None)
        handler.send_response(status)
        for key, value in headers.items():
            if key.lower() == "content-length":
                continue
            if key.lower() in ("location", "www-authenticate") and self.rewrite is not None:
                value = self.rewrite(key.lower(), value)
            handler.send_header(key, value)
        handler.send_header("Content-Length", (length or "0") if head else str(len(payload)))
        handler.end_headers()
        if not head:
            handler.wfile.write(payload)
        handler.wfile.flush()

    def _forward(
        self, handler: http.server.BaseHTTPRequestHandler, body: bytes, authorization: str | None
    ) -> Answer:
        assert self.upstream is not None
        host, port = self.upstream.rsplit(":", 1)
        connection = http.client.HTTPConnection(host, int(port), timeout=60)
        skip = {"host", "authorization", "content-length", "transfer-encoding", "connection"}
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in skip}
        if authorization:
            headers["Authorization"] = authorization
        headers["Content-Length"] = str(len(body))
        try:
            connection.request(handler.command, handler.path, body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read()
        finally:
            connection.close()
        hop = {"transfer-encoding", "connection", "keep-alive"}
        kept = {k: v for k, v in response.getheaders() if k.lower() not in hop}
        return response.status, kept, payload


def _read_body(handler: http.server.BaseHTTPRequestHandler) -> bytes:
    """The request's body, sent with a Content-Length or chunked (a streamed PATCH)."""
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        body = bytearray()
        while True:
            size = int(handler.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return bytes(body)
            body += handler.rfile.read(size)
            handler.rfile.readline()
    return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
