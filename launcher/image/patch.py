"""Patch a base image in the registry: append the workspace as one layer, never pull the base.

Composes the pure pieces (``layer``, ``manifest``) with the transport (``registry``), like
``crane append``: read the base's manifest and config only, upload the workspace layer, get
the base layers into the target repository by cross-repository mount (or a streamed copy when
the registries differ), then the config, and the manifest last, so a tag never names an
image whose blobs are missing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass

from launcher.errors import UsageError
from launcher.image import layer, manifest
from launcher.image.reference import Reference
from launcher.image.registry import Registry
from launcher.progress import ProgressFn, Transfer

WORKDIR = "/workspace"
ENV = {"LAUNCHER_WORKSPACE": WORKDIR}


@dataclass(frozen=True)
class Patched:
    reference: str  # REPO@sha256:...
    tag: str
    reused: bool  # the same workspace on the same base was already there
    layer_size: int = 0


RegistryFor = Callable[[Reference], Registry]


@dataclass(frozen=True)
class Lookup:
    """What a build is made of, and the image already pushed for it, if any."""

    entries: list
    diff_id: str
    base_digest: str
    tag: str
    existing: Patched | None


def lookup(
    base: Reference,
    repo: Reference,
    workspace: str | os.PathLike,
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
) -> tuple[dict, str, dict]:
    """(manifest, media type, config) of the base for ``platform``: two or three GETs."""
    found = client.get_manifest(base.repository, digest, manifest.ACCEPT)
    if found is None:
        raise UsageError(f"--image {base}: base image not found in {base.registry}")
    raw, content_type, _ = found
    kind = manifest.media_type(raw, content_type)
    if kind in manifest.INDEXES:
        desc = manifest.select_platform(json.loads(raw), platform)
        found = client.get_manifest(base.repository, desc["digest"], manifest.ACCEPT)
        if found is None:
            raise UsageError(f"--image {base}: {platform} manifest {desc['digest']} is missing")
        raw, content_type, _ = found
        kind = manifest.media_type(raw, content_type)
        if kind not in manifest.MANIFESTS:
            raise UsageError(f"--image {base}: nested index for {platform} is not supported")
    document = json.loads(raw)
    config = json.loads(client.get_blob(base.repository, document["config"]["digest"]))
    manifest.check_platform(config, platform)
    return document, kind, config


def _copy_base_layers(
    source: Registry, target: Registry, base: Reference, repo: Reference, layers: list[dict]
) -> None:
    same_registry = source.host == target.host
    for desc in layers:
        digest = desc["digest"]
        if same_registry:
            if base.repository == repo.repository:
                continue  # already in this repository
            location = target.mount_blob(repo.repository, digest, base.repository)
            if location is None:
                continue
        else:
            if target.has_blob(repo.repository, digest):
                continue
            location = target.start_upload(repo.repository)
        # The mount was refused (202) or the registries differ: stream the blob across.
        target.upload(location, source.stream_blob(base.repository, digest), lambda d=digest: d)


def patch(
    base: Reference,
    repo: Reference,
    workspace: str | os.PathLike,
    platform: manifest.Platform,
    registry_for: RegistryFor,
    *,
    dryrun: bool = False,
    progress: ProgressFn | None = None,
) -> Patched:
    found = lookup(base, repo, workspace, platform, registry_for, json.dumps(ENV) + WORKDIR)
    if found.existing:
        return found.existing
    entries, diff_id, tag = found.entries, found.diff_id, found.tag
    source, target = registry_for(base), registry_for(repo)
    base_manifest, kind, base_config = base_image(source, base, found.base_digest, platform)
    digests = layer.LayerDigests()
    transfer = Transfer("workspace layer", progress)
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
        return Patched(
            str(repo.with_digest(manifest.digest_of(new_manifest))), tag, False, digests.size
        )
    _copy_base_layers(source, target, base, repo, base_manifest["layers"])
    target.put_blob(repo.repository, config_bytes)
    digest = target.put_manifest(repo.repository, tag, new_manifest, kind)  # last
    return Patched(str(repo.with_digest(digest)), tag, False, digests.size)
