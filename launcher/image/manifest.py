"""Pure manifest and config transformations (no network), after go-containerregistry's mutate.

A new image is the base's manifest plus one layer descriptor, and the base's config plus one
diff_id and one history entry. Media types follow the base: Docker v2 schema 2 stays Docker,
OCI stays OCI; the two are never mixed in one manifest.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from launcher.errors import UsageError
from launcher.image.tags import WORKSPACE_PREFIX

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
MANIFESTS = (DOCKER_MANIFEST, OCI_MANIFEST)
INDEXES = (DOCKER_LIST, OCI_INDEX)
ACCEPT = ", ".join((*MANIFESTS, *INDEXES))
LAYER_FOR = {DOCKER_MANIFEST: DOCKER_LAYER, OCI_MANIFEST: OCI_LAYER}
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
    base: dict[str, Any], diff_id: str, description: str, workdir: str, env: dict[str, str]
) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(json.dumps(base))  # deep copy, key order kept
    config.setdefault("rootfs", {"type": "layers", "diff_ids": []})
    config["rootfs"].setdefault("diff_ids", []).append(diff_id)
    config.setdefault("history", []).append(
        {"created": HISTORY_TIME, "created_by": description, "comment": "efa-batch launcher"}
    )
    inner = config.setdefault("config", {})
    inner["WorkingDir"] = workdir
    kept = [e for e in inner.get("Env") or [] if e.split("=", 1)[0] not in env]
    inner["Env"] = kept + [f"{k}={v}" for k, v in env.items()]
    return config


def patched_manifest(
    base: dict[str, Any], base_type: str, config_bytes: bytes, layer_digest: str, layer_size: int
) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads(json.dumps(base))
    manifest["mediaType"] = base_type
    manifest["config"] = {
        **manifest["config"],
        "digest": digest_of(config_bytes),
        "size": len(config_bytes),
    }
    manifest["layers"] = [
        *manifest["layers"],
        {"mediaType": LAYER_FOR[base_type], "digest": layer_digest, "size": layer_size},
    ]
    manifest.pop("annotations", None)  # base annotations describe the base, not this image
    return manifest


def content_tag(base_digest: str, platform: Platform, diff_id: str, extra: str = "") -> str:
    """Tag of a patched image: a function of what it is made of, so a HEAD finds it."""
    key = "\n".join((base_digest, str(platform), diff_id, extra))
    return WORKSPACE_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:40]
