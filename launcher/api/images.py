"""Workspace images: a base with the workspace patched in, as ``Cluster.build`` and
``build_image`` make them, their options (``ImageOptions``, ``BuildOptions``), and a spec whose
every image is replaced by its workspace image (``with_workspace``).

The build itself is ``launcher.image.build``'s; here is what the API asks of it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from launcher.api.backends import aws_session
from launcher.errors import UsageError
from launcher.job.jobspec import JobSpec
from launcher.progress import ProgressFn, say

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's own from Python 3.11

    from launcher.image.patch import Patched


class ImageOptions(TypedDict, total=False):
    """How a workspace image is built: ``Cluster.build``'s options but the platform."""

    builder: str
    dryrun: bool
    progress: ProgressFn | None
    stream_base: bool
    compression: str | None
    registry: str | None  # a HOST[:PORT] instead of the repository's own (or $LAUNCHER_REGISTRY)
    dockerfile: str | None  # the workspace's Dockerfile a Docker build uses


class BuildOptions(ImageOptions, total=False):
    """``Cluster.build``'s options, as ``run``, ``dryrun`` and ``with_workspace`` pass them."""

    platform: str | None


def build_image(
    base: str,
    workspace: str | os.PathLike[str],
    repository: str,
    *,
    platform: str = "linux/amd64",
    profile: str | None = None,
    region: str | None = None,
    **options: Unpack[ImageOptions],
) -> Patched:
    """``base`` plus ``workspace`` pushed to any repository (no stack: ``launcher build
    --repo``); ECR credentials from the AWS profile when the repository is in ECR.
    ``options``: ``Cluster.build``'s ``builder``, ``dryrun``, ``progress``, ``stream_base``."""
    from launcher.image.auth import is_ecr
    from launcher.image.build import target_repository, workspace_image

    ecr = is_ecr(target_repository(repository).registry)
    aws = aws_session(profile, region) if ecr else None
    return workspace_image(base, workspace, repository, aws=aws, platform=platform, **options)


def with_workspace(
    spec: JobSpec,
    workspace: str | os.PathLike[str] | None,
    build: Callable[[str, str | os.PathLike[str]], Patched],
    progress: ProgressFn | None = None,
) -> tuple[JobSpec, list[Patched]]:
    """The spec with every image it names replaced by ``build(image, workspace)``'s (that image
    plus the workspace, built once each), and what each build did; a line for each image."""
    if workspace is None:
        return spec, []
    if not Path(workspace).is_dir():
        raise UsageError(f"--workspace {os.fspath(workspace)!r}: no such directory")
    images = {spec.image} | {g.image for g in spec.groups if g.image}
    built: dict[str, str] = {}
    results = []
    for image in sorted(images):
        result = build(image, workspace)
        reused = " (unchanged, reused)" if result.reused else ""
        say(progress)(f"workspace image {result.reference}{reused}")
        built[image] = result.reference
        results.append(result)
    groups = tuple(
        dataclasses.replace(g, image=built[g.image]) if g.image else g for g in spec.groups
    )
    return dataclasses.replace(spec, image=built[spec.image], groups=groups), results
