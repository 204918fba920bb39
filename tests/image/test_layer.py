"""The workspace layer and the manifest rewrite: reproducible, pure, checked byte by byte."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading

import pytest

from launcher.errors import UsageError
from launcher.image import compress, layer, manifest, patch, tarheader, workspace
from launcher.image.compress import Compression


def make_workspace(root):
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "model.py").write_text("WIDTH = 4\n")
    (root / "train.sh").write_text("#!/bin/sh\necho training\n")
    (root / "train.sh").chmod(0o755)
    (root / "data.bin").write_bytes(os.urandom(1000))
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: main\n")
    (root / "pkg" / "__pycache__").mkdir()
    (root / "pkg" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\0")
    (root / "env").mkdir()
    (root / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    (root / "notes.secret").write_text("do not ship")
    (root / ".dockerignore").write_text("# keep secrets out\n*.secret\n")
    (root / "link").symlink_to("train.sh")
    return root


def build(root, compression=Compression.GZIP) -> tuple[bytes, layer.LayerDigests]:
    out = layer.LayerDigests()
    data = b"".join(layer.stream(workspace.scan(root), compression, out))
    return data, out


def members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        return {m.name: m for m in tar.getmembers()}


def test_layer_is_reproducible_across_copies_and_mtimes(tmp_path):
    a = make_workspace(tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b, symlinks=True)
    os.utime(b / "pkg" / "model.py", (1, 1))
    data_a, out_a = build(a)
    data_b, out_b = build(b)
    assert data_a == data_b
    assert (out_a.digest, out_a.diff_id) == (out_b.digest, out_b.diff_id)
    assert out_a.digest == manifest.digest_of(data_a)
    assert out_a.diff_id == manifest.digest_of(gzip.decompress(data_a))


def test_layer_keeps_modes_and_links_and_drops_owners_and_times(tmp_path):
    data, _ = build(make_workspace(tmp_path / "w"))
    found = members(data)
    assert found["workspace/train.sh"].mode == 0o755
    assert found["workspace/pkg/model.py"].mode == 0o644
    assert found["workspace/link"].issym() and found["workspace/link"].linkname == "train.sh"
    assert {(m.uid, m.gid, m.uname, m.gname, m.mtime) for m in found.values()} == {
        (0, 0, "", "", tarheader.MTIME)
    }
    assert list(found) == sorted(found, key=lambda n: n.split("/"))


def test_ignores_dockerignore_git_caches_and_virtualenvs(tmp_path):
    found = members(build(make_workspace(tmp_path / "w"))[0])
    names = set(found)
    assert "workspace/pkg/model.py" in names
    assert not any(
        ".git" in n or "__pycache__" in n or n.startswith("workspace/env") or n.endswith(".secret")
        for n in names
    )


def test_gzip_header_has_no_name_and_no_time(tmp_path):
    data, _ = build(make_workspace(tmp_path / "w"))
    assert data[:4] == b"\x1f\x8b\x08\x00"  # deflate, no FNAME flag
    assert data[4:8] == b"\0\0\0\0"  # mtime 0


def test_changed_file_changes_the_digest(tmp_path):
    root = make_workspace(tmp_path / "w")
    _, before = build(root)
    (root / "pkg" / "model.py").write_text("WIDTH = 8\n")
    _, after = build(root)
    assert before.digest != after.digest


def test_missing_workspace_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="not a directory"):
        workspace.scan(tmp_path / "nope")


BASE_CONFIG = {
    "architecture": "amd64",
    "os": "linux",
    "config": {
        "Env": ["PATH=/bin", "LAUNCHER_WORKSPACE=/old"],
        "Cmd": ["/bin/sh"],
        "Entrypoint": ["bash", "-m", "dockerd_entrypoint.sh"],
    },
    "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "1" * 64]},
    "history": [{"created_by": "base"}],
}


def test_patched_config_appends_one_layer_and_sets_the_working_directory():
    new = manifest.patched_config(
        BASE_CONFIG,
        ["sha256:" + "2" * 64],
        ["COPY ws"],
        "/workspace",
        {"LAUNCHER_WORKSPACE": "/workspace"},
    )
    assert new["rootfs"]["diff_ids"] == ["sha256:" + "1" * 64, "sha256:" + "2" * 64]
    assert new["history"][-1]["created_by"] == "COPY ws"
    assert new["config"]["WorkingDir"] == "/workspace"
    assert new["config"]["Env"] == ["PATH=/bin", "LAUNCHER_WORKSPACE=/workspace"]
    assert BASE_CONFIG["rootfs"]["diff_ids"] == ["sha256:" + "1" * 64]  # base untouched
    # The base's entrypoint stays: it sets up what the image's authors rely on (the node
    # command is made correct behind it, launcher.node.prelude.REPARSE_GUARD).
    assert new["config"]["Entrypoint"] == ["bash", "-m", "dockerd_entrypoint.sh"]
    assert new["config"]["Cmd"] == ["/bin/sh"]


@pytest.mark.parametrize(
    ("kind", "layer_type"),
    [
        (manifest.DOCKER_MANIFEST, manifest.DOCKER_LAYER),
        (manifest.OCI_MANIFEST, manifest.OCI_LAYER),
    ],
)
def test_patched_manifest_never_mixes_media_types(kind, layer_type):
    base = {
        "schemaVersion": 2,
        "mediaType": kind,
        "config": {"mediaType": "x", "digest": "sha256:" + "3" * 64, "size": 1},
        "layers": [{"mediaType": layer_type, "digest": "sha256:" + "4" * 64, "size": 9}],
    }
    config = b'{"a":1}'
    new, new_kind = manifest.patched_manifest(base, kind, config, [("sha256:" + "5" * 64, 42)])
    assert new_kind == kind
    assert new["config"]["digest"] == manifest.digest_of(config)
    assert new["layers"][0] == base["layers"][0]
    assert new["layers"][-1] == {
        "mediaType": layer_type,
        "digest": "sha256:" + "5" * 64,
        "size": 42,
    }


def test_index_resolves_to_the_cluster_platform_not_the_local_one():
    index = {
        "manifests": [
            {
                "digest": "sha256:arm",
                "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"},
            },
            {"digest": "sha256:amd", "platform": {"os": "linux", "architecture": "amd64"}},
        ]
    }
    assert manifest.select_platform(index, manifest.Platform())["digest"] == "sha256:amd"
    arm = manifest.parse_platform("linux/arm64/v8")
    assert manifest.select_platform(index, arm)["digest"] == "sha256:arm"
    with pytest.raises(UsageError, match="has no linux/s390x image; it has: linux/amd64"):
        manifest.select_platform(index, manifest.parse_platform("linux/s390x"))


def test_unsupported_manifests_are_named():
    with pytest.raises(UsageError, match="schema 1"):
        manifest.media_type(json.dumps({"schemaVersion": 1}).encode(), "")
    with pytest.raises(UsageError, match="unsupported manifest type"):
        manifest.media_type(
            b'{"mediaType": "application/vnd.oci.artifact.manifest.v1+json"}',
            "application/vnd.oci.artifact.manifest.v1+json",
        )
    assert manifest.media_type(b"{}", manifest.OCI_INDEX) == manifest.OCI_INDEX


def test_content_tag_depends_on_base_platform_and_workspace():
    tag = manifest.content_tag("sha256:a", manifest.Platform(), "sha256:b")
    assert tag == manifest.content_tag("sha256:a", manifest.Platform(), "sha256:b")
    assert tag != manifest.content_tag("sha256:c", manifest.Platform(), "sha256:b")
    assert tag != manifest.content_tag(
        "sha256:a", manifest.parse_platform("linux/arm64"), "sha256:b"
    )
    assert tag.startswith("ws-") and len(tag) <= 128


def test_content_tag_depends_on_how_the_layer_is_made():
    """The recipe (the image's environment, working directory and layer compression,
    ``patch.recipe``) is part of the tag: otherwise a zstd build of a workspace whose gzip
    image is in the registry would find that image by its tag and reuse it without a word,
    and a gzip build after a zstd one would hand a Docker engine before 23.0, which cannot
    unpack zstd (``pullers.docker_engine``), an image it cannot run."""
    key = ("sha256:a", manifest.Platform(), "sha256:b")
    gzip_tag, zstd_tag = (manifest.content_tag(*key, patch.recipe(c)) for c in Compression)
    assert gzip_tag != zstd_tag
    assert gzip_tag == manifest.content_tag(*key, patch.recipe(Compression.GZIP))
    assert manifest.content_tag(*key) not in (gzip_tag, zstd_tag)


# --- the tar as tarfile writes it, compressed on every core ----------------------------------


def _tarfile_header(name, kind, mode, size, link):
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size, info.linkname = kind, mode, size, link
    info.mtime, info.uid, info.gid, info.uname, info.gname = tarheader.MTIME, 0, 0, "", ""
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


@pytest.mark.parametrize(
    ("name", "kind", "mode", "size", "link"),
    [
        ("workspace", b"5", 0o755, 0, ""),
        ("workspace/train.py", b"0", 0o644, 12345, ""),
        ("workspace/run.sh", b"0", 0o4755, 99, ""),  # setuid: the mode field keeps it
        ("workspace/latest", b"2", 0o777, 0, "ckpt/step-100"),  # a short link: ustar alone
        ("workspace/" + "long/" * 30 + "name.py", b"0", 0o600, 7, ""),  # a PAX path
        ("workspace/naïve.txt", b"0", 0o644, 1, ""),  # non-ASCII: a PAX path
        ("workspace/link", b"2", 0o777, 0, "t" * 120),  # a PAX link target
        ("workspace/huge.bin", b"0", 0o644, 8**11 + 1, ""),  # a PAX size
        ("workspace/bad\udcff", b"0", 0o644, 1, ""),  # an undecodable file name
    ],
)
def test_headers_are_byte_for_byte_what_tarfile_writes(name, kind, mode, size, link):
    assert tarheader.header(name, kind, mode, size, link) == _tarfile_header(
        name, kind, mode, size, link
    )


# A member's first ten bytes as the layer writes them: deflate, no flags, mtime 0, OS unknown.
GZIP_MEMBER_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def _big_workspace(root):
    """Text and random data over several chunks, and many small files."""
    root.mkdir()
    text = "".join(f"def f{i}(x):\n    return x * {i} - {i % 7}\n" for i in range(60_000))
    (root / "code.py").write_text(text)
    (root / "weights.bin").write_bytes(os.urandom(3 << 20))
    for i in range(300):
        (root / f"m{i}.py").write_text(f"X = {i}\n" * (i + 1))
    return root


def test_gzip_members_are_read_by_every_reader_and_random_chunks_are_stored(tmp_path):
    root = _big_workspace(tmp_path / "w")
    data, out = build(root)
    raw = gzip.decompress(data)  # Python reads the members in sequence
    assert manifest.digest_of(raw) == out.diff_id
    unzipped = subprocess.run(["gzip", "-dc"], input=data, capture_output=True, check=True)
    assert unzipped.stdout == raw  # and so does gzip(1)
    assert data.count(GZIP_MEMBER_HEADER) >= 4  # one member a chunk
    # The random megabytes went as stored blocks: no bigger than they are, give or take
    # 5 bytes per 64 KiB, and the text shrank.
    assert len(data) < 3.1 * (1 << 20) + len(raw) - (3 << 20)


def test_zstd_frames_are_read_by_the_zstd_tool(tmp_path):
    root = _big_workspace(tmp_path / "w")
    data, out = build(root, Compression.ZSTD)
    assert data[:4] == b"\x28\xb5\x2f\xfd"  # a zstd frame's magic number
    unpacked = subprocess.run(["zstd", "-dc"], input=data, capture_output=True, check=True)
    assert manifest.digest_of(unpacked.stdout) == out.diff_id
    assert out.digest == manifest.digest_of(data)


def test_zstd_frames_hold_four_times_what_gzip_members_hold(tmp_path):
    """RFC 8878 3.1.1: a frame header may carry Frame_Content_Size, which the bindings write
    and ``get_frame_parameters`` reads. The first zstd frame holds ZSTD_CHUNK bytes of tar
    (4 MiB: fewer, larger frames measured faster and smaller on many small files), the
    first gzip member CHUNK (RFC 1952 2.3.1: ISIZE, the member's input size mod 2^32, is
    its last four bytes). RFC 8878 3.1.1.1.2 recommends that decoders support windows up to
    8 MB (RFC 9659 makes it a limit over HTTP); a 4 MiB frame's window is at most 4 MiB."""
    import zstandard

    root = _big_workspace(tmp_path / "w")
    zstd_data, out = build(root, Compression.ZSTD)
    assert out.tar_size > compress.ZSTD_CHUNK
    frame = zstandard.get_frame_parameters(zstd_data)
    assert frame.content_size == compress.ZSTD_CHUNK
    assert frame.window_size <= compress.ZSTD_CHUNK
    gzip_data, _ = build(root)
    second = gzip_data.index(GZIP_MEMBER_HEADER, 1)
    assert int.from_bytes(gzip_data[second - 4 : second], "little") == compress.CHUNK


@pytest.mark.parametrize("compression", list(Compression))
def test_the_layer_does_not_depend_on_the_number_of_cores(tmp_path, monkeypatch, compression):
    root = _big_workspace(tmp_path / "w")
    monkeypatch.setattr(compress, "workers", lambda: 1)
    one, _ = build(root, compression)
    monkeypatch.setattr(compress, "workers", lambda: 5)
    five, _ = build(root, compression)
    assert one == five


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux scheduling feature")
def test_the_compressors_run_nicer_than_the_thread_that_feeds_them(monkeypatch):
    """setpriority(2), BUGS: "under the current Linux/NPTL implementation of POSIX threads,
    the nice value is a per-thread attribute". The compression threads take NICER on top of
    the caller's value; the caller's own priority stays as it was."""

    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    seen = []

    def codec(chunk):
        seen.append(nice())
        return bytes(chunk)

    monkeypatch.setitem(compress.CODECS, Compression.ZSTD, codec)
    caller = nice()
    assert list(compress.compressed([b"a", b"b", b"c"], Compression.ZSTD)) == [b"a", b"b", b"c"]
    assert set(seen) == {min(19, caller + compress.NICER)}
    assert nice() == caller


def test_a_file_changed_while_the_layer_is_built_fails_the_build(tmp_path):
    root = make_workspace(tmp_path / "w")
    scanned = workspace.scan(root)
    (root / "pkg" / "model.py").write_text("WIDTH = 16\n")  # after the scan, before the read
    with pytest.raises(UsageError, match="model.py changed while the layer was built"):
        b"".join(layer.stream(scanned, Compression.GZIP, layer.LayerDigests()))


def test_the_tar_size_is_known_before_the_layer_is_made_for_a_progress_bar(tmp_path):
    root = make_workspace(tmp_path / "ws")
    scanned = workspace.scan(root)
    _, out = build(root)
    assert layer.tar_size_estimate(scanned.entries) == out.tar_size
    # A name too long for a ustar header takes a PAX header too: the estimate falls short.
    (root / ("n" * 120)).write_text("x")
    scanned = workspace.scan(root)
    _, out = build(root)
    assert 0 < out.tar_size - layer.tar_size_estimate(scanned.entries) <= 3 * tarheader.BLOCK
