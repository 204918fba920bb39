"""An image's blobs and manifest from one repository into another, registry to registry.

The blobs go first (a cross-repository mount when both repositories are in one registry, else
a stream), then the manifest, byte for byte, under a tag named after its digest
(``base-sha256-<hex>``). Content-addressed, so a base copied once is found by one HEAD and
never copied again, by anyone; a blob the target already has is never sent again, so a copy
that was interrupted resumes where it stopped. A few blobs move at once (``PARALLEL``): one
stream rarely fills a path between regions or to a registry's storage, a base's layers are
independent, and a mount is a round trip that moves nothing. A copy job runs ``copy_image``
(``launcher.copyjob.program``); ``transfer_blobs`` is also the launcher's own path when a user
asks to stream a base through their machine (``--stream-base``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from launcher.errors import RemoteError, UsageError
from launcher.image import manifest
from launcher.image.reference import Reference
from launcher.image.registry import Registry
from launcher.image.upload import upload
from launcher.stack.image_tags import BASE_PREFIX

OnBlob = Callable[[dict[str, Any], str], None]  # (descriptor, "present" | "mounted" | "copied")
PARALLEL = 3  # blobs mounted or streamed at once


def copied_tag(digest: str) -> str:
    """The tag a copied base gets in the target repository: its own digest, as a tag."""
    return BASE_PREFIX + digest.replace(":", "-")


def transfer_blobs(
    source: Registry,
    source_repo: str,
    target: Registry,
    target_repo: str,
    descriptors: list[dict[str, Any]],
    on_blob: OnBlob = lambda d, how: None,
    on_bytes: Callable[[int], None] = lambda n: None,
) -> int:
    """Put every blob into ``target_repo`` unless it is there; return the bytes sent.

    Within one registry a cross-repository mount moves nothing; ECR answers 202 instead when
    it cannot mount (blob mounting off, different encryption, a pull-through cache source),
    and the opened upload takes the stream instead.
    """
    lock = threading.Lock()  # callbacks hear from several streams at once, one at a time

    def counted(n: int) -> None:
        with lock:
            on_bytes(n)

    def said(desc: dict[str, Any], how: str) -> None:
        with lock:
            on_blob(desc, how)

    def one(desc: dict[str, Any]) -> int:
        digest: str = desc["digest"]
        if source.host == target.host:
            if source_repo == target_repo:
                said(desc, "present")
                return 0
            location = target.mount_blob(target_repo, digest, source_repo)
            if location is None:
                said(desc, "mounted")
                return 0
        elif target.has_blob(target_repo, digest):
            said(desc, "present")
            return 0
        else:
            location = target.start_upload(target_repo)
        stream = lambda: source.stream_blob(source_repo, digest)  # noqa: E731 - again if need be
        upload(target, target_repo, location, stream, lambda: digest, counted)
        said(desc, "copied")
        return int(desc.get("size", 0))

    with ThreadPoolExecutor(PARALLEL, thread_name_prefix="copy") as pool:
        return sum(pool.map(one, descriptors))


@dataclass(frozen=True)
class Copied:
    reference: str  # TARGET_REPOSITORY@DIGEST (the source's digest: the manifest is unchanged)
    tag: str
    bytes_sent: int
    already: bool  # the target had the copy; nothing was sent


def copy_image(
    source: Reference,
    target: Reference,
    source_registry: Registry,
    target_registry: Registry,
    on_blob: OnBlob = lambda d, how: None,
) -> Copied:
    """Copy one single-platform image (``source`` pinned by digest) into ``target``'s repository."""
    if not source.digest:
        raise UsageError(f"copy source {source}: pin it by digest (REPO@sha256:...)")
    tag = copied_tag(source.digest)
    pinned = target.with_digest(source.digest)
    if target_registry.head_manifest(target.repository, tag, manifest.ACCEPT) == source.digest:
        return Copied(str(pinned), tag, 0, True)
    found = source_registry.get_manifest(source.repository, source.digest, manifest.ACCEPT)
    if found is None:
        raise UsageError(f"copy source {source}: no such manifest in {source.registry}")
    raw, kind, _ = found
    if kind not in manifest.MANIFESTS:
        raise UsageError(f"copy source {source}: a {kind}; copy one platform's manifest")
    document = json.loads(raw)
    sent = transfer_blobs(
        source_registry,
        source.repository,
        target_registry,
        target.repository,
        [document["config"], *document["layers"]],
        on_blob,
    )
    try:
        digest = target_registry.put_manifest(target.repository, tag, raw, kind)
    except RemoteError:
        # Another copy of the same base finished first: with immutable tags (ECR) the second
        # PUT of the tag is refused, and the tag already names these very bytes.
        if target_registry.head_manifest(target.repository, tag, manifest.ACCEPT) != source.digest:
            raise
        digest = source.digest
    if digest != source.digest:
        raise RemoteError(f"registry {target.registry}: stored {digest}, copied {source.digest}")
    return Copied(str(pinned), tag, sent, False)
