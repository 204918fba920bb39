"""Pure manifest and config transformations (no network), after go-containerregistry's mutate.

A new image is the base's manifest plus the workspace's layer descriptors, and the base's
config plus their diff_ids and history entries. Media types follow the base: Docker v2 schema
2 stays Docker, OCI stays OCI; the two are never mixed in one manifest. A zstd layer is the
exception that decides: Docker's schema 2 has no zstd layer type (its spec lists tar.gzip and
foreign layers only; ``application/vnd.docker.image.rootfs.diff.tar.zstd`` exists nowhere), so
a Docker base becomes an OCI manifest, every descriptor by its OCI counterpart. The OCI image
spec's compatibility matrix (media-types.md) names them: its manifest is the Docker
manifest's "similar/related schema", its config the Docker config's, and its tar+gzip layer
"interchangeable and fully compatible" with Docker's; the blobs stay byte for byte.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from launcher.errors import UsageError
from launcher.stack.image_tags import WORKSPACE_PREFIX

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
DOCKER_FOREIGN = "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_LAYER_ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd"
OCI_NONDISTRIBUTABLE = "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
MANIFESTS = (DOCKER_MANIFEST, OCI_MANIFEST)
INDEXES = (DOCKER_LIST, OCI_INDEX)
ACCEPT = ", ".join((*MANIFESTS, *INDEXES))
# (manifest type, compression) -> the workspace layer's media type
LAYER_FOR = {
    (DOCKER_MANIFEST, "gzip"): DOCKER_LAYER,
    (OCI_MANIFEST, "gzip"): OCI_LAYER,
    (OCI_MANIFEST, "zstd"): OCI_LAYER_ZSTD,
}
# A Docker descriptor's OCI counterpart (OCI image spec, media-types.md, compatibility matrix).
OCI_FOR = {
    DOCKER_MANIFEST: OCI_MANIFEST,
    DOCKER_CONFIG: OCI_CONFIG,
    DOCKER_LAYER: OCI_LAYER,
    DOCKER_FOREIGN: OCI_NONDISTRIBUTABLE,
}
HISTORY_TIME = "1970-01-01T00:00:01Z"  # fixed, like the layer's mtimes


def digest_of(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def canonical(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Platform:
    os: str = "linux"
    architecture: str = "amd64"
    variant: str | None = None

    def __str__(self) -> str:
        return "/".join(p for p in (self.os, self.architecture, self.variant) if p)


def parse_platform(text: str) -> Platform:
    parts = text.split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise UsageError(f"--platform {text!r}: expected OS/ARCH[/VARIANT], e.g. linux/amd64")
    return Platform(*parts)


def media_type(raw: bytes, header: str | None) -> str:
    """The manifest's media type: the Content-Type, else the document's own mediaType."""
    kind: str = (header or "").split(";")[0].strip()
    if kind in (*MANIFESTS, *INDEXES):
        return kind
    try:
        document = json.loads(raw)
    except ValueError:
        document = {}
    kind = document.get("mediaType", "")
    if kind in (*MANIFESTS, *INDEXES):
        return kind
    if document.get("schemaVersion") == 1:
        raise UsageError(
            "base image uses Docker manifest schema 1, which is not supported; "
            "re-push it with a current Docker or crane"
        )
    if "manifests" in document:
        return OCI_INDEX
    if "layers" in document and "config" in document:
        return OCI_MANIFEST
    raise UsageError(f"base image has an unsupported manifest type {kind or header!r}")


def select_platform(index: dict[str, Any], platform: Platform) -> dict[str, Any]:
    """The descriptor for ``platform`` in a multi-arch index; never the local machine's."""
    descriptors: list[dict[str, Any]] = index.get("manifests", [])
    for desc in descriptors:
        p = desc.get("platform", {})
        if (p.get("os"), p.get("architecture")) == (platform.os, platform.architecture) and (
            platform.variant is None or p.get("variant") == platform.variant
        ):
            return desc
    found = sorted(
        "/".join(
            filter(None, (d.get("platform", {}).get(k) for k in ("os", "architecture", "variant")))
        )
        for d in index.get("manifests", [])
    )
    raise UsageError(
        f"base image has no {platform} image; it has: {', '.join(found) or 'none'} "
        "(choose with --platform)"
    )


def check_platform(config: dict[str, Any], platform: Platform) -> None:
    got = Platform(config.get("os", "linux"), config.get("architecture", "amd64"))
    if (got.os, got.architecture) != (platform.os, platform.architecture):
        raise UsageError(f"base image is {got}, the cluster runs {platform} (see --platform)")


def patched_config(
    base: dict[str, Any],
    diff_ids: list[str],
    descriptions: list[str],
    workdir: str,
    env: dict[str, str],
) -> dict[str, Any]:
    """The base's config with one diff_id and one history entry per workspace layer."""
    config: dict[str, Any] = json.loads(json.dumps(base))  # deep copy, key order kept
    config.setdefault("rootfs", {"type": "layers", "diff_ids": []})
    config["rootfs"].setdefault("diff_ids", []).extend(diff_ids)
    config.setdefault("history", []).extend(
        {"created": HISTORY_TIME, "created_by": text, "comment": "efa-batch launcher"}
        for text in descriptions
    )
    inner = config.setdefault("config", {})
    inner["WorkingDir"] = workdir
    kept = [e for e in inner.get("Env") or [] if e.split("=", 1)[0] not in env]
    inner["Env"] = kept + [f"{k}={v}" for k, v in env.items()]
    return config


def manifest_type(base_type: str, compression: str) -> str:
    """The patched image's manifest type: the base's, unless its layers cannot say zstd."""
    return OCI_MANIFEST if compression == "zstd" else base_type


def as_oci(document: dict[str, Any]) -> dict[str, Any]:
    """A Docker schema 2 manifest as an OCI manifest: the same blobs, OCI media types."""
    converted: dict[str, Any] = json.loads(json.dumps(document))
    converted["mediaType"] = OCI_MANIFEST
    for desc in [converted["config"], *converted["layers"]]:
        desc["mediaType"] = OCI_FOR.get(desc.get("mediaType", ""), desc.get("mediaType"))
    return converted


def patched_manifest(
    base: dict[str, Any],
    base_type: str,
    config_bytes: bytes,
    layers: list[tuple[str, int]],
    compression: str = "gzip",
) -> tuple[dict[str, Any], str]:
    """The base's manifest plus the workspace ``layers`` ((digest, size), in order), and its
    media type."""
    kind = manifest_type(base_type, compression)
    manifest: dict[str, Any] = as_oci(base) if kind != base_type else json.loads(json.dumps(base))
    manifest["mediaType"] = kind
    manifest["config"] = {
        **manifest["config"],
        "digest": digest_of(config_bytes),
        "size": len(config_bytes),
    }
    layer_type = LAYER_FOR[(kind, compression)]
    manifest["layers"] = [
        *manifest["layers"],
        *({"mediaType": layer_type, "digest": d, "size": n} for d, n in layers),
    ]
    manifest.pop("annotations", None)  # base annotations describe the base, not this image
    return manifest, kind


def content_tag(base_digest: str, platform: Platform, diff_id: str, extra: str = "") -> str:
    """Tag of a patched image: a function of what it is made of, so a HEAD finds it."""
    key = "\n".join((base_digest, str(platform), diff_id, extra))
    return WORKSPACE_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:40]
