"""The workspace image's manifest, config and tag as a registry and a node read them: media
types converted blob for blob, the config's layers and history, the platform chosen from an
index, and a tag that stays the same from one launcher version to the next
(launcher/image/manifest.py). Many assertions were added where mutation testing (``make
mutation``) found changes to it that no test noticed."""

from __future__ import annotations

import json

import pytest

from launcher.errors import UsageError
from launcher.image import manifest as m

DOCKER_BASE = {
    "schemaVersion": 2,
    "mediaType": m.DOCKER_MANIFEST,
    "config": {"mediaType": m.DOCKER_CONFIG, "digest": "sha256:c0", "size": 10},
    "layers": [
        {"mediaType": m.DOCKER_LAYER, "digest": "sha256:l1", "size": 100},
        {"mediaType": m.DOCKER_FOREIGN, "digest": "sha256:l2", "size": 200, "urls": ["u"]},
        {"mediaType": "application/x-unknown", "digest": "sha256:l3", "size": 1},
    ],
    "annotations": {"org.opencontainers.image.base.name": "base"},
}
CONFIG = b'{"architecture":"amd64"}'


def test_a_zstd_layer_on_a_docker_base_makes_an_oci_manifest_of_the_same_blobs():
    """Docker's schema 2 has no zstd layer type: every descriptor becomes its OCI counterpart
    (an unknown one stays as it is), the workspace layer is OCI zstd, the config is the new
    one, and the base's annotations go."""
    manifest, kind = m.patched_manifest(
        DOCKER_BASE, m.DOCKER_MANIFEST, CONFIG, [("sha256:w1", 7)], "zstd"
    )
    assert kind == m.OCI_MANIFEST
    assert manifest == {
        "schemaVersion": 2,
        "mediaType": m.OCI_MANIFEST,
        "config": {"mediaType": m.OCI_CONFIG, "digest": m.digest_of(CONFIG), "size": 24},
        "layers": [
            {"mediaType": m.OCI_LAYER, "digest": "sha256:l1", "size": 100},
            {
                "mediaType": m.OCI_NONDISTRIBUTABLE,
                "digest": "sha256:l2",
                "size": 200,
                "urls": ["u"],
            },
            {"mediaType": "application/x-unknown", "digest": "sha256:l3", "size": 1},
            {"mediaType": m.OCI_LAYER_ZSTD, "digest": "sha256:w1", "size": 7},
        ],
    }
    assert DOCKER_BASE["layers"][0]["mediaType"] == m.DOCKER_LAYER  # the base is not touched
    converted = m.as_oci(DOCKER_BASE)
    assert converted["mediaType"] == m.OCI_MANIFEST
    assert converted["config"]["mediaType"] == m.OCI_CONFIG


def test_a_gzip_layer_keeps_the_bases_manifest_type():
    manifest, kind = m.patched_manifest(DOCKER_BASE, m.DOCKER_MANIFEST, CONFIG, [("sha256:w", 7)])
    assert kind == m.DOCKER_MANIFEST
    assert manifest["mediaType"] == m.DOCKER_MANIFEST
    assert manifest["config"] == {
        "mediaType": m.DOCKER_CONFIG,
        "digest": m.digest_of(CONFIG),
        "size": 24,
    }
    assert manifest["layers"][0]["mediaType"] == m.DOCKER_LAYER
    assert manifest["layers"][-1] == {"mediaType": m.DOCKER_LAYER, "digest": "sha256:w", "size": 7}
    assert "annotations" not in manifest
    assert m.manifest_type(m.OCI_MANIFEST, "gzip") == m.OCI_MANIFEST
    assert m.manifest_type(m.DOCKER_MANIFEST, "zstd") == m.OCI_MANIFEST


def test_a_bare_config_gets_layers_history_workdir_and_environment():
    """A base config with none of rootfs, history or config (a minimal image) still describes
    the new layers as a node's Docker reads them."""
    config = m.patched_config({}, ["sha256:d1"], ["COPY workspace"], "/work", {"A": "1"})
    assert config == {
        "rootfs": {"type": "layers", "diff_ids": ["sha256:d1"]},
        "history": [
            {
                "created": m.HISTORY_TIME,
                "created_by": "COPY workspace",
                "comment": "efa-batch launcher",
            }
        ],
        "config": {"WorkingDir": "/work", "Env": ["A=1"]},
    }


def test_the_workspace_environment_replaces_the_bases_by_name():
    """A variable whose value holds '=' is still named by what comes before the first one."""
    base = {
        "rootfs": {"type": "layers"},
        "config": {"Env": ["PATH=/usr/bin", "OPTS=a=b=c", "KEEP=1"]},
    }
    config = m.patched_config(base, ["sha256:d"], [], "/w", {"OPTS": "x", "PATH": "/bin"})
    assert config["config"]["Env"] == ["KEEP=1", "OPTS=x", "PATH=/bin"]
    assert config["rootfs"]["diff_ids"] == ["sha256:d"]


@pytest.mark.parametrize(
    ("raw", "header", "kind"),
    [
        (b"{}", f"{m.OCI_MANIFEST}; charset=utf-8", m.OCI_MANIFEST),
        (json.dumps({"mediaType": m.DOCKER_LIST}).encode(), "application/json", m.DOCKER_LIST),
        (b'{"manifests": []}', None, m.OCI_INDEX),
        (b'{"layers": [], "config": {}}', None, m.OCI_MANIFEST),
    ],
)
def test_the_media_type_from_the_header_or_the_document(raw, header, kind):
    assert m.media_type(raw, header) == kind


@pytest.mark.parametrize(
    ("raw", "header", "line"),
    [
        (b"<html>", "text/html", "base image has an unsupported manifest type 'text/html'"),
        (b"not json", None, "base image has an unsupported manifest type None"),
        (b'{"layers": []}', None, "base image has an unsupported manifest type None"),
        (b'{"config": {}}', None, "base image has an unsupported manifest type None"),
        (
            b'{"schemaVersion": 1}',
            None,
            "base image uses Docker manifest schema 1, which is not supported; re-push it with "
            "a current Docker or crane",
        ),
    ],
)
def test_a_manifest_the_launcher_cannot_patch_is_one_whole_line(raw, header, line):
    with pytest.raises(UsageError) as info:
        m.media_type(raw, header)
    assert str(info.value) == line


INDEX = {
    "manifests": [
        {"digest": "d1", "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
        {"digest": "d2", "platform": {"os": "linux", "architecture": "arm", "variant": "v7"}},
        {"digest": "d3", "platform": {"os": "linux", "architecture": "arm", "variant": "v6"}},
    ]
}


def test_the_platform_is_chosen_by_os_architecture_and_variant_when_given():
    assert m.select_platform(INDEX, m.Platform("linux", "arm64"))["digest"] == "d1"
    assert m.select_platform(INDEX, m.Platform("linux", "arm", "v6"))["digest"] == "d3"
    unnamed = {"manifests": [{"digest": "d0"}, *INDEX["manifests"]]}
    assert m.select_platform(unnamed, m.Platform("linux", "arm", "v7"))["digest"] == "d2"
    with pytest.raises(UsageError):
        m.select_platform(unnamed, m.Platform())


def test_a_missing_platform_names_the_ones_there_are():
    with pytest.raises(UsageError) as info:
        m.select_platform(INDEX, m.Platform("linux", "amd64"))
    assert str(info.value) == (
        "base image has no linux/amd64 image; it has: linux/arm/v6, linux/arm/v7, linux/arm64/v8 "
        "(choose with --platform)"
    )
    with pytest.raises(UsageError) as info:
        m.select_platform({}, m.Platform())
    assert str(info.value) == (
        "base image has no linux/amd64 image; it has: none (choose with --platform)"
    )


def test_a_single_platform_base_must_be_the_clusters():
    """A config without os or architecture is linux/amd64, as Docker reads it."""
    m.check_platform({}, m.Platform())
    m.check_platform({"os": "linux", "architecture": "arm64"}, m.Platform("linux", "arm64"))
    with pytest.raises(UsageError) as info:
        m.check_platform({"architecture": "arm64"}, m.Platform())
    assert str(info.value) == (
        "base image is linux/arm64, the cluster runs linux/amd64 (see --platform)"
    )
    with pytest.raises(UsageError):
        m.check_platform({"os": "windows"}, m.Platform())


@pytest.mark.parametrize("text", ["linux", "linux//", "a/b/c/d", "/amd64"])
def test_a_malformed_platform_is_one_whole_line(text):
    with pytest.raises(UsageError) as info:
        m.parse_platform(text)
    assert str(info.value) == f"--platform {text!r}: expected OS/ARCH[/VARIANT], e.g. linux/amd64"


def test_a_document_is_pushed_byte_for_byte_as_built():
    """The manifest's digest is of these bytes: key order kept, no spaces."""
    assert m.canonical({"b": 1, "a": [1, {"c": "d"}]}) == b'{"b":1,"a":[1,{"c":"d"}]}'


def test_a_workspace_images_tag_is_the_same_in_every_launcher_version():
    """The tag is how a build finds its image already in the registry: a launcher that spelled
    it differently would rebuild and upload every workspace once more. This one is a gzip
    image's: no extra, the same as an empty one."""
    args = ("sha256:" + "a" * 64, m.Platform(), "sha256:" + "b" * 64)
    tag = "ws-945cc120a2554bf4e3027af20d553a8cb6fc0e62"
    assert m.content_tag(*args) == tag
    assert m.content_tag(*args, "") == tag
