"""Build and push the workspace image with whichever builder applies; return REPO@digest."""

from __future__ import annotations

import os
from pathlib import Path

from launcher.errors import UsageError
from launcher.image import auth, manifest, reference
from launcher.image.patch import Patched, patch
from launcher.image.registry import Registry
from launcher.progress import ProgressFn

DOCKERFILE_ENV = "LAUNCHER_DOCKERFILE"
DEFAULT_DOCKERFILE = "Dockerfile.launcher"
# Push workspace images to this registry host instead of the stack's (an air-gapped mirror,
# or a local registry next to an emulated AWS whose ECR host does not exist).
REGISTRY_ENV = "LAUNCHER_REGISTRY"
BUILDERS = ("auto", "registry", "docker")


def target_repository(repo: str) -> reference.Reference:
    parsed = reference.parse(repo, "--repo")
    override = os.environ.get(REGISTRY_ENV)
    if override:
        parsed = reference.Reference(override.rstrip("/"), parsed.repository)
    return reference.Reference(parsed.registry, parsed.repository)


def choose_builder(builder: str, workspace: str | os.PathLike) -> tuple[str, str | None]:
    if builder not in BUILDERS:
        raise UsageError(f"--builder {builder!r}: allowed {', '.join(BUILDERS)}")
    dockerfile = os.environ.get(DOCKERFILE_ENV, DEFAULT_DOCKERFILE)
    has_dockerfile = (Path(workspace) / dockerfile).is_file()
    if builder == "docker" or (builder == "auto" and has_dockerfile):
        return "docker", dockerfile if has_dockerfile else None
    return "registry", None


def workspace_image(
    base: str,
    workspace: str | os.PathLike,
    repo: str,
    *,
    aws=None,
    builder: str = "auto",
    platform: str = "linux/amd64",
    dryrun: bool = False,
    progress: ProgressFn | None = None,
) -> Patched:
    if not Path(workspace).is_dir():
        raise UsageError(f"--workspace {os.fspath(workspace)!r}: no such directory")
    base_ref = reference.parse(base, "--image")
    repo_ref = target_repository(repo)
    target_platform = manifest.parse_platform(platform)
    kind, dockerfile = choose_builder(builder, workspace)
    scopes = {
        base_ref.registry: [f"repository:{base_ref.repository}:pull"],
    }
    scopes.setdefault(repo_ref.registry, []).append(f"repository:{repo_ref.repository}:pull,push")
    clients: dict[str, Registry] = {}

    def registry_for(ref: reference.Reference) -> Registry:
        if ref.registry not in clients:
            clients[ref.registry] = Registry(
                ref.registry,
                lambda host=ref.registry: auth.credentials(host, aws),
                scopes[ref.registry],
            )
        return clients[ref.registry]

    if kind == "docker":
        from launcher.image.docker_build import docker_build

        return docker_build(
            base_ref,
            repo_ref,
            workspace,
            dockerfile,
            target_platform,
            registry_for,
            auth.credentials(repo_ref.registry, aws),
            dryrun=dryrun,
            progress=progress,
        )
    return patch(
        base_ref,
        repo_ref,
        workspace,
        target_platform,
        registry_for,
        dryrun=dryrun,
        progress=progress,
    )


def image_exists(image: str, aws=None) -> bool:
    """One HEAD for the image's manifest in its registry (credentials as for any pull)."""
    ref = reference.parse(image, "--image")
    client = Registry(
        ref.registry,
        lambda: auth.credentials(ref.registry, aws),
        [f"repository:{ref.repository}:pull"],
    )
    return client.head_manifest(ref.repository, ref.ref, manifest.ACCEPT) is not None
