"""Registry credentials: where they come from, and where they may go.

Where from: ECR through boto3 (no `docker login`), else Docker's own config. The Docker config
file (``$DOCKER_CONFIG/config.json``: ``auths``, ``credHelpers``, ``credsStore``) is read by
the Docker SDK's resolver, which knows Docker's rules: Docker Hub logins kept under
``https://index.docker.io/v1/``, URL-keyed legacy entries, credential helpers and stores.

Where to (``destination``): a registry names other URLs, an upload's ``Location`` and a
token challenge's ``realm``, and a client that follows them with the login on hands the login
to whoever the registry names. Docker's client attaches credentials only to the origin that
challenged for them (distribution's ``challenge.Manager`` keys challenges by scheme, host and
port) and gives the Basic login to the token service the challenge names (the token spec,
distribution.github.io/distribution/spec/auth/token/); go-containerregistry does the same
(``transport.matchesHost``) and takes a plain-HTTP realm only from an insecure registry
(``validateRealmURL``). Docker treats only loopback registries as insecure unless told
("By default, local registries (::1/128 and 127.0.0.0/8) are configured as insecure", Engine
API, ``RegistryServiceConfig``), and so does this client (``reference.is_loopback``): plain
HTTP only from a loopback registry to a loopback host.

Another host over HTTPS is followed without the login: storage behind a registry, a
pre-signed URL, carries its own authority (ECR keeps uploads on its own host and sends layer
downloads to pre-signed S3 URLs by redirect, which requests already strips the login from).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urljoin, urlsplit, urlunsplit

from launcher.errors import RemoteError
from launcher.image.reference import DOCKER_HUB, is_loopback

ECR_HOST = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$"
)
Credentials = tuple[str, str]


class EcrLogin(Protocol):
    """What an image needs of AWS: ECR's credentials, as ``docker login`` would store them
    (``launcher.aws.client.Aws`` gives them; the image floor stays below the AWS backend)."""

    def ecr_authorization(self, registry_id: str, region: str) -> Credentials: ...


def is_ecr(host: str) -> bool:
    return ECR_HOST.match(host) is not None


def ecr_credentials(host: str, aws: EcrLogin | None) -> Credentials | None:
    match = ECR_HOST.match(host)
    if not match or aws is None:
        return None
    return aws.ecr_authorization(match["account"], match["region"])


def docker_config_credentials(host: str) -> Credentials | None:
    import docker.auth

    try:
        config = docker.auth.load_config()
        # The SDK names Docker Hub by its index (docker.io); we speak to registry-1.docker.io.
        entry = config.resolve_authconfig(None if host == DOCKER_HUB else host)
    except Exception:  # an unreadable config or a failing helper: no credentials, as docker
        return None
    if not entry:
        return None
    user = entry.get("username") or entry.get("Username")
    secret = entry.get("password") or entry.get("Password")
    return (user, secret) if user and secret else None


def credentials(host: str, aws: EcrLogin | None = None) -> Credentials | None:
    return ecr_credentials(host, aws) or docker_config_credentials(host)


_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Destination:
    """Where a request goes (``url``) and whether it carries the registry login."""

    url: str
    credentials: bool


def _origin(host: str | None, port: int | None, scheme: str) -> tuple[str, int]:
    return (host or "").lower(), port or _DEFAULT_PORTS.get(scheme, 0)


def destination(registry: str, url: str, *, realm: bool = False) -> Destination:
    """Where ``url``, named by the registry at ``registry`` (its base URL, ``scheme://host``),
    is sent: with the login to the registry itself (a relative URL is the registry's) and to
    the token ``realm`` it challenged with; without it to any other host over HTTPS;
    RemoteError, one line naming the host, for plain HTTP unless both the registry and the
    host are loopback.

    The registry's own host and port are always spoken to in the registry's scheme: a registry
    behind a TLS proxy that names itself ``http://`` (no X-Forwarded-Proto) is still reached
    over TLS, as go-containerregistry's ``schemeTransport`` does, and a port left out counts
    as the registry scheme's default, as there.
    """
    own, there = urlsplit(registry), urlsplit(urljoin(registry + "/", url))
    what = "token service" if realm else "upload location"
    try:
        port = there.port
    except ValueError:
        raise RemoteError(f"registry {own.netloc}: malformed {what} {url!r}") from None
    if _origin(there.hostname, port, own.scheme) == _origin(own.hostname, own.port, own.scheme):
        return Destination(urlunsplit((own.scheme, own.netloc, there.path, there.query, "")), True)
    loopback = is_loopback(there.hostname or "") and is_loopback(own.hostname or "")
    if there.scheme == "https" or (there.scheme == "http" and loopback):
        return Destination(there.geturl(), realm)
    carried = "your login" if realm else "the upload"
    why = "not HTTPS"
    if there.scheme == "http":
        why = f"plain HTTP would carry {carried} in cleartext"
    raise RemoteError(
        f"registry {own.netloc}: refused its {what} on {there.netloc or repr(url)}: {why} "
        "(HTTPS only, or plain HTTP between loopback hosts)"
    )
