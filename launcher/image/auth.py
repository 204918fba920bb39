"""Registry credentials: ECR through boto3 (no `docker login`), else Docker's own config.

The Docker config file (``$DOCKER_CONFIG/config.json``: ``auths``, ``credHelpers``,
``credsStore``) is read by the Docker SDK's resolver, which knows Docker's rules: Docker Hub
logins kept under ``https://index.docker.io/v1/``, URL-keyed legacy entries, credential
helpers and stores.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from launcher.image.reference import DOCKER_HUB

if TYPE_CHECKING:
    from launcher.aws import Aws

ECR_HOST = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$"
)
Credentials = tuple[str, str]


def is_ecr(host: str) -> bool:
    return ECR_HOST.match(host) is not None


def ecr_credentials(host: str, aws: Aws | None) -> Credentials | None:
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


def credentials(host: str, aws: Aws | None = None) -> Credentials | None:
    return ecr_credentials(host, aws) or docker_config_credentials(host)
