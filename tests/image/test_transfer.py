"""Big layers survive the network: uploads and copies through a proxy that cuts connections
midway, against the real registry (and the image run by the real Docker engine)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest
import requests

from devenv.images import push_random_base
from devenv.registry_server import RegistryServer
from launcher.image import manifest
from tests.image.test_build import build, docker_run, get_manifest, ok
from tests.support.proxy import CuttingProxy

MIB = 1 << 20


@pytest.fixture
def proxy(registry):
    cutting = CuttingProxy.start(registry.host)
    yield cutting
    cutting.stop()


def _workspace(tmp_path, mib: int):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "weights.bin").write_bytes(os.urandom(mib * MIB))
    return ws


def _sessions(log, repo: str) -> int:
    """Upload sessions opened in ``repo`` (mounts aside): the config's and the layer's."""
    return sum(
        r.method == "POST"
        and r.path.startswith(f"/v2/{repo}/blobs/uploads/")
        and "mount=" not in r.path
        for r in log
    )


def _runs_with_the_file(docker_engine, registry, proxy, ref: str, ws) -> None:
    image = ref.replace(proxy.host, registry.host)
    out = docker_run(docker_engine, image, "sha256sum", "/workspace/weights.bin")
    assert out.split()[0] == hashlib.sha256((ws / "weights.bin").read_bytes()).hexdigest()


def test_an_upload_cut_between_chunks_resumes_where_the_registry_stopped(
    registry, proxy, busybox_base, docker_engine, tmp_path
):
    ws = _workspace(tmp_path, 20)  # 8 + 8 + 4 MiB chunks
    proxy.cut_request(b"PATCH ", 2)  # the second chunk's connection drops as it starts
    base = busybox_base.replace(registry.host, proxy.host)
    registry.requests()
    ref = ok(build("--image", base, "--workspace", str(ws), "--repo", f"{proxy.host}/resumed"))
    assert proxy.cuts == 1
    log = registry.requests()
    # The registry was asked where the upload stood; the same session took the rest.
    status = [r for r in log if r.method == "GET" and "/blobs/uploads/" in r.path]
    assert [r.status for r in status] == [204]
    assert _sessions(log, "resumed") == 2
    assert sum(r.method == "PATCH" for r in log) == 2  # the first chunk was not sent again
    _runs_with_the_file(docker_engine, registry, proxy, ref, ws)


def test_an_upload_cut_inside_a_chunk_starts_a_new_session_where_the_registry_loses_it(
    registry, proxy, busybox_base, docker_engine, tmp_path
):
    """Debian's registry (distribution 2.8) invalidates an upload whose PATCH was cut after
    its first byte: the blob goes again, in a new session, and the build still succeeds."""
    ws = _workspace(tmp_path, 20)
    proxy.cut_up(12 * MIB)  # inside the second chunk
    base = busybox_base.replace(registry.host, proxy.host)
    registry.requests()
    ref = ok(build("--image", base, "--workspace", str(ws), "--repo", f"{proxy.host}/again"))
    assert proxy.cuts == 1
    assert _sessions(registry.requests(), "again") == 3
    _runs_with_the_file(docker_engine, registry, proxy, ref, ws)


def test_a_registry_that_keeps_failing_is_one_line_exit_1(registry, proxy, busybox_base, tmp_path):
    ws = _workspace(tmp_path, 10)
    proxy.cut_up(9 * MIB, times=1000)  # every connection, once it has carried 9 MiB
    base = busybox_base.replace(registry.host, proxy.host)
    result = build("--image", base, "--workspace", str(ws), "--repo", f"{proxy.host}/never")
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.strip().splitlines()[-1:]
    assert f"registry {proxy.host}" in line and "gave up" in line


def test_a_build_whose_upload_failed_is_followed_by_one_that_uploads(
    registry, proxy, busybox_base, docker_engine, tmp_path
):
    """The local index learns the files' digests and the content key while the layer's last
    bytes go up (``launcher.image.patch._record``), the layer itself only once the registry
    has it: after a failed upload, the next build finds nothing to reuse and uploads."""
    ws = _workspace(tmp_path, 10)
    proxy.cut_up(9 * MIB, times=1000)
    base = busybox_base.replace(registry.host, proxy.host)
    args = ("--image", base, "--workspace", str(ws), "--repo", f"{proxy.host}/retried")
    assert build(*args).returncode == 1
    proxy.cut_up(0, times=0)
    registry.requests()
    ref = ok(build(*args))
    assert _sessions(registry.requests(), "retried") == 2  # the layer's and the config's
    _runs_with_the_file(docker_engine, registry, proxy, ref, ws)


@pytest.fixture
def remote(tmp_path_factory):
    server = RegistryServer.start(tmp_path_factory.mktemp("remote"))
    yield server
    server.stop()


def test_a_copy_cut_on_both_sides_resumes_and_moves_layers_side_by_side(remote, registry, tmp_path):
    push_random_base(remote.host, "dlc/pytorch", "1", [6, 6, 6], tmp_path)
    source_proxy, target_proxy = CuttingProxy.start(remote.host), CuttingProxy.start(registry.host)
    try:
        digest = requests.head(
            f"http://{remote.host}/v2/dlc/pytorch/manifests/1",
            headers={"Accept": manifest.ACCEPT},
            timeout=10,
        ).headers["Docker-Content-Digest"]
        source_proxy.cut_down(4 * MIB)  # a layer's download
        target_proxy.cut_up(5 * MIB)  # a layer's upload
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "launcher.copyjob.program",
                f"{source_proxy.host}/dlc/pytorch@{digest}",
                f"{target_proxy.host}/copied",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert "copy: done" in result.stdout
        assert (source_proxy.cuts, target_proxy.cuts) == (1, 1)
        assert target_proxy.most_open >= 2  # layers moved at once
        copied = get_manifest(registry, "copied", digest)
        for desc in copied["layers"]:
            blob = requests.get(
                f"http://{registry.host}/v2/copied/blobs/{desc['digest']}", timeout=30
            ).content
            assert manifest.digest_of(blob) == desc["digest"]
    finally:
        source_proxy.stop()
        target_proxy.stop()
