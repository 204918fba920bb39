"""Registry credentials go to the registry that challenged for them and nowhere else.

The real registry (Debian's docker-registry, ``auth_registry``: htpasswd, user ``ci``) sits
behind ``Host`` fronts on loopback addresses that play other hosts: ``registry.test`` (the
registry as the client knows it, over HTTPS), ``storage.test`` (a storage backend an upload
``Location`` may name, like the S3 pre-signed URLs behind some registries) and ``auth.test``
(a token service a ``Bearer`` challenge may name). The test resolves those names to 127.0.0.x
itself, and refuses any other name, so nothing ever leaves 127.0.0.0/8, on this code or the
old one. Every other host records the Authorization headers it receives.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import os
import socket
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from launcher.errors import RemoteError
from launcher.image import auth, manifest, reference
from launcher.image.registry import Registry
from launcher.image.upload import put_blob, upload
from tests.support.proxy import Answer, Host

LOGIN = ("ci", "s3cret")  # tests/conftest.py's auth_registry
BASIC = "Basic " + base64.b64encode(b"ci:s3cret").decode()
TOKEN = "t0ken-for-registry.test"
NAMES = {"registry.test": "127.0.0.1", "storage.test": "127.0.0.2", "auth.test": "127.0.0.3"}
REFUSED = "(HTTPS only, or plain HTTP between loopback hosts)"


# --- the rule, as a table (no network) ------------------------------------------------------

REG, LOOP = "https://registry.example.com", "http://127.0.0.1:5000"


@pytest.mark.parametrize(
    ("registry", "url", "realm", "expected"),
    [
        # the registry itself, relative or absolute: the login
        (
            REG,
            "/v2/ws/blobs/uploads/1?_state=a%2Fb",
            False,
            (f"{REG}/v2/ws/blobs/uploads/1?_state=a%2Fb", True),
        ),
        (REG, "https://REGISTRY.example.com:443/v2/x", False, (f"{REG}/v2/x", True)),
        # a registry behind a TLS proxy naming itself http:// is still spoken to over TLS
        (REG, "http://registry.example.com/v2/x", False, (f"{REG}/v2/x", True)),
        (LOOP, "http://127.0.0.1:5000/v2/x", False, (f"{LOOP}/v2/x", True)),
        # another host over HTTPS: followed without the login (storage, S3 pre-signed URLs)
        (
            REG,
            "https://bucket.s3.amazonaws.com/x?X-Amz-Signature=s",
            False,
            ("https://bucket.s3.amazonaws.com/x?X-Amz-Signature=s", False),
        ),
        (REG, "//cdn.example.com/x", False, ("https://cdn.example.com/x", False)),
        (
            REG,
            "https://registry.example.com:8443/x",
            False,
            ("https://registry.example.com:8443/x", False),
        ),
        (LOOP, "http://127.0.0.2:6000/x", False, ("http://127.0.0.2:6000/x", False)),
        (LOOP, "http://localhost:5000/x", False, ("http://localhost:5000/x", False)),
        # the token service the registry challenged with: the login, over HTTPS
        (REG, "https://auth.example.com/token", True, ("https://auth.example.com/token", True)),
        (LOOP, "http://127.0.0.3:7000/token", True, ("http://127.0.0.3:7000/token", True)),
        (LOOP, "http://[::1]:7000/token", True, ("http://[::1]:7000/token", True)),
    ],
)
def test_the_login_goes_to_the_registry_and_its_token_service_only(registry, url, realm, expected):
    """Docker's client keys the challenges it answers by scheme, host and port
    (distribution ``internal/client/auth/challenge``: ``normalizedURL``) and adds the login only
    to requests for such an origin; go-containerregistry likewise (``transport.matchesHost``,
    whose ``schemeTransport`` also speaks the registry's own scheme to the registry's host).
    The token spec has the client send its credentials to the realm the challenge names
    (distribution.github.io/distribution/spec/auth/token/, "How to authenticate"). The OCI
    distribution spec has the upload Location "either absolute or relative as described in
    RFC 7231", an opaque URL ("Pushing a Layer")."""
    assert auth.destination(registry, url, realm=realm) == auth.Destination(*expected)


@pytest.mark.parametrize(
    ("registry", "url", "realm", "host"),
    [
        (REG, "http://storage.example.com/upload/1", False, "storage.example.com"),
        (REG, "http://auth.example.com/token", True, "auth.example.com"),
        (REG, "http://registry.example.com:8080/v2/x", False, "registry.example.com:8080"),
        (LOOP, "http://storage.test:8080/x", False, "storage.test:8080"),
        (LOOP, "http://auth.test/token", True, "auth.test"),
        # a remote registry may not send the login in cleartext to a local port either
        (REG, "http://127.0.0.1:8080/token", True, "127.0.0.1:8080"),
        (REG, "ftp://storage.example.com/x", False, "storage.example.com"),
    ],
)
def test_plain_http_off_loopback_is_refused_with_one_line_naming_the_host(
    registry, url, realm, host
):
    """Docker speaks plain HTTP only to insecure registries, and only loopback ones are
    insecure unless configured ("By default, local registries (::1/128 and 127.0.0.0/8) are
    configured as insecure", Docker Engine API, RegistryServiceConfig); go-containerregistry
    refuses an http realm from a secure registry (``validateRealmURL``). RFC 6750 section 5.3:
    bearer tokens only over TLS."""
    with pytest.raises(RemoteError) as refused:
        auth.destination(registry, url, realm=realm)
    (line,) = str(refused.value).splitlines()
    assert f"on {host}:" in line and "refused" in line and line.endswith(REFUSED)


# --- against the real registry ----------------------------------------------------------------


@pytest.fixture
def names(monkeypatch) -> dict[str, str]:
    """Name resolution in this process: ``NAMES`` to their loopback addresses, loopback
    itself as usual, anything else refused (the tests reach 127.0.0.0/8 only)."""
    real = socket.getaddrinfo

    def resolve(host, port, *args, **kwargs):  # noqa: ANN001, ANN202 - socket's signature
        name = host.decode() if isinstance(host, bytes) else host
        address = NAMES.get(name, name)
        if not reference.is_loopback(address):
            raise socket.gaierror(socket.EAI_NONAME, f"{name}: this test reaches loopback only")
        return real(address, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return NAMES


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[str, str]:
    """(certificate, key) files: one self-signed certificate for every test name and address."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "launcher tests")])
    now = datetime.datetime.now(datetime.timezone.utc)
    alt = [x509.DNSName(n) for n in NAMES] + [
        x509.IPAddress(ipaddress.ip_address(a)) for a in NAMES.values()
    ]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    root = tmp_path_factory.mktemp("tls")
    (root / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (root / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(root / "cert.pem"), str(root / "key.pem")


@pytest.fixture
def tls(certificate, monkeypatch) -> ssl.SSLContext:
    """A server context with the test certificate, which the client (requests) trusts."""
    cert, key = certificate
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", cert)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


@pytest.fixture
def hosts() -> Iterator[Callable[..., Host]]:
    """Start ``Host``s; stopped after the test."""
    started: list[Host] = []

    def start(**kwargs) -> Host:  # noqa: ANN003
        started.append(Host(**kwargs).start())
        return started[-1]

    yield start
    for host in started:
        host.stop()


def moved(value: str, origin: str) -> str:
    """``value`` (a URL, absolute or relative) on ``origin``."""
    parts, to = urlsplit(value), urlsplit(origin)
    return urlunsplit((to.scheme, to.netloc, parts.path, parts.query, parts.fragment))


def uploads_to(storage: str, front: Callable[[], str]) -> Callable[[str, str], str]:
    """A registry front's rewrite: upload sessions on ``storage``, other Locations on the
    front itself (``front()``, known once it listens)."""

    def rewrite(header: str, value: str) -> str:
        if header != "location":
            return value
        return moved(value, storage if "/blobs/uploads/" in value else front())

    return rewrite


def token_service(method: str, path: str, authorization: str | None) -> Answer | None:
    """The token service: a token for the right Basic login, 401 otherwise."""
    if not path.startswith("/token"):
        return 404, {}, b""
    if authorization != BASIC:
        return 401, {"WWW-Authenticate": 'Basic realm="token"'}, b""
    return 200, {"Content-Type": "application/json"}, json.dumps({"token": TOKEN}).encode()


def bearer_front(realm: str) -> Callable[[str, str], str]:
    """A front that asks for a token from ``realm`` instead of the registry's Basic login."""

    def rewrite(header: str, value: str) -> str:
        if header == "www-authenticate":
            return f'Bearer realm="{realm}/token",service="registry.test"'
        return value

    return rewrite


def push_and_pull(client: Registry, repo: str) -> None:
    """A config, a layer of two chunks (a PATCH, then the closing PUT) and a manifest up;
    all of them back."""
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {}}).encode()
    layer = os.urandom(9 << 20)
    config_digest = put_blob(client, repo, config)
    layer_digest = upload(
        client,
        repo,
        client.start_upload(repo),
        lambda: [layer],
        lambda: manifest.digest_of(layer),
        lambda n: None,
    )
    raw = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": manifest.OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest,
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": layer_digest,
                    "size": len(layer),
                }
            ],
        }
    ).encode()
    client.put_manifest(repo, "1", raw, manifest.OCI_MANIFEST)
    assert client.get_manifest(repo, "1")[0] == raw
    assert client.get_blob(repo, layer_digest) == layer


def test_an_upload_on_another_https_host_goes_there_without_the_login(
    auth_registry, names, tls, hosts
):
    """The issue's first finding, the safe half: a registry may hand uploads to another host
    (the OCI distribution spec: an absolute Location is an opaque URL the client follows, and a
    layer GET "MAY issue a 307 ... redirect to another service"; storage behind a registry
    authorises by its URL, as S3 pre-signed URLs do). Docker attaches the login only to the
    origin that challenged for it (distribution ``challenge.Manager``), so the upload goes
    there over HTTPS without it, and the push and the pull still work."""
    storage = hosts(
        address="127.0.0.2",
        name="storage.test",
        upstream=auth_registry.host,
        tls=tls,
        upstream_auth=lambda a: BASIC,  # its own authority, as a pre-signed URL's
        rewrite=lambda header, value: moved(value, storage.origin),
    )
    front: Host = hosts(
        address="127.0.0.1",
        name="registry.test",
        upstream=auth_registry.host,
        tls=tls,
        rewrite=uploads_to(storage.origin, lambda: front.origin),
    )
    push_and_pull(Registry(front.netloc, lambda: LOGIN, backoff=0.01), "stored-elsewhere")
    assert {s.method for s in storage.seen} >= {"PATCH", "PUT"}  # the upload did go there
    assert storage.authorizations() == []
    assert set(front.authorizations()) == {BASIC}


def test_a_token_service_on_another_https_host_gets_the_login_and_nobody_else_the_token(
    auth_registry, names, tls, hosts
):
    """The token spec: the client asks the realm the registry's Bearer challenge names for a
    token, with its Basic credentials (distribution.github.io/distribution/spec/auth/token/),
    and presents the token to the registry (RFC 6750: to the resource server). Neither goes
    to the storage host an upload is sent to."""
    service = hosts(address="127.0.0.3", name="auth.test", tls=tls, local=token_service)
    storage = hosts(
        address="127.0.0.2",
        name="storage.test",
        upstream=auth_registry.host,
        tls=tls,
        upstream_auth=lambda a: BASIC,
        rewrite=lambda header, value: moved(value, storage.origin),
    )
    locations = uploads_to(storage.origin, lambda: front.origin)
    challenge = bearer_front(service.origin)
    front: Host = hosts(
        address="127.0.0.1",
        name="registry.test",
        upstream=auth_registry.host,
        tls=tls,
        upstream_auth=lambda a: BASIC if a == f"Bearer {TOKEN}" else None,
        rewrite=lambda header, value: challenge(header, locations(header, value)),
    )
    scopes = ["repository:tokened:pull,push"]
    push_and_pull(Registry(front.netloc, lambda: LOGIN, scopes, backoff=0.01), "tokened")
    assert service.authorizations() == [BASIC]
    assert service.seen[0].path.startswith("/token?service=registry.test&scope=repository")
    assert set(front.authorizations()) == {f"Bearer {TOKEN}"}  # the password stays away
    assert storage.seen and storage.authorizations() == []


@pytest.mark.parametrize("registry_tls", [True, False], ids=["https-registry", "loopback-registry"])
def test_a_plain_http_upload_location_off_loopback_is_refused(
    auth_registry, names, tls, hosts, registry_tls
):
    """The issue's reproduction: an upload Location ``http://<another host>/...`` made the
    old client send the Basic password there in cleartext. Docker speaks plain HTTP only to
    insecure registries, by default the loopback ones (Docker Engine API,
    RegistryServiceConfig.InsecureRegistryCIDRs): nothing goes, one line names the host."""
    storage = hosts(address="127.0.0.2", name="storage.test")
    front: Host = hosts(
        address="127.0.0.1",
        name="registry.test" if registry_tls else "127.0.0.1",
        upstream=auth_registry.host,
        tls=tls if registry_tls else None,
        rewrite=uploads_to(storage.origin, lambda: front.origin),
    )
    client = Registry(front.netloc, lambda: LOGIN, backoff=0.01)
    with pytest.raises(RemoteError) as refused:
        put_blob(client, "refused", b"{}")
    (line,) = str(refused.value).splitlines()
    assert f"refused its upload location on {storage.netloc}:" in line
    assert storage.seen == []
    assert set(front.authorizations()) == {BASIC}  # the login still went to the registry


@pytest.mark.parametrize("registry_tls", [True, False], ids=["https-registry", "loopback-registry"])
def test_a_plain_http_token_service_off_loopback_is_refused(
    auth_registry, names, tls, hosts, registry_tls
):
    """The issue's second reproduction: a Bearer challenge with an ``http://`` realm on
    another host received the password and then the token. The token spec's realms are
    HTTPS; go-containerregistry refuses an http realm from a registry that is not insecure
    (``validateRealmURL``); RFC 6750 section 5.3 keeps bearer tokens on TLS."""
    service = hosts(address="127.0.0.3", name="auth.test", local=token_service)
    front: Host = hosts(
        address="127.0.0.1",
        name="registry.test" if registry_tls else "127.0.0.1",
        upstream=auth_registry.host,
        tls=tls if registry_tls else None,
        upstream_auth=lambda a: None,
        rewrite=bearer_front(service.origin),
    )
    client = Registry(front.netloc, lambda: LOGIN, ["repository:x:pull"], backoff=0.01)
    with pytest.raises(RemoteError) as refused:
        client.has_blob("x", "sha256:" + "0" * 64)
    (line,) = str(refused.value).splitlines()
    assert f"refused its token service on {service.netloc}:" in line and "your login" in line
    assert service.seen == []
    assert front.authorizations() == []


def test_a_loopback_registry_may_use_a_loopback_token_service_over_plain_http(
    auth_registry, names, hosts
):
    """What stays as it was: a loopback registry is insecure (plain HTTP) by default, as in
    Docker, and so is a loopback token service it challenges with; push and pull work."""
    service = hosts(address="127.0.0.3", name="127.0.0.3", local=token_service)
    challenge = bearer_front(service.origin)
    front: Host = hosts(
        address="127.0.0.1",
        name="127.0.0.1",
        upstream=auth_registry.host,
        upstream_auth=lambda a: BASIC if a == f"Bearer {TOKEN}" else None,
        rewrite=lambda header, value: challenge(header, moved(value, front.origin)),
    )
    push_and_pull(Registry(front.netloc, lambda: LOGIN, backoff=0.01), "loopback-token")
    assert set(service.authorizations()) == {BASIC}
    assert set(front.authorizations()) == {f"Bearer {TOKEN}"}


# The launcher as a user runs it, with this test's names (``NAMES``, loopback only).
_RESOLVING_LAUNCHER = """
import os, runpy, socket
names = dict(pair.split("=") for pair in os.environ["TEST_NAMES"].split(","))
real = socket.getaddrinfo
def resolve(host, port, *args, **kwargs):
    name = host.decode() if isinstance(host, bytes) else host
    address = names.get(name, name)
    if not (address.startswith("127.") or address in ("localhost", "::1")):
        raise socket.gaierror(socket.EAI_NONAME, name + ": this test reaches loopback only")
    return real(address, port, *args, **kwargs)
socket.getaddrinfo = resolve
runpy.run_module("launcher", run_name="__main__", alter_sys=True)
"""


def test_the_cli_refuses_a_plain_http_upload_location_with_one_line(registry, hosts, tmp_path):
    """``launcher build`` against a registry whose upload Location is plain HTTP on another
    host: exit 1 and one line naming the host (the launcher's errors), nothing sent there."""
    from devenv.images import push_random_base

    push_random_base(registry.host, "cli-base", "1", [], tmp_path)
    storage = hosts(address="127.0.0.2", name="storage.test")
    front: Host = hosts(
        address="127.0.0.1",
        name="127.0.0.1",
        upstream=registry.host,
        rewrite=uploads_to(storage.origin, lambda: front.origin),
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "train.py").write_text("print('hello')\n")
    (tmp_path / "docker").mkdir()
    env = {
        **os.environ,
        "TEST_NAMES": ",".join(f"{k}={v}" for k, v in NAMES.items()),
        "DOCKER_CONFIG": str(tmp_path / "docker"),
    }
    env.pop("LAUNCHER_REGISTRY", None)
    result = subprocess.run(
        [sys.executable, "-c", _RESOLVING_LAUNCHER, "build", "--image",
         f"{front.netloc}/cli-base:1", "--workspace", str(ws), "--repo", f"{front.netloc}/cli-ws"],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    # progress lines come first ("base: 1 layer mounted ..."); the error is one line
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("launcher: error:")]
    assert result.stderr.rstrip().endswith(line)
    assert f"refused its upload location on {storage.netloc}:" in line
    assert storage.seen == []
