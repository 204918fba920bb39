"""Build and push the workspace image with whichever builder applies; return REPO@digest."""

from __future__ import annotations

import os
from pathlib import Path

from launcher.errors import UsageError
from launcher.image import auth, manifest, reference
from launcher.image.copy import mirror_tag
from launcher.image.patch import BaseCopy, Patched, base_image, patch, resolve_base, size_text
from launcher.image.registry import Registry
from launcher.progress import ProgressFn
from launcher.progress import say as progress_say

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
    base_copy: BaseCopy | None = None,
    stream_base: bool = False,
) -> Patched:
    if not Path(workspace).is_dir():
        raise UsageError(f"--workspace {os.fspath(workspace)!r}: no such directory")
    base_ref = reference.parse(base, "--image")
    repo_ref = target_repository(repo)
    target_platform = manifest.parse_platform(platform)
    kind, dockerfile = choose_builder(builder, workspace)
    registry_for = _registries(base_ref, repo_ref, aws)
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
        base_copy=base_copy,
        stream_base=stream_base,
    )


def _registries(base: reference.Reference, repo: reference.Reference, aws):
    """One client per registry, asking for pull on the base and push on the repository."""
    scopes = {base.registry: [f"repository:{base.repository}:pull"]}
    scopes.setdefault(repo.registry, []).append(f"repository:{repo.repository}:pull,push")
    clients: dict[str, Registry] = {}

    def registry_for(ref: reference.Reference) -> Registry:
        if ref.registry not in clients:
            clients[ref.registry] = Registry(
                ref.registry,
                lambda host=ref.registry: auth.credentials(host, aws),
                scopes[ref.registry],
            )
        return clients[ref.registry]

    return registry_for


def mirror(
    base: str,
    repo: str,
    *,
    aws=None,
    platform: str = "linux/amd64",
    base_copy: BaseCopy | None,
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
    if target.head_manifest(repo_ref.repository, mirror_tag(digest), manifest.ACCEPT) == digest:
        say(f"base: already copied to {repo_ref.name}")
        return str(repo_ref.with_digest(digest))
    if base_copy is None:
        raise UsageError(f"--image {base}: nothing can copy it next to the registries here")
    base_copy.check(pinned)
    blobs = [document["config"], *document["layers"]]
    missing = [d for d in blobs if not target.has_blob(repo_ref.repository, d["digest"])]
    size = sum(int(d["size"]) for d in missing)
    say(f"copying {size_text(size)} of base layers {base_copy.where}")
    if not dryrun:
        base_copy.wait(base_copy.start(pinned, repo_ref))
    return str(repo_ref.with_digest(digest))


def image_exists(image: str, aws=None) -> bool:
    """One HEAD for the image's manifest in its registry (credentials as for any pull)."""
    ref = reference.parse(image, "--image")
    client = Registry(
        ref.registry,
        lambda: auth.credentials(ref.registry, aws),
        [f"repository:{ref.repository}:pull"],
    )
    return client.head_manifest(ref.repository, ref.ref, manifest.ACCEPT) is not None
