"""Registry credentials: ECR through boto3 (no `docker login`), else the Docker config file."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from pathlib import Path

from launcher.errors import RemoteError

ECR_HOST = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$"
)
Credentials = tuple[str, str]


def ecr_credentials(host: str, aws) -> Credentials | None:
    match = ECR_HOST.match(host)
    if not match or aws is None:
        return None
    ecr = aws.session.client("ecr", region_name=match["region"])
    try:
        data = ecr.get_authorization_token(registryIds=[match["account"]])["authorizationData"]
    except Exception as exc:  # botocore errors: the one line says which call failed
        raise RemoteError(f"AWS GetAuthorizationToken for {host} failed: {exc}") from exc
    user, _, password = base64.b64decode(data[0]["authorizationToken"]).decode().partition(":")
    return user, password


def docker_config_credentials(host: str) -> Credentials | None:
    path = Path(os.environ.get("DOCKER_CONFIG", Path.home() / ".docker")) / "config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    helper = (config.get("credHelpers") or {}).get(host) or config.get("credsStore")
    if helper:
        try:
            out = subprocess.run(
                [f"docker-credential-{helper}", "get"],
                input=host,
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout
            found = json.loads(out)
            return found["Username"], found["Secret"]
        except (OSError, subprocess.SubprocessError, ValueError, KeyError):
            pass
    entry = (config.get("auths") or {}).get(host) or {}
    if entry.get("auth"):
        user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
        return user, password
    return None


def credentials(host: str, aws=None) -> Credentials | None:
    return ecr_credentials(host, aws) or docker_config_credentials(host)
