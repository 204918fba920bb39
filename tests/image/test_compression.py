"""zstd workspace layers on the real registry and the real Docker engine; deltas that run
exactly as full layers do."""

from __future__ import annotations

import os
import re
import subprocess

import docker.errors
import pytest
import requests

from launcher.errors import UsageError
from launcher.image import manifest, pullers
from launcher.image.compress import Compression
from tests.image.test_build import build, docker_run, get_manifest, ok, workspace


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _zstd_build(registry, busybox_base, ws, repo: str) -> str:
    return ok(
        build(
            *("--image", busybox_base, "--workspace", str(ws)),
            *("--repo", f"{registry.host}/{repo}", "--compression", "zstd"),
        )
    )


def _engine_version(docker_engine) -> str:
    return docker_engine.client().version()["Version"]


def test_a_zstd_layer_on_a_docker_base_makes_an_oci_image_of_the_same_blobs(
    registry, busybox_base, tmp_path
):
    ws = workspace(tmp_path / "ws")
    base = get_manifest(registry, "base", "1")
    assert base["mediaType"] == manifest.DOCKER_MANIFEST  # docker push made it
    ref = _zstd_build(registry, busybox_base, ws, "zst")
    patched = get_manifest(registry, "zst", ref.split("@")[1])
    assert patched["mediaType"] == manifest.OCI_MANIFEST
    assert patched["config"]["mediaType"] == manifest.OCI_CONFIG
    assert [d["digest"] for d in patched["layers"][:-1]] == [d["digest"] for d in base["layers"]]
    assert {d["mediaType"] for d in patched["layers"][:-1]} == {manifest.OCI_LAYER}
    assert patched["layers"][-1]["mediaType"] == manifest.OCI_LAYER_ZSTD
    top = patched["layers"][-1]["digest"]
    blob = requests.get(f"http://{registry.host}/v2/zst/blobs/{top}", timeout=30).content
    listed = subprocess.run(
        ["sh", "-c", "zstd -dc | tar -tvf -"], input=blob, capture_output=True, check=True
    ).stdout.decode()
    assert "workspace/run.sh" in listed and "workspace/hello.txt" in listed


def test_the_local_engine_reads_zstd_only_from_docker_23(
    registry, busybox_base, docker_engine, tmp_path
):
    """What this machine's engine does with a zstd layer, and the launcher's rule for it."""
    ws = workspace(tmp_path / "ws", "zstd on the engine")
    ref = _zstd_build(registry, busybox_base, ws, "zlocal")
    version = _engine_version(docker_engine)
    engine = pullers.docker_engine(version)
    if Compression.ZSTD in engine.reads:
        out = docker_run(docker_engine, ref, "cat", "/workspace/hello.txt")
        assert out.strip() == "zstd on the engine"
        return
    with pytest.raises(docker.errors.APIError):  # Docker before 23.0 cannot unpack it
        docker_run(docker_engine, ref, "cat", "/workspace/hello.txt")
    assert engine.default is Compression.GZIP
    with pytest.raises(UsageError, match=re.escape(f"Docker engine {version} cannot read zstd")):
        pullers.choose("zstd", engine)


def test_the_compression_is_chosen_by_who_pulls():
    assert pullers.choose(None, pullers.CLUSTER_NODES) is Compression.ZSTD  # Docker 25 on the AMI
    assert pullers.choose(None, pullers.ANYONE) is Compression.GZIP  # anyone: what all read
    assert pullers.choose("zstd", pullers.ANYONE) is Compression.ZSTD
    assert pullers.docker_engine("25.0.16").default is Compression.ZSTD
    assert pullers.docker_engine("20.10.24+dfsg1").reads == (Compression.GZIP,)
    with pytest.raises(UsageError, match="--compression 'brotli': allowed gzip, zstd"):
        pullers.choose("brotli", pullers.ANYONE)


def _tree_listing(docker_engine, ref: str) -> list[str]:
    script = (
        "cd /workspace && find . | sort | while read p; do "
        'if [ -L "$p" ]; then echo "$p link $(readlink "$p")"; '
        'elif [ -f "$p" ]; then echo "$p $(stat -c %a "$p") $(sha256sum < "$p" | cut -c1-16)"; '
        'else echo "$p dir $(stat -c %a "$p")"; fi; done'
    )
    return docker_run(docker_engine, ref, "sh", "-c", script).splitlines()


def _applied_tree(registry, repo: str, ref: str, skip: int) -> dict[str, tuple]:
    """The tree the layers after the first ``skip`` make, applied as the OCI image spec's
    layer.md says (``.wh.NAME`` removes NAME, ``.wh..wh..opq`` empties its directory), read by
    the gzip/zstd tools and Python's tarfile: a reader that is not the launcher's."""
    import hashlib
    import io
    import posixpath
    import tarfile

    tree: dict[str, tuple] = {}
    for layer in get_manifest(registry, repo, ref)["layers"][skip:]:
        url = f"http://{registry.host}/v2/{repo}/blobs/{layer['digest']}"
        blob = requests.get(url, timeout=30).content
        tool = "zstd" if layer["mediaType"].endswith("+zstd") else "gzip"
        tar = subprocess.run([tool, "-dc"], input=blob, capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
            for member in archive.getmembers():
                path = posixpath.normpath(member.name)
                parent, name = posixpath.split(path)
                if name == ".wh..wh..opq":
                    for other in [p for p in tree if p.startswith(parent + "/")]:
                        del tree[other]
                elif name.startswith(".wh."):
                    gone = posixpath.join(parent, name.removeprefix(".wh."))
                    for other in [p for p in tree if p == gone or p.startswith(gone + "/")]:
                        del tree[other]
                elif member.isdir():
                    tree[path] = ("dir", member.mode)
                elif member.issym():
                    tree[path] = ("link", member.linkname)
                else:
                    data = archive.extractfile(member).read()  # type: ignore[union-attr]
                    tree[path] = ("file", member.mode, hashlib.sha256(data).hexdigest())
    return tree


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_a_small_change_ships_as_a_delta_that_runs_as_the_full_layer_would(
    registry, busybox_base, docker_engine, tmp_path, monkeypatch, compression
):
    """The delta over the full layer gives the tree a full layer of the same workspace gives:
    applied by the OCI rules everywhere, and run by the Docker engine where it pulls the
    compression (Docker 23.0+ for zstd; this machine's 20.10 reads gzip only)."""
    ws = workspace(tmp_path / "ws")
    for d in ("pkg", "gone", "becomes_file"):
        (ws / d).mkdir()
    (ws / "pkg" / "model.py").write_text("WIDTH = 4\n")
    (ws / "gone" / "old.py").write_text("old\n")
    (ws / "becomes_file" / "x").write_text("x\n")
    (ws / "dropped.txt").write_text("dropped\n")
    (ws / "link").symlink_to("hello.txt")
    repo = f"{registry.host}/delta-{compression}"
    args = ("--image", busybox_base, "--workspace", str(ws), "--compression", compression)
    first = ok(build(*args, "--repo", repo))
    # Changed, added, removed, re-moded, retyped, relinked:
    (ws / "pkg" / "model.py").write_text("WIDTH = 8\n")
    (ws / "new").mkdir()
    (ws / "new" / "added.py").write_text("added\n")
    subprocess.run(["rm", "-r", str(ws / "gone"), str(ws / "becomes_file")], check=True)
    (ws / "becomes_file").write_text("now a file\n")
    (ws / "dropped.txt").unlink()
    (ws / "hello.txt").chmod(0o600)
    (ws / "link").unlink()
    (ws / "link").symlink_to("run.sh")
    second = ok(build(*args, "--repo", repo))
    layers = get_manifest(registry, f"delta-{compression}", second.split("@")[1])["layers"]
    base_layers = len(get_manifest(registry, "base", "1")["layers"])
    assert len(layers) == base_layers + 2  # the full layer, and the delta over it
    assert layers[-1]["size"] < layers[-2]["size"] / 10
    first_layers = get_manifest(registry, f"delta-{compression}", first.split("@")[1])["layers"]
    assert layers[-2] == first_layers[-1]  # the full layer is reused, not sent again
    # The same workspace built from nothing (a fresh index): one layer, the same tree.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "fresh-cache"))
    full = ok(build(*args, "--repo", f"{repo}-full"))
    full_layers = get_manifest(registry, f"delta-{compression}-full", full.split("@")[1])["layers"]
    assert len(full_layers) == base_layers + 1
    delta_tree = _applied_tree(registry, f"delta-{compression}", second.split("@")[1], base_layers)
    full_tree = _applied_tree(
        registry, f"delta-{compression}-full", full.split("@")[1], base_layers
    )
    assert delta_tree == full_tree and "workspace/gone" not in delta_tree
    assert delta_tree["workspace/becomes_file"][0] == "file"
    assert delta_tree["workspace/link"] == ("link", "run.sh")
    if Compression(compression) in pullers.docker_engine(_engine_version(docker_engine)).reads:
        assert _tree_listing(docker_engine, second) == _tree_listing(docker_engine, full)


def test_a_delta_that_grows_past_a_quarter_becomes_a_full_layer_again(
    registry, busybox_base, tmp_path
):
    ws = workspace(tmp_path / "ws")  # 256 KiB of random data and two small files
    repo = f"{registry.host}/regrow"
    args = ("--image", busybox_base, "--workspace", str(ws), "--repo", repo)
    ok(build(*args, "--compression", "gzip"))
    (ws / "more.bin").write_bytes(os.urandom(128 * 1024))  # half as much again
    grown = ok(build(*args, "--compression", "gzip"))
    layers = get_manifest(registry, "regrow", grown.split("@")[1])["layers"]
    assert len(layers) == len(get_manifest(registry, "base", "1")["layers"]) + 1
