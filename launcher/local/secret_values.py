"""Secrets for local runs: the values a job's ``secrets`` name, from a JSON file of the user's.

On AWS the ECS agent reads each value when a container starts; locally the backend reads them
from ``$LAUNCHER_LOCAL_SECRETS`` (default ``~/.config/efa-batch/secrets.json``), an object keyed
by the reference as ``--secret`` gives it: a Secrets Manager name (``"team/wandb"``), an ARN,
or ``"ssm:/team/token"``. A value is a string, or an object whose keys ``NAME#KEY`` picks from,
as Secrets Manager picks a key of a secret's JSON. Values reach a container at each start as a
file of shell assignments (``delivery``) on a tmpfs of the user's, which the prelude reads into
the command's environment: never the container's own environment (``docker inspect`` shows
that), the job's record, its definition or a log line.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

from launcher import private
from launcher.errors import UsageError
from launcher.stack.secrets import SSM_PREFIX, SecretError, SecretRef, Store

SECRETS_ENV = "LAUNCHER_LOCAL_SECRETS"


def default_file() -> Path:
    found = os.environ.get(SECRETS_ENV)
    return Path(found) if found else Path.home() / ".config" / "efa-batch" / "secrets.json"


def _keys(ref: SecretRef) -> list[str]:
    """The keys a reference may be filed under, most specific first."""
    if ref.store is Store.PARAMETER_STORE:
        name = ref.name.lstrip("/")
        return [k for k in (ref.arn, f"{SSM_PREFIX}/{name}", f"{SSM_PREFIX}{name}") if k]
    return [k for k in (ref.arn, ref.secret_name) if k]


def values(container: dict[str, Any], path: Path) -> dict[str, str]:
    """Each of the container's secrets as ``{variable: value}``; UsageError naming the first
    one the file does not hold (by its reference, never a value)."""
    wanted = container.get("secrets") or []
    if not wanted:
        return {}
    try:
        filed = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(
            f"a local run reads job secrets from {path} (set ${SECRETS_ENV}); it does not exist"
        ) from None
    except ValueError:
        raise UsageError(f"{path}: not JSON; expected an object of secret name -> value") from None
    if not isinstance(filed, dict):
        raise UsageError(f"{path}: expected an object of secret name -> value")
    found = {}
    for secret in wanted:
        try:
            ref = SecretRef.parse(secret["valueFrom"])
        except SecretError as exc:
            raise UsageError(f"secret {secret['name']}: {exc}") from None
        key = next((k for k in _keys(ref) if k in filed), None)
        if key is None:
            raise UsageError(
                f"secret {secret['name']}: {path} has no entry {_keys(ref)[-1]!r} (keys are "
                "secret names, ARNs or ssm:/PARAMETER)"
            )
        found[secret["name"]] = _pick(filed[key], ref.json_key, key, path)
    return found


def _pick(value: Any, json_key: str | None, key: str, path: Path) -> str:
    if json_key is None:
        return value if isinstance(value, str) else json.dumps(value)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = None
    if not isinstance(value, dict) or json_key not in value:
        raise UsageError(f"{path}: {key!r} has no JSON key {json_key!r}")
    return str(value[json_key])


# Where the file appears in a container, and the variable that tells the prelude.
CONTAINER_PATH = "/run/launcher-secrets.sh"
FILE_ENV = "LAUNCHER_SECRETS_FILE"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def script(found: dict[str, str]) -> str:
    """The values as POSIX shell assignments, each quoted (dash, bash and ash read them)."""
    bad = sorted(name for name in found if not _NAME.match(name))
    if bad:
        raise UsageError(f"secret {bad[0]}: not a variable name (letters, digits, _)")
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in found.items())


def delivery(found: dict[str, str], runtime: Path, node: int) -> Path:
    """A node's secrets written for one start into the attempt's runtime directory (the user's
    alone, ``launcher.private.job_runtime``) as a new file, never through a link. The file is
    bind-mounted read-only, and the engine (root) makes the mount: 0644, so any user the image
    runs as reads it in the container, while its directory keeps it from the machine's others."""
    path = runtime / f"node-{node}.sh"
    private.create(path, script(found).encode(), 0o644)
    return path
