"""The Docker SDK builder: for workspaces whose Dockerfile asks for a real build.

The workspace is built against the user's daemon with the base image as a build argument
(``ARG BASE_IMAGE``, or ``ARG IMAGE`` with ``ARG WORKSPACE`` the workspace's path, as
TorchX's Docker workspaces give a ``Dockerfile.torchx``; each where declared), tagged by
content (base digest + context + Dockerfile, + the path when the Dockerfile declares
``ARG WORKSPACE``), skipped when the registry already has that tag, and pushed with
credentials passed in-process. A dry run cannot know the digest (the push makes the
manifest): its reference names the tag's image as
``REPO@<digest of the docker build tagged TAG, known after push>``.

Credentials reach the engine the ways the Docker SDK (7.x) has for them: ``pull`` and ``push``
take ``auth_config`` for their one registry (``X-Registry-Auth``); ``build`` takes none and
sends the Docker config's logins itself (``X-Registry-Config``). A login that is not in the
Docker config (ECR's, from boto3) is therefore given to an explicit pull of the base before
the build, which then finds the base in the engine, pinned by digest, and pulls nothing.
"""

from __future__ import annotations

import io
import os
import re
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.docker_client import docker_client
from launcher.errors import RemoteError, UsageError
from launcher.image import layer, manifest, tarheader
from launcher.image.patch import Patched, RegistryFor, lookup
from launcher.image.reference import Reference
from launcher.image.workspace import Workspace
from launcher.progress import ProgressFn, Transfer

if TYPE_CHECKING:
    import docker

    from launcher.image.registry import Registry

BUILD_ARG = "BASE_IMAGE"
# What TorchX's DockerWorkspaceMixin passes (torchx/workspace/docker_workspace.py, 0.7.0): the
# role's image and the workspace's path, so a Dockerfile.torchx builds here unchanged.
TORCHX_IMAGE_ARG, TORCHX_WORKSPACE_ARG = "IMAGE", "WORKSPACE"
_ARG = re.compile(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)", re.I | re.M)
# Used with --builder docker when the workspace has no Dockerfile of its own.
GENERATED_DOCKERFILE = (
    f"ARG {BUILD_ARG}\nFROM ${BUILD_ARG}\nCOPY {layer.WORKSPACE_DIR}/ /workspace/\n"
    "WORKDIR /workspace\nENV LAUNCHER_WORKSPACE=/workspace\n"
)


def _context(workspace: Workspace, dockerfile: str | None) -> io.BytesIO:
    """The build context, from the screened walk (``.dockerignore`` and the files that look
    like secrets left out, launcher.image.workspace), never Docker's own reading of the
    directory: the workspace's files at the top and its Dockerfile, or the workspace under
    workspace/ and the generated Dockerfile."""
    buffer = io.BytesIO()
    under = "" if dockerfile else layer.WORKSPACE_DIR
    body = b"".join(layer.uncompressed(workspace, under=under))[: -2 * tarfile.BLOCKSIZE]
    buffer.write(body)  # without its end blocks
    shipped = {e.path for e in workspace.entries}
    if dockerfile is None or dockerfile not in shipped:  # .dockerignore may name it
        name = dockerfile or "Dockerfile"
        text = (
            (Path(workspace.root) / dockerfile).read_bytes()
            if dockerfile
            else GENERATED_DOCKERFILE.encode()
        )
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = len(text), tarheader.MTIME, 0o644
        buffer.write(info.tobuf(tarfile.PAX_FORMAT))
        buffer.write(text + tarfile.NUL * (-len(text) % tarfile.BLOCKSIZE))
    buffer.write(tarfile.NUL * 2 * tarfile.BLOCKSIZE)
    buffer.seek(0)
    return buffer


def docker_build(
    base: Reference,
    repo: Reference,
    workspace: str | os.PathLike[str],
    dockerfile: str | None,
    platform: manifest.Platform,
    registry_for: RegistryFor,
    credentials: tuple[str, str] | None,
    *,
    dryrun: bool = False,
    progress: ProgressFn | None = None,
) -> Patched:
    recipe = (Path(workspace) / dockerfile).read_text() if dockerfile else GENERATED_DOCKERFILE
    path = os.path.abspath(workspace)
    declared = set(_ARG.findall(recipe))
    if TORCHX_WORKSPACE_ARG in declared:  # the path can reach the image: part of the key
        recipe = f"{TORCHX_WORKSPACE_ARG}={path}\n{recipe}"
    found = lookup(
        base, repo, workspace, platform, registry_for, "docker\n" + recipe, hash_first=True
    )
    found.index.save(found.workspace, found.digests, None, key=found.key)
    if found.existing:
        return found.existing
    tag, base_digest = found.tag or "", found.base_digest or ""
    if dryrun:
        # Not a reference, so it cannot be sent by mistake; the tag tells two builds apart.
        pending = f"{repo.name}@<digest of the docker build tagged {tag}, known after push>"
        return Patched(pending, tag, False)

    client = docker_client()
    steps = Transfer("docker build", progress)
    pinned_base = str(base.with_digest(base_digest))
    _pull(client, pinned_base, str(platform), registry_for(base), steps)
    kwargs: dict[str, Any] = {  # docker's APIClient.build keywords
        "buildargs": _build_args(declared, pinned_base, path),
        "tag": f"{repo.name}:{tag}",
        "platform": str(platform),
        "rm": True,
        "decode": True,
    }
    kwargs.update(fileobj=_context(found.workspace, dockerfile), custom_context=True)
    if dockerfile:
        kwargs["dockerfile"] = dockerfile
    for event in client.api.build(**kwargs):
        if "error" in event:
            raise UsageError(f"docker build failed: {event['error'].strip()}")
        if event.get("stream", "").strip():
            steps.message(event["stream"].rstrip())
    digest = None
    auth = _auth_config(credentials)
    for event in client.api.push(repo.name, tag=tag, auth_config=auth, stream=True, decode=True):
        if "error" in event:
            raise RemoteError(f"docker push to {repo.name} failed: {event['error']}")
        digest = (event.get("aux") or {}).get("Digest", digest)
        if event.get("status") and event.get("id"):
            steps.message(f"{event['id']}: {event['status']}")
    if not digest:
        raise RemoteError(f"docker push to {repo.name} reported no digest")
    return Patched(str(repo.with_digest(digest)), tag, False)


def _build_args(declared: set[str], base: str, workspace: str) -> dict[str, str]:
    """The build arguments the Dockerfile declares (the engine warns of any it does not):
    the base as BASE_IMAGE or IMAGE, the workspace's path as WORKSPACE."""
    offered = {BUILD_ARG: base, TORCHX_IMAGE_ARG: base, TORCHX_WORKSPACE_ARG: workspace}
    return {name: value for name, value in offered.items() if name in declared}


def _auth_config(login: tuple[str, str] | None) -> dict[str, str] | None:
    """The SDK's ``auth_config`` for one registry; None lets it look in the Docker config."""
    return {"username": login[0], "password": login[1]} if login else None


def _pull(
    client: docker.DockerClient, image: str, platform: str, registry: Registry, steps: Transfer
) -> None:
    """The base into the engine with the base registry's own login (none of another's).
    The engine refuses some pulls (no access, no such manifest) before it streams a thing,
    as an HTTP error the SDK raises."""
    import docker.errors

    failed = f"docker pull of the base {image} failed"
    try:
        events = client.api.pull(
            image,
            platform=platform,
            auth_config=_auth_config(registry.login()),
            stream=True,
            decode=True,
        )
        for event in events:
            if "error" in event:
                raise RemoteError(f"{failed}: {event['error'].strip()}")
            if event.get("status") and event.get("id"):
                steps.message(f"{event['id']}: {event['status']}")
    except docker.errors.APIError as exc:
        raise RemoteError(f"{failed}: {exc.explanation or exc}") from None
