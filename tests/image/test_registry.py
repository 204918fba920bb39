"""The distribution client's transport: retries, re-authentication, ECR credentials."""

from __future__ import annotations

import base64
import http.server
import json
import threading
import time

import pytest

from launcher.errors import RemoteError
from launcher.image import auth, manifest, reference
from launcher.image.registry import Registry
from launcher.image.upload import read_ahead

MANIFEST = json.dumps(
    {"schemaVersion": 2, "mediaType": manifest.OCI_MANIFEST, "config": {}, "layers": []}
).encode()


class Scripted(http.server.BaseHTTPRequestHandler):
    """Answers each request with the next scripted (status, headers) and records it."""

    script: list[tuple[int, dict]] = []
    seen: list[tuple[str, str | None]] = []

    def do_GET(self):  # noqa: N802 - http.server's naming
        Scripted.seen.append((self.path, self.headers.get("Authorization")))
        status, headers = Scripted.script.pop(0)
        body = MANIFEST if status == 200 else b"{}"
        if self.path.startswith("/token"):
            body = json.dumps({"token": "t0ken"}).encode()
        self.send_response(status)
        for key, value in {"Content-Type": manifest.OCI_MANIFEST, **headers}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    Scripted.seen = []
    yield f"127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_retries_429_and_5xx_with_backoff(server):
    Scripted.script = [(503, {}), (429, {}), (200, {})]
    client = Registry(server, lambda: None, backoff=0.001)
    raw, _, digest = client.get_manifest("repo", "tag", manifest.ACCEPT)
    assert raw == MANIFEST and digest == manifest.digest_of(MANIFEST)
    assert len(Scripted.seen) == 3


def test_a_429_waits_as_long_as_the_registry_asks(server):
    """Retry-After on a 429 is honoured (RFC 9110 10.2.3; Docker Hub and ECR send it when
    they throttle): a client that retries sooner is throttled again."""
    Scripted.script = [(429, {"Retry-After": "1"}), (200, {})]
    client = Registry(server, lambda: None, backoff=0.001)
    started = time.monotonic()
    client.get_manifest("repo", "tag", manifest.ACCEPT)
    assert time.monotonic() - started >= 1
    assert len(Scripted.seen) == 2


def test_gives_up_after_the_retries_with_one_line(server):
    Scripted.script = [(500, {})] * 5
    client = Registry(server, lambda: None, backoff=0.001)
    with pytest.raises(RemoteError, match=r"GET /v2/repo/manifests/tag failed: HTTP 500"):
        client.get_manifest("repo", "tag", manifest.ACCEPT)


def test_authenticates_once_on_401_then_reports_no_access(server):
    challenge = {"WWW-Authenticate": 'Basic realm="r"'}
    Scripted.script = [(401, challenge), (200, {})]
    client = Registry(server, lambda: ("user", "pw"), backoff=0.001)
    client.get_manifest("repo", "tag", manifest.ACCEPT)
    expected = "Basic " + base64.b64encode(b"user:pw").decode()
    assert [a for _, a in Scripted.seen] == [None, expected]
    Scripted.script = [(401, challenge), (401, challenge)]
    with pytest.raises(RemoteError, match="no access for GET /v2/repo/manifests/tag"):
        Registry(server, lambda: ("user", "bad"), backoff=0.001).get_manifest(
            "repo", "tag", manifest.ACCEPT
        )


def test_bearer_token_flow_asks_for_every_scope_with_credentials(server):
    realm = f'Bearer realm="http://{server}/token",service="reg",scope="repository:a:pull"'
    Scripted.script = [(401, {"WWW-Authenticate": realm}), (200, {}), (200, {})]
    scopes = ["repository:base:pull", "repository:ws:pull,push"]
    client = Registry(server, lambda: ("u", "p"), scopes, backoff=0.001)
    client.get_manifest("ws", "tag", manifest.ACCEPT)
    (first, _), (token_path, token_auth), (_, retried) = Scripted.seen
    assert token_path == (
        "/token?service=reg&scope=repository%3Abase%3Apull&scope=repository%3Aws%3Apull%2Cpush"
    )
    assert token_auth == "Basic " + base64.b64encode(b"u:p").decode()
    assert retried == "Bearer t0ken"


def test_ecr_credentials_come_from_get_authorization_token(moto_server, monkeypatch, tmp_path):
    for key, value in moto_server.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))  # no Docker config file
    from launcher.aws.client import Aws

    user, password = auth.credentials("123456789012.dkr.ecr.us-east-1.amazonaws.com", Aws())
    assert user == "AWS" and password
    assert auth.credentials("registry.example.com", Aws()) is None


def _docker_config(tmp_path, monkeypatch, config: dict) -> None:
    (tmp_path / "config.json").write_text(json.dumps(config))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))


def _basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def test_docker_hub_logins_are_found_under_the_index_url(tmp_path, monkeypatch):
    """`docker login` keeps Docker Hub under https://index.docker.io/v1/ (bug: missed)."""
    _docker_config(
        tmp_path,
        monkeypatch,
        {"auths": {"https://index.docker.io/v1/": {"auth": _basic("hub", "pw")}}},
    )
    assert auth.credentials(reference.DOCKER_HUB) == ("hub", "pw")


def test_url_keyed_entries_match_their_host(tmp_path, monkeypatch):
    _docker_config(
        tmp_path,
        monkeypatch,
        {"auths": {"https://registry.example.com/v2/": {"auth": _basic("u", "p")}}},
    )
    assert auth.credentials("registry.example.com") == ("u", "p")
    assert auth.credentials("other.example.com") is None


def test_fips_and_china_ecr_hosts_are_ecr():
    assert auth.is_ecr("123456789012.dkr.ecr-fips.us-east-1.amazonaws.com")
    assert auth.is_ecr("123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn")
    assert not auth.is_ecr("registry.example.com")


def test_the_ecr_token_call_goes_through_the_aws_module(moto_server, monkeypatch, tmp_path):
    """One module talks to AWS: the token call is counted there (bug: it bypassed it)."""
    for key, value in moto_server.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    from launcher.aws.client import Aws

    aws = Aws()
    auth.credentials("123456789012.dkr.ecr-fips.us-east-1.amazonaws.com", aws)
    assert aws.calls == 1


def test_read_ahead_makes_one_item_ahead_in_order_and_passes_on_a_failure():
    made: list[int] = []

    def source():
        for i in range(5):
            made.append(i)
            if i == 3:
                raise ValueError("source failed at 3")
            yield i

    got = []
    items = read_ahead(source())
    with pytest.raises(ValueError, match="source failed at 3"):
        for item in items:
            got.append(item)
            time.sleep(0.01)  # gives the reading thread time to run ahead, if it would
            assert len(made) <= len(got) + 1  # never more than one item ahead
    assert got == [0, 1, 2]


def test_read_ahead_of_nothing_is_nothing():
    assert list(read_ahead(iter(()))) == []
