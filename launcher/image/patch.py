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
import functools
import json
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from launcher.errors import RemoteError, UsageError
from launcher.image import costs, delta, layer, manifest, scan_ahead, upload
from launcher.image.compress import Compression
from launcher.image.index import Index, Layer, Uploaded, content_key
from launcher.image.reference import Reference
from launcher.image.registry import Registry
from launcher.image.transfer import PARALLEL, copied_tag, transfer_blobs
from launcher.image.workspace import FILE, Entry, Workspace
from launcher.progress import ProgressFn, Transfer, say, size_text

# The workspace image keeps the base's ENTRYPOINT and Cmd: entrypoints set up what the image's
# authors rely on (NGC's sources entrypoint.d, AWS's newer DLCs export CUDA's compatibility
# libraries), and the job's command is made correct behind any of them instead
# (launcher.node.prelude.REPARSE_GUARD). Batch has no entrypoint override, so clearing it here
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
            every = "" if self.layers == 1 else "all "
            return f"base: {every}{_layers(self.layers)} already in the repository"
        if self.how is BaseHandling.MOUNTED:
            return f"base: {_layers(self.layers)} mounted from {self.source.repository}"
        if self.how is BaseHandling.MOUNT:
            return f"base: {_layers(self.layers)} to mount from {self.source.repository}"
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
    compression: Compression | None = None  # of the workspace layer; None when reused


RegistryFor = Callable[[Reference], Registry]


@dataclass(frozen=True)
class Lookup:
    """What a build is made of, and the image already pushed for it, if any."""

    workspace: Workspace
    index: Index
    digests: dict[str, str]  # file contents known before building (indexed or hashed)
    base_digest: str | None  # resolved when the tag was looked for
    key: str | None  # the workspace's content key, when every file's content is known
    state: delta.Tree | None  # the layer's state, with ``key``
    tag: str | None
    existing: Patched | None


def lookup(
    base: Reference,
    repo: Reference,
    workspace: str | os.PathLike[str],
    platform: manifest.Platform,
    registry_for: RegistryFor,
    recipe: str,
    *,
    hash_first: bool = False,
) -> Lookup:
    """Content key of a build (base digest, platform, workspace, recipe) and one HEAD for it:
    an unchanged workspace is found with a stat walk, without reading a file. The files the
    local index cannot vouch for are hashed before the build when that costs less than the
    upload it may save (``launcher.image.costs``), else the build reads and hashes them once
    and looks at its end. With ``hash_first`` every file is hashed before (a builder that
    needs the tag first)."""
    upload_rate = costs.upload_rate_setting()  # a bad setting is refused before anything moves
    scanned = scan_ahead.scanned(workspace)  # walked in a child when the CLI began one
    index = Index.lazy(scanned.root)
    same = None if hash_first else index.unchanged_key(scanned)
    if same is not None:  # nothing moved since the key was recorded: no file list to read
        base_digest = resolve_base(registry_for(base), base)
        tag = manifest.content_tag(base_digest, platform, same, recipe)
        existing = find_image(registry_for(repo), repo, tag)
        if existing is not None:
            return Lookup(scanned, index, {}, base_digest, same, None, tag, existing)
    digests = index.known(scanned)
    unknown = [e for e in scanned.entries if e.kind == FILE and e.path not in digests]
    unknown_bytes = sum(e.size for e in unknown)
    looks = hash_first or _looks_first(
        scanned, unknown, unknown_bytes, registry_for(repo), repo, upload_rate
    )
    if not looks:
        return Lookup(scanned, index, digests, None, None, None, None, None)
    base_digest = resolve_base(registry_for(base), base)
    started = time.perf_counter()
    digests.update(layer.file_digests(scanned.root, unknown))
    costs.record_hashing(len(unknown), unknown_bytes, time.perf_counter() - started)
    state = delta.tree(scanned.entries, digests)
    key = content_key(state)
    tag = manifest.content_tag(base_digest, platform, key, recipe)
    existing = find_image(registry_for(repo), repo, tag)
    return Lookup(scanned, index, digests, base_digest, key, state, tag, existing)


def _looks_first(
    scanned: Workspace,
    unknown: list[Entry],
    size: int,
    client: Registry,
    repo: Reference,
    upload_rate: float | None,
) -> bool:
    """Whether to hash the ``unknown`` files (``size`` bytes) and look the image up before
    building: when hashing them costs less than the upload would (``launcher.image.costs``),
    and, where hashing takes long enough to ask, the repository holds any image at all."""
    return costs.hash_first(  # each of the three asked at most once, and only if need be
        len(unknown),
        size,
        functools.partial(costs.tar_bytes, scanned.entries),
        costs.Measured.load().rates(repo.registry, upload_rate),
        functools.partial(costs.sampled_ratio, scanned.root, unknown),
        functools.partial(holds_tags, client, repo),
    )


def holds_tags(client: Registry, repo: Reference) -> bool:
    """Whether ``repo`` holds any tag: one GET of its tag list (OCI distribution spec,
    "Listing Tags"). True unless the registry says it holds none (an empty list, or
    NAME_UNKNOWN: no such repository yet); a listing refused or not understood may hide it."""
    try:
        response = client.request(
            "GET", f"/v2/{repo.repository}/tags/list?n=1", ok=(200, 404), retry=False
        )
        answer = response.json()
    except (RemoteError, ValueError):
        return True
    if not isinstance(answer, dict):
        return True
    if response.status_code == 404:
        errors = answer.get("errors")
        codes = (
            [e.get("code") for e in errors if isinstance(e, dict)]
            if isinstance(errors, list)
            else []
        )
        return "NAME_UNKNOWN" not in codes
    tags = answer.get("tags")
    return tags is not None and tags != []


def find_image(client: Registry, repo: Reference, tag: str) -> Patched | None:
    digest = client.head_manifest(repo.repository, tag, manifest.ACCEPT)
    return Patched(str(repo.with_digest(digest)), tag, reused=True) if digest else None


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
        there = _each(lambda d: _mounted(target, repo, base, d["digest"]), layers)
    else:
        there = _each(lambda d: target.has_blob(repo.repository, d["digest"]), layers)
    missing = [d for d, found in zip(layers, there, strict=True) if not found]
    if not missing:
        how = BaseHandling.MOUNTED if source.host == target.host else BaseHandling.PRESENT
        return BasePlan(how, count, 0, 0, base)
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


def _each(ask: Callable[[dict[str, Any]], bool], layers: list[dict[str, Any]]) -> list[bool]:
    """``ask`` of every layer, a few at a time: a base has tens of layers, each a round trip."""
    with ThreadPoolExecutor(PARALLEL, thread_name_prefix="layers") as pool:
        return list(pool.map(ask, layers))


def _mounted(target: Registry, repo: Reference, base: Reference, digest: str) -> bool:
    location = target.mount_blob(repo.repository, digest, base.repository)
    if location is None:
        return True
    target.cancel_upload(location)  # refused (202): the opened upload is not wanted
    return False


@dataclass
class _PreparedBase:
    digest: str  # what the base reference resolved to (the tag's input)
    manifest: dict[str, Any]  # the platform's manifest, its media type, its config
    kind: str
    config: dict[str, Any]
    plan: BasePlan
    copying: str | None = None  # a copy job started for it


def _prepare_base(
    source: Registry,
    target: Registry,
    base: Reference,
    repo: Reference,
    digest: str | None,
    platform: manifest.Platform,
    **plan_options: Any,
) -> _PreparedBase:
    """Everything about the base a patch needs: two to four reads, then ``plan_base``."""
    resolved = digest or resolve_base(source, base)
    document, kind, config, pinned = base_image(source, base, resolved, platform)
    plan = plan_base(
        source, target, base.with_digest(pinned), repo, document["layers"], **plan_options
    )
    return _PreparedBase(resolved, document, kind, config, plan)


def recipe(compression: Compression) -> str:
    """What a registry-patched image is made of besides its base and workspace."""
    return json.dumps(ENV) + WORKDIR + f" compression={compression}"


def patch(
    base: Reference,
    repo: Reference,
    workspace: str | os.PathLike[str],
    platform: manifest.Platform,
    registry_for: RegistryFor,
    *,
    compression: Compression = Compression.GZIP,
    dryrun: bool = False,
    progress: ProgressFn | None = None,
    copy_jobs: CopyJobs | None = None,
    stream_base: bool = False,
) -> Patched:
    found = lookup(base, repo, workspace, platform, registry_for, recipe(compression))
    if found.existing:
        found.index.save(found.workspace, found.digests, None, key=found.key)
        return found.existing
    source, target = registry_for(base), registry_for(repo)
    # The base's metadata and plan come over the network while the layer is built; the
    # first byte of it goes up only once the base is known good (bad input uploads nothing).
    with ThreadPoolExecutor(1, thread_name_prefix="base") as background:
        pending = background.submit(
            _prepare_base,
            source,
            target,
            base,
            repo,
            found.base_digest,
            platform,
            copy_jobs=copy_jobs,
            stream_base=stream_base,
            dryrun=dryrun,
        )
        ready: list[_PreparedBase] = []

        def prepared() -> _PreparedBase:
            if not ready:
                ready.append(pending.result())
                say(progress)(ready[0].plan.line())
                if ready[0].plan.how is BaseHandling.COPY_JOB and not dryrun and copy_jobs:
                    ready[0].copying = copy_jobs.start(ready[0].plan.source, repo)
            return ready[0]

        def begin_upload() -> str:
            prepared()  # runs while the workspace goes up, should a copy job be needed
            return target.start_upload(repo.repository)

        to = Destination(target, repo, compression, dryrun, progress, begin_upload)
        uploaded, digests, state = workspace_layers(found, to)
        got = prepared()
    base_manifest, kind, base_config, plan = got.manifest, got.kind, got.config, got.plan
    copying = got.copying
    tag = manifest.content_tag(got.digest, platform, uploaded.key, recipe(compression))
    if found.tag is None and (existing := find_image(target, repo, tag)) is not None:
        # Built before looking (a first build): the image was there, pushed from elsewhere.
        found.index.save(
            found.workspace, digests, None if dryrun else uploaded, state, uploaded.key
        )
        return existing
    source_dir = os.fspath(workspace)
    config = manifest.patched_config(
        base_config,
        [x.diff_id for x in uploaded.layers],
        [f"COPY {source_dir} {WORKDIR} # efa-batch launcher", f"COPY {source_dir} (changes)"][
            : len(uploaded.layers)
        ],
        WORKDIR,
        ENV,
    )
    config_bytes = manifest.canonical(config)
    document, manifest_kind = manifest.patched_manifest(
        base_manifest,
        kind,
        config_bytes,
        [(x.digest, x.size) for x in uploaded.layers],
        compression,
    )
    new_manifest = manifest.canonical(document)
    layer_size = uploaded.layers[-1].size
    if dryrun:
        found.index.save(found.workspace, digests, None, key=uploaded.key)
        reference = str(repo.with_digest(manifest.digest_of(new_manifest)))
        return Patched(reference, tag, False, layer_size, plan, compression)
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
    upload.put_blob(target, repo.repository, config_bytes)
    pushed = target.put_manifest(repo.repository, tag, new_manifest, manifest_kind)  # last
    found.index.save(found.workspace, digests, uploaded, state, uploaded.key)
    return Patched(str(repo.with_digest(pushed)), tag, False, layer_size, plan, compression)


@dataclass(frozen=True)
class Destination:
    """Where and how workspace layers go."""

    target: Registry
    repo: Reference
    compression: Compression
    dryrun: bool
    progress: ProgressFn | None
    begin_upload: Callable[[], str]  # opens the upload session (once the base is known good)


def workspace_layers(
    found: Lookup, to: Destination
) -> tuple[Uploaded, dict[str, str], delta.Tree | None]:
    """The workspace's layers in the repository (with ``dryrun``, their digests only):

    - the layers this very content was pushed as, when the repository still has them (a
      HEAD each: the same workspace on another base);
    - else, when the content is known and a full layer of an earlier state is there, that
      layer and a delta over it (``launcher.image.delta``), while the delta stays small;
    - else one full layer, built and uploaded in one pass.

    Returns what was uploaded, every file's digest, and for a full layer the state it ships.
    """
    name, target, repository = to.repo.name, to.target, to.repo.repository
    if found.key is not None:
        again = found.index.uploaded(found.key, to.compression, name)
        if again is not None and all(target.has_blob(repository, x.digest) for x in again.layers):
            say(to.progress)("workspace layers already in the repository")
            return again, found.digests, None
        full = found.index.last_full(to.compression, name)
        base_tree = found.index.tree(full.key) if full is not None else None
        if full is not None and base_tree is not None and found.state is not None:
            change = delta.delta(base_tree, found.state, found.workspace.entries)
            if delta.worth_it(change, delta.size(base_tree)) and target.has_blob(
                repository, full.layers[0].digest
            ):
                built = _push_layer(found.workspace, to, change, "delta")
                layers = (*full.layers, built.layer)
                return Uploaded(found.key, to.compression, name, layers), found.digests, None
    # The layer's state, its key and the index's file list are worked out on a thread of
    # their own while the layer's last bytes go up (the main thread waits on the network):
    # 0.15-0.2 s of a 50,000-file build.
    with ThreadPoolExecutor(1, thread_name_prefix="index") as aside:
        states: list[Future[tuple[delta.Tree, str]]] = []

        def streamed(digests: dict[str, str]) -> None:
            states.append(aside.submit(_record, found, digests))

        built = _push_layer(found.workspace, to, streamed=streamed)
        state, key = states[-1].result()
    return Uploaded(key, to.compression, name, (built.layer,)), built.file_digests, state


def _record(found: Lookup, digests: dict[str, str]) -> tuple[delta.Tree, str]:
    """The state a full layer of the scan ships and its content key, with the file digests
    recorded in the local index: facts about the content, true whether or not the upload
    succeeds (the layer itself is recorded once it is in the repository, by ``patch``)."""
    state = delta.tree(found.workspace.entries, digests)
    key = content_key(state)
    found.index.save(found.workspace, digests, None, key=key)
    return state, key


@dataclass(frozen=True)
class _Built:
    layer: Layer
    file_digests: dict[str, str]


def _push_layer(
    scanned: Workspace,
    to: Destination,
    change: delta.Delta | None = None,
    what: str = "workspace",
    streamed: Callable[[dict[str, str]], None] | None = None,
) -> _Built:
    """One layer (the whole workspace, or ``change``) built and uploaded in one pass;
    ``streamed`` gets the file digests as soon as the last piece is made (before the upload
    ends: it must not wait)."""
    out = layer.LayerDigests()
    entries = None if change is None else change.entries
    whiteouts = () if change is None else change.whiteouts

    def pieces() -> Iterator[bytes]:  # again, should the registry lose the upload
        yield from layer.stream(scanned, to.compression, out, entries, whiteouts)
        if streamed is not None:
            streamed(out.file_digests)

    # The bar counts the workspace's bytes as they are packed, against their total known now
    # (the compressed size is known only at the end): so it has a percentage and time left.
    chosen = scanned.entries if entries is None else entries
    transfer = Transfer(
        f"uploading {what}" if not to.dryrun else f"{what} layer",
        to.progress,
        total=layer.tar_size_estimate(chosen, whiteouts),
    )
    if to.dryrun:
        for _ in pieces():
            transfer.reach(out.tar_size)
    else:  # the session opens once the first chunk is ready
        sent = costs.Sent()  # the link's pace, for the next build's choice (``lookup``)
        upload.upload(
            to.target,
            to.repo.repository,
            to.begin_upload,
            pieces,
            lambda: out.digest,
            lambda _: transfer.reach(out.tar_size),  # a retry packs again, from 0
            timed=sent.add,
        )
        costs.record_upload(to.target.host, sent)
    transfer.close()
    verb = "would upload" if to.dryrun else "uploaded"
    say(to.progress)(f"{verb} {size_text(out.size)} of {what} ({to.compression})")
    return _Built(Layer(out.diff_id, out.digest, out.size), out.file_digests)


def _layers(count: int) -> str:
    return "1 layer" if count == 1 else f"{count} layers"
