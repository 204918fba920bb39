"""An account's FilterLogEvents quota in front of the emulator: what moto does not enforce.

CloudWatch Logs allows an account 5 FilterLogEvents calls a second per Region, shared by
everyone in it (CloudWatch Logs quotas, cloudwatch_limits_cwl.html), and refuses the calls
beyond it with ``ThrottlingException``, HTTP 400 ("The request was denied due to request
throttling.", CloudWatch Logs API reference, CommonErrors.html). moto answers every call.
``QuotaProxy`` is an HTTP server on 127.0.0.1 that forwards every request to the emulator
except the FilterLogEvents calls its ``TokenBucket`` refuses, which it answers as CloudWatch
Logs does. Each proxy is one account's quota: clients pointed at it (``endpoint_url``) share
it, clients of another proxy have their own.

AWS does not say how much burst its token buckets allow for this quota; ``TokenBucket``
holds one second's worth by default.
"""

from __future__ import annotations

import http.client
import http.server
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

THROTTLED_BODY = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()


@dataclass
class TokenBucket:
    """``rate`` calls a second on average, up to ``burst`` at once; ``clock`` injectable."""

    rate: float = 5.0
    burst: float = 5.0
    clock: Callable[[], float] = time.monotonic
    _tokens: float | None = None
    _at: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self) -> bool:
        """Whether a call may go now (and, if so, it is counted)."""
        with self._lock:
            now = self.clock()
            if self._tokens is None:
                self._tokens = self.burst
            else:
                self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
            if self._tokens < 1.0:
                return False
            self._tokens -= 1.0
            return True


def operation(target: str | None) -> str:
    """The operation a JSON-protocol request names (``X-Amz-Target: Logs_20140328.Op``)."""
    return (target or "").rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Seen:
    at: float  # monotonic time the request came in
    operation: str  # its X-Amz-Target operation ("" for REST calls such as Batch's)
    throttled: bool


class QuotaProxy:
    """Forwards to ``upstream`` (``http://127.0.0.1:PORT``), refusing the ``limited``
    operation's calls beyond ``bucket``; records every request in ``seen``."""

    def __init__(
        self, upstream: str, bucket: TokenBucket, limited: str = "FilterLogEvents"
    ) -> None:
        self.upstream = upstream.removeprefix("http://").rstrip("/")
        self.bucket, self.limited = bucket, limited
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as botocore's pool expects

            def _any(self) -> None:
                proxy._answer(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _any

            def log_message(self, *_: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reset(self) -> None:
        with self._lock:
            self.seen = []

    def _answer(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        op = operation(handler.headers.get("X-Amz-Target"))
        refused = op == self.limited and not self.bucket.take()
        with self._lock:
            self.seen.append(Seen(time.monotonic(), op, refused))
        if refused:
            status: int = 400
            headers = [
                ("Content-Type", "application/x-amz-json-1.1"),
                ("x-amzn-ErrorType", "ThrottlingException"),
            ]
            payload = THROTTLED_BODY
        else:
            upstream = http.client.HTTPConnection(self.upstream, timeout=60)
            try:
                sent = {k: v for k, v in handler.headers.items() if k.lower() != "connection"}
                upstream.request(handler.command, handler.path, body=body, headers=sent)
                answer = upstream.getresponse()
                status, payload = answer.status, answer.read()
                skip = {"connection", "transfer-encoding", "content-length"}
                headers = [(k, v) for k, v in answer.getheaders() if k.lower() not in skip]
            finally:
                upstream.close()
        handler.send_response(status)
        for key, value in headers:
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(payload)
