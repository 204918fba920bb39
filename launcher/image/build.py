"""Build and push the workspace image with whichever builder applies; return REPO@digest.

Every build says in one line which files it left out because they look like secrets
(``launcher.image.workspace.SECRET_PATTERNS``), and a dry run lists what the layer would
ship, each path with its size, before that line.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from launcher.errors import UsageError
from launcher.image import auth, manifest, reference, scan_ahead
from launcher.image.compress import Compression
from launcher.image.patch import CopyJobs, Patched, RegistryFor, base_image, patch, resolve_base
from launcher.image.pullers import ANYONE, Puller, choose
from launcher.image.registry import Registry
from launcher.image.transfer import copied_tag
from launcher.image.workspace import DIRECTORY, SYMLINK, Workspace
from launcher.progress import ProgressFn, size_text
from launcher.progress import say as progress_say

DOCKERFILE_ENV = "LAUNCHER_DOCKERFILE"
DEFAULT_DOCKERFILE = "Dockerfile.launcher"
# Push workspace images to this registry host instead of the stack's (an air-gapped mirror,
# or a local registry next to an emulated AWS whose ECR host does not exist).
REGISTRY_ENV = "LAUNCHER_REGISTRY"
NAMED = 10  # paths the left-out line names at most (a dry run names them all)


class Builder(str, enum.Enum):
    AUTO = "auto"  # docker when the workspace has a Dockerfile.launcher, else registry
    REGISTRY = "registry"  # the workspace patched onto the base in the registry
    DOCKER = "docker"  # a Docker SDK build against the user's daemon

    def __str__(self) -> str:
        return self.value


def target_repository(repo: str, registry: str | None = None) -> reference.Reference:
    """``repo`` on ``registry`` (a HOST[:PORT]) when given, else on $LAUNCHER_REGISTRY's host
    when that is set: the repository path stays the same."""
    parsed = reference.parse(repo, "--repo")
    override = registry or os.environ.get(REGISTRY_ENV)
    if override:
        parsed = reference.Reference(override.rstrip("/"), parsed.repository)
    return reference.Reference(parsed.registry, parsed.repository)


def choose_builder(
    builder: Builder | str, workspace: str | os.PathLike[str], dockerfile: str | None = None
) -> tuple[Builder, str | None]:
    """The builder and the workspace's Dockerfile it builds with: ``dockerfile`` when the
    caller names one, else $LAUNCHER_DOCKERFILE, else Dockerfile.launcher."""
    try:
        builder = Builder(builder)
    except ValueError:
        allowed = ", ".join(b.value for b in Builder)
        raise UsageError(f"--builder {builder!r}: allowed {allowed}") from None
    dockerfile = dockerfile or os.environ.get(DOCKERFILE_ENV, DEFAULT_DOCKERFILE)
    has_dockerfile = (Path(workspace) / dockerfile).is_file()
    if builder is Builder.DOCKER or (builder is Builder.AUTO and has_dockerfile):
        return Builder.DOCKER, dockerfile if has_dockerfile else None
    return Builder.REGISTRY, None


def workspace_image(
    base: str,
    workspace: str | os.PathLike[str],
    repo: str,
    *,
    aws: auth.EcrLogin | None = None,
    builder: Builder | str = Builder.AUTO,
    platform: str = "linux/amd64",
    dryrun: bool = False,
    progress: ProgressFn | None = None,
    copy_jobs: CopyJobs | None = None,
    stream_base: bool = False,
    compression: Compression | str | None = None,
    puller: Puller | None = None,
    registry: str | None = None,
    dockerfile: str | None = None,
) -> Patched:
    """``base`` plus ``workspace`` in ``repo`` (on ``registry``, a HOST[:PORT], when given:
    ``target_repository``). ``compression`` of the workspace layer: what ``puller`` (whoever
    pulls the image) reads, its default when None. ``dockerfile``: the workspace's file the
    Docker builder uses (``choose_builder``)."""
    chosen = choose(compression, puller or ANYONE)  # bad input before anything moves
    if not Path(workspace).is_dir():
        raise UsageError(f"--workspace {os.fspath(workspace)!r}: no such directory")
    base_ref = reference.parse(base, "--image")
    repo_ref = target_repository(repo, registry)
    target_platform = manifest.parse_platform(platform)
    kind, dockerfile = choose_builder(builder, workspace, dockerfile)
    registry_for = _registries(base_ref, repo_ref, aws)
    with scan_ahead.held(workspace) as walked:  # the builder's walk, looked at first
        say = progress_say(progress)
        for line in what_ships(walked, dryrun=dryrun):
            say(line)
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


def what_ships(walked: Workspace, *, dryrun: bool) -> Iterator[str]:
    """What a build says of the workspace before it builds: with ``dryrun``, every path the
    layer (or the Docker builder's context, made from the same walk) ships
    (``shipped_lines``); the line naming what was left out as a secret, and the one naming
    what a ``!`` line brought back, when there is any."""
    if dryrun:
        yield from shipped_lines(walked)
    lines = (
        left_out_line(walked.left_out, every=dryrun),
        brought_back_line(walked.brought_back, every=dryrun),
    )
    yield from (line for line in lines if line)


def shipped_lines(walked: Workspace) -> Iterator[str]:
    """What the workspace layer ships, for a dry run: a total, then each path with its size
    in bytes (a directory with a /, a link with its target), in the layer's order."""
    files = sum(1 for e in walked.entries if e.kind not in (DIRECTORY, SYMLINK))
    links = sum(1 for e in walked.entries if e.kind == SYMLINK)
    directories = len(walked.entries) - files - links
    size = walked.bytes
    counted = _count(files, "file") + (f", {_count(links, 'link')}" if links else "")
    yield (
        f"would ship {counted} and {_count(directories, 'directory')}: "
        f"{size:,} bytes ({size_text(size)})"
    )
    for e in walked.entries:
        if e.kind == DIRECTORY:
            yield f"{'-':>14}  {e.path}/"
        elif e.kind == SYMLINK:
            yield f"{'-':>14}  {e.path} -> {e.link}"
        else:
            yield f"{e.size:>14,}  {e.path}"


def left_out_line(left_out: Sequence[str], *, every: bool = False) -> str | None:
    """The one line that names what was left out as a secret (None when nothing was): up to
    ``NAMED`` paths, or ``every`` one."""
    if not left_out:
        return None
    count, names = len(left_out), _names(left_out, every)
    more = "" if every or count <= NAMED else "a dry run names them all; "
    looks = "looks like a secret" if count == 1 else "look like secrets"
    only = left_out[0]
    if count == 1 and not any(c in only for c in "*?[\\") and not only.endswith("/"):
        how = f"add !{only} to .dockerignore to ship it"
    else:
        how = "add !PATTERN to .dockerignore to ship one"
    return f"launcher: left out {_count(count, 'file')} that {looks}: {names} ({more}{how})"


def brought_back_line(brought_back: Sequence[str], *, every: bool = False) -> str | None:
    """The line that names what looks like a secret and ships because a ``!`` line of
    .dockerignore brings it back (None when nothing does): shipped as asked, not unsaid."""
    if not brought_back:
        return None
    count, names = len(brought_back), _names(brought_back, every)
    looks = "looks like a secret" if count == 1 else "look like secrets"
    return (
        f"launcher: shipping {_count(count, 'path')} that {looks}, as .dockerignore "
        f"brings {'it' if count == 1 else 'them'} back: {names}"
    )


def _names(paths: Sequence[str], every: bool) -> str:
    """``paths`` joined, or the first ``NAMED`` of them and how many more."""
    if every or len(paths) <= NAMED:
        return ", ".join(paths)
    return f"{', '.join(paths[:NAMED])} and {len(paths) - NAMED} more"


def _count(n: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{n:,} {noun if n == 1 else plural}"


def _registries(
    base: reference.Reference, repo: reference.Reference, aws: auth.EcrLogin | None
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
    aws: auth.EcrLogin | None = None,
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


def image_environment(
    image: str, platform: str, aws: auth.EcrLogin | None = None
) -> dict[str, str]:
    """The ``Env`` of the image's config for ``platform`` in its registry (two or three GETs,
    credentials as for any pull); UsageError for an image that is not there."""
    ref = reference.parse(image, "--image")
    client = Registry(
        ref.registry,
        lambda: auth.credentials(ref.registry, aws),
        [f"repository:{ref.repository}:pull"],
    )
    digest = resolve_base(client, ref)
    config = base_image(client, ref, digest, manifest.parse_platform(platform))[2]
    return variables(config.get("config", {}).get("Env") or [])


def variables(env: Sequence[str]) -> dict[str, str]:
    """An image config's ``Env`` (``NAME=VALUE`` items) as a mapping."""
    pairs = (str(item).partition("=") for item in env)
    return {k: v for k, _, v in pairs}


def image_exists(image: str, aws: auth.EcrLogin | None = None) -> bool:
    """One HEAD for the image's manifest in its registry (credentials as for any pull)."""
    ref = reference.parse(image, "--image")
    client = Registry(
        ref.registry,
        lambda: auth.credentials(ref.registry, aws),
        [f"repository:{ref.repository}:pull"],
    )
    return client.head_manifest(ref.repository, ref.ref, manifest.ACCEPT) is not None
