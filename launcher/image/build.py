"""Build and push the workspace image with whichever builder applies; return REPO@digest."""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import TYPE_CHECKING

from launcher.errors import UsageError
from launcher.image import auth, manifest, reference
from launcher.image.compress import Compression
from launcher.image.patch import CopyJobs, Patched, RegistryFor, base_image, patch, resolve_base
from launcher.image.pullers import ANYONE, Puller, choose
from launcher.image.registry import Registry
from launcher.image.transfer import copied_tag
from launcher.progress import ProgressFn, size_text
from launcher.progress import say as progress_say

if TYPE_CHECKING:
    from launcher.aws import Aws

DOCKERFILE_ENV = "LAUNCHER_DOCKERFILE"
DEFAULT_DOCKERFILE = "Dockerfile.launcher"
# Push workspace images to this registry host instead of the stack's (an air-gapped mirror,
# or a local registry next to an emulated AWS whose ECR host does not exist).
REGISTRY_ENV = "LAUNCHER_REGISTRY"


class Builder(str, enum.Enum):
    AUTO = "auto"  # docker when the workspace has a Dockerfile.launcher, else registry
    REGISTRY = "registry"  # the workspace patched onto the base in the registry
    DOCKER = "docker"  # a Docker SDK build against the user's daemon

    def __str__(self) -> str:
        return self.value


def target_repository(repo: str) -> reference.Reference:
    parsed = reference.parse(repo, "--repo")
    override = os.environ.get(REGISTRY_ENV)
    if override:
        parsed = reference.Reference(override.rstrip("/"), parsed.repository)
    return reference.Reference(parsed.registry, parsed.repository)


def choose_builder(
    builder: Builder | str, workspace: str | os.PathLike[str]
) -> tuple[Builder, str | None]:
    try:
        builder = Builder(builder)
    except ValueError:
        allowed = ", ".join(b.value for b in Builder)
        raise UsageError(f"--builder {builder!r}: allowed {allowed}") from None
    dockerfile = os.environ.get(DOCKERFILE_ENV, DEFAULT_DOCKERFILE)
    has_dockerfile = (Path(workspace) / dockerfile).is_file()
    if builder is Builder.DOCKER or (builder is Builder.AUTO and has_dockerfile):
        return Builder.DOCKER, dockerfile if has_dockerfile else None
    return Builder.REGISTRY, None


def workspace_image(
    base: str,
    workspace: str | os.PathLike[str],
    repo: str,
    *,
    aws: Aws | None = None,
    builder: Builder | str = Builder.AUTO,
    platform: str = "linux/amd64",
    dryrun: bool = False,
    progress: ProgressFn | None = None,
    copy_jobs: CopyJobs | None = None,
    stream_base: bool = False,
    compression: Compression | str | None = None,
    puller: Puller | None = None,
) -> Patched:
    """``base`` plus ``workspace`` in ``repo``. ``compression`` of the workspace layer: what
    ``puller`` (whoever pulls the image) reads, its default when None."""
    chosen = choose(compression, puller or ANYONE)  # bad input before anything moves
    if not Path(workspace).is_dir():
        raise UsageError(f"--workspace {os.fspath(workspace)!r}: no such directory")
    base_ref = reference.parse(base, "--image")
    repo_ref = target_repository(repo)
    target_platform = manifest.parse_platform(platform)
    kind, dockerfile = choose_builder(builder, workspace)
    registry_for = _registries(base_ref, repo_ref, aws)
    if kind is Builder.DOCKER:
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
        copy_jobs=copy_jobs,
        stream_base=stream_base,
        compression=chosen,
    )


def _registries(
    base: reference.Reference, repo: reference.Reference, aws: Aws | None
) -> RegistryFor:
    """One client per registry, asking for pull on the base and push on the repository."""
    scopes = {base.registry: [f"repository:{base.repository}:pull"]}
    scopes.setdefault(repo.registry, []).append(f"repository:{repo.repository}:pull,push")
    clients: dict[str, Registry] = {}

    def registry_for(ref: reference.Reference) -> Registry:
        if ref.registry not in clients:
            clients[ref.registry] = Registry(
                ref.registry,
                lambda: auth.credentials(ref.registry, aws),  # ref: this call's, never rebound
                scopes[ref.registry],
            )
        return clients[ref.registry]

    return registry_for


def copy_base(
    base: str,
    repo: str,
    *,
    aws: Aws | None = None,
    platform: str = "linux/amd64",
    copy_jobs: CopyJobs | None,
    dryrun: bool = False,
    progress: ProgressFn | None = None,
) -> str:
    """Copy ``base`` (its ``platform`` manifest) into ``repo`` next to the registries, alone:
    what ``launcher mirror`` does for teams that seed bases ahead of time. Returns
    ``REPO@sha256:...`` (the base's own digest), the same with ``dryrun`` (nothing moves)."""
    base_ref = reference.parse(base, "--image")
    repo_ref = target_repository(repo)
    registry_for = _registries(base_ref, repo_ref, aws)
    source, target = registry_for(base_ref), registry_for(repo_ref)
    document, _, _, digest = base_image(
        source, base_ref, resolve_base(source, base_ref), manifest.parse_platform(platform)
    )
    pinned = base_ref.with_digest(digest)
    say = progress_say(progress)
    if target.head_manifest(repo_ref.repository, copied_tag(digest), manifest.ACCEPT) == digest:
        say(f"base: already copied to {repo_ref.name}")
        return str(repo_ref.with_digest(digest))
    if copy_jobs is None:
        raise UsageError(f"--image {base}: nothing can copy it next to the registries here")
    copy_jobs.check(pinned)
    blobs = [document["config"], *document["layers"]]
    missing = [d for d in blobs if not target.has_blob(repo_ref.repository, d["digest"])]
    size = sum(int(d["size"]) for d in missing)
    say(f"copying {size_text(size)} of base layers {copy_jobs.where}")
    if not dryrun:
        copy_jobs.wait(copy_jobs.start(pinned, repo_ref))
    return str(repo_ref.with_digest(digest))


def image_exists(image: str, aws: Aws | None = None) -> bool:
    """One HEAD for the image's manifest in its registry (credentials as for any pull)."""
    ref = reference.parse(image, "--image")
    client = Registry(
        ref.registry,
        lambda: auth.credentials(ref.registry, aws),
        [f"repository:{ref.repository}:pull"],
    )
    return client.head_manifest(ref.repository, ref.ref, manifest.ACCEPT) is not None
