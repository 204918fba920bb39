"""Patch a base image in the registry: append the workspace as one layer, never pull the base.

Composes the pure pieces (``layer``, ``manifest``) with the transport (``registry``), like
``crane append``: read the base's manifest and config only, upload the workspace layer, get
the base layers into the target repository, then the config, and the manifest last, so a tag
never names an image whose blobs are missing.

The base layers never pass through this machine unless the caller says so. They are already
in the repository (the base lives there, or a copy job copied it: ``base-sha256-...``), or
they are mounted from another repository of the same registry, or a copy job copies them
next to the registries (a copy job in AWS), or, only with ``stream_base``, they are streamed
through here. ``plan_base`` decides before anything moves and says so in one line.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from launcher.errors import UsageError
from launcher.image import layer, manifest
from launcher.image.reference import Reference
from launcher.image.registry import Registry
from launcher.image.transfer import copied_tag, transfer_blobs
from launcher.progress import ProgressFn, Transfer, say, size_text

# The workspace image keeps the base's ENTRYPOINT and Cmd: entrypoints set up what the image's
# authors rely on (NGC's sources entrypoint.d, AWS's newer DLCs export CUDA's compatibility
# libraries), and the job's command is made correct behind any of them instead
# (launcher.prelude.REPARSE_GUARD). Batch has no entrypoint override, so clearing it here
# would also make --no-workspace runs behave differently from workspace runs.
WORKDIR = "/workspace"
ENV = {"LAUNCHER_WORKSPACE": WORKDIR}


class CopyJobs(Protocol):
    """Copy jobs that copy a base into the target repository away from this machine
    (``launcher.copyjob.run`` runs them on the cluster's target)."""

    where: str  # "in AWS (copy job on QUEUE)": where the bytes move, for the plan's line

    def check(self, base: Reference) -> None:
        """UsageError if the copy could not read ``base`` (pinned); no side effects."""

    def start(self, base: Reference, target: Reference) -> str:
        """Start copying ``base`` into ``target``'s repository; a handle for ``wait``."""

    def wait(self, handle: str) -> None:
        """Until the copy is done; RemoteError if it failed."""


class BaseHandling(str, enum.Enum):
    """How a base's layers get into the target repository."""

    PRESENT = "present"  # there already
    MOUNTED = "mounted"  # mounted from another repository of the registry
    MOUNT = "mount"  # would be mounted (a dry run tries nothing)
    COPY_JOB = "copy job"  # a copy job copies them next to the registries
    STREAM = "stream"  # through this machine (--stream-base)


@dataclass(frozen=True)
class BasePlan:
    """How the base's layers get into the target repository, decided before anything moves."""

    how: BaseHandling
    layers: int  # base layers
    missing: int  # layers not in the target registry's repository yet
    bytes: int  # their compressed size: what a copy or a stream moves
    source: Reference  # the base, pinned to its platform's manifest
    where: str = ""

    def line(self) -> str:
        if self.how is BaseHandling.PRESENT:
            return f"base: all {self.layers} layers already in the repository"
        if self.how is BaseHandling.MOUNTED:
            return f"base: {self.layers} layers mounted from {self.source.repository}"
        if self.how is BaseHandling.MOUNT:
            return f"base: {self.layers} layers to mount from {self.source.repository}"
        if self.how is BaseHandling.COPY_JOB:
            return f"copying {size_text(self.bytes)} of base layers {self.where}"
        size = size_text(self.bytes)
        return f"streaming {size} of base layers through this machine (--stream-base)"


@dataclass(frozen=True)
class Patched:
    reference: str  # REPO@sha256:...
    tag: str
    reused: bool  # the same workspace on the same base was already there
    layer_size: int = 0
    plan: BasePlan | None = None  # how the base got (or would get) there; None when reused


RegistryFor = Callable[[Reference], Registry]


@dataclass(frozen=True)
class Lookup:
    """What a build is made of, and the image already pushed for it, if any."""

    entries: list[Path]
    diff_id: str
    base_digest: str
    tag: str
    existing: Patched | None


def lookup(
    base: Reference,
    repo: Reference,
    workspace: str | os.PathLike[str],
    platform: manifest.Platform,
    registry_for: RegistryFor,
    recipe: str,
) -> Lookup:
    """Content key of a build (base digest, platform, workspace, recipe) and one HEAD for it:
    an unchanged workspace is found without building or uploading anything."""
    entries = layer.workspace_entries(workspace)
    diff_id = layer.diff_id(workspace, entries)
    base_digest = resolve_base(registry_for(base), base)
    tag = manifest.content_tag(base_digest, platform, diff_id, recipe)
    digest = registry_for(repo).head_manifest(repo.repository, tag, manifest.ACCEPT)
    existing = Patched(str(repo.with_digest(digest)), tag, reused=True) if digest else None
    return Lookup(entries, diff_id, base_digest, tag, existing)


def resolve_base(client: Registry, base: Reference) -> str:
    if base.digest:
        return base.digest
    digest = client.head_manifest(base.repository, base.ref, manifest.ACCEPT)
    if digest is None:
        raise UsageError(f"--image {base}: base image not found in {base.registry}")
    return digest


def base_image(
    client: Registry, base: Reference, digest: str, platform: manifest.Platform
) -> tuple[dict[str, Any], str, dict[str, Any], str]:
    """(manifest, media type, config, manifest digest) of the base for ``platform``: two or
    three GETs."""
    found = client.get_manifest(base.repository, digest, manifest.ACCEPT)
    if found is None:
        raise UsageError(f"--image {base}: base image not found in {base.registry}")
    raw, kind, _ = found
    if kind in manifest.INDEXES:
        desc = manifest.select_platform(json.loads(raw), platform)
        found = client.get_manifest(base.repository, desc["digest"], manifest.ACCEPT)
        if found is None:
            raise UsageError(f"--image {base}: {platform} manifest {desc['digest']} is missing")
        raw, kind, _ = found
        if kind not in manifest.MANIFESTS:
            raise UsageError(f"--image {base}: nested index for {platform} is not supported")
        digest = desc["digest"]
    document = json.loads(raw)
    config = json.loads(client.get_blob(base.repository, document["config"]["digest"]))
    manifest.check_platform(config, platform)
    return document, kind, config, digest


def plan_base(
    source: Registry,
    target: Registry,
    base: Reference,
    repo: Reference,
    layers: list[dict[str, Any]],
    *,
    copy_jobs: CopyJobs | None,
    stream_base: bool,
    dryrun: bool,
) -> BasePlan:
    """Where the base's layers are and how the rest would move; UsageError if only through
    this machine and the caller did not allow it. Mounting moves nothing, so it is tried here
    (not in a dry run); every other request is a read."""
    count = len(layers)
    if source.host == target.host and base.repository == repo.repository:
        return BasePlan(BaseHandling.PRESENT, count, 0, 0, base)
    tag = copied_tag(base.digest or "")
    if target.head_manifest(repo.repository, tag, manifest.ACCEPT) == base.digest:
        return BasePlan(BaseHandling.PRESENT, count, 0, 0, base)  # a copy job copied it before
    if source.host == target.host and dryrun:
        return BasePlan(BaseHandling.MOUNT, count, 0, 0, base)
    if source.host == target.host:
        missing = [d for d in layers if not _mounted(target, repo, base, d["digest"])]
        if not missing:
            return BasePlan(BaseHandling.MOUNTED, count, 0, 0, base)
    else:
        missing = [d for d in layers if not target.has_blob(repo.repository, d["digest"])]
        if not missing:
            return BasePlan(BaseHandling.PRESENT, count, 0, 0, base)
    size = sum(int(d.get("size", 0)) for d in missing)
    if stream_base:
        return BasePlan(BaseHandling.STREAM, count, len(missing), size, base)
    if copy_jobs is None:
        raise UsageError(
            f"--image {base}: {size_text(size)} of its layers are not in {repo.name} and nothing "
            "can copy them next to the registries here; run `launcher mirror` on a cluster "
            "with a copy queue, or pass --stream-base to send them through this machine"
        )
    copy_jobs.check(base)
    return BasePlan(BaseHandling.COPY_JOB, count, len(missing), size, base, copy_jobs.where)


def _mounted(target: Registry, repo: Reference, base: Reference, digest: str) -> bool:
    location = target.mount_blob(repo.repository, digest, base.repository)
    if location is None:
        return True
    target.cancel_upload(location)  # refused (202): the opened upload is not wanted
    return False


def patch(
    base: Reference,
    repo: Reference,
    workspace: str | os.PathLike[str],
    platform: manifest.Platform,
    registry_for: RegistryFor,
    *,
    dryrun: bool = False,
    progress: ProgressFn | None = None,
    copy_jobs: CopyJobs | None = None,
    stream_base: bool = False,
) -> Patched:
    found = lookup(base, repo, workspace, platform, registry_for, json.dumps(ENV) + WORKDIR)
    if found.existing:
        return found.existing
    entries, diff_id, tag = found.entries, found.diff_id, found.tag
    source, target = registry_for(base), registry_for(repo)
    base_manifest, kind, base_config, digest = base_image(source, base, found.base_digest, platform)
    plan = plan_base(
        source,
        target,
        base.with_digest(digest),
        repo,
        base_manifest["layers"],
        copy_jobs=copy_jobs,
        stream_base=stream_base,
        dryrun=dryrun,
    )
    say(progress)(plan.line())
    copying = None
    if plan.how is BaseHandling.COPY_JOB and not dryrun and copy_jobs is not None:
        copying = copy_jobs.start(plan.source, repo)  # runs while the workspace goes up
    digests = layer.LayerDigests()
    transfer = Transfer("uploading workspace" if not dryrun else "workspace layer", progress)
    if dryrun:
        for chunk in layer.gzip_layer(workspace, entries, digests):
            transfer.update(len(chunk))
    else:
        target.upload(
            target.start_upload(repo.repository),
            layer.gzip_layer(workspace, entries, digests),
            lambda: digests.digest,
            transfer.update,
        )
    transfer.close()
    verb = "would upload" if dryrun else "uploaded"
    say(progress)(f"{verb} {size_text(digests.size)} of workspace")
    if digests.diff_id != diff_id:
        raise UsageError(f"--workspace {workspace}: files changed while the layer was built")
    config = manifest.patched_config(
        base_config,
        diff_id,
        f"COPY {os.fspath(workspace)} {WORKDIR} # efa-batch launcher",
        WORKDIR,
        ENV,
    )
    config_bytes = manifest.canonical(config)
    new_manifest = manifest.canonical(
        manifest.patched_manifest(base_manifest, kind, config_bytes, digests.digest, digests.size)
    )
    if dryrun:
        reference = str(repo.with_digest(manifest.digest_of(new_manifest)))
        return Patched(reference, tag, False, digests.size, plan)
    if copying is not None and copy_jobs is not None:
        copy_jobs.wait(copying)
    elif plan.how is BaseHandling.STREAM:
        streamed = Transfer("streaming base layers", progress, plan.bytes)
        transfer_blobs(
            source,
            base.repository,
            target,
            repo.repository,
            base_manifest["layers"],
            on_bytes=streamed.update,
        )
        streamed.close()
    target.put_blob(repo.repository, config_bytes)
    pushed = target.put_manifest(repo.repository, tag, new_manifest, kind)  # last
    return Patched(str(repo.with_digest(pushed)), tag, False, digests.size, plan)
