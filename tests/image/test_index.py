"""The local index: an unchanged file costs an lstat, a changed one is always caught."""

from __future__ import annotations

import dataclasses
import gzip
import io
import marshal
import os
import shutil
import tarfile

import pytest
import requests

from launcher.image import delta, index, layer, workspace
from launcher.image.build import workspace_image
from tests.image.test_build import build, get_manifest, ok

SECOND = 1_000_000_000


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _indexed(root, scanned_ns: int) -> tuple[workspace.Workspace, index.Index]:
    """The workspace indexed as if scanned at ``scanned_ns`` (with the real digests), as a
    build does it: what the index trusts, then the save."""
    scanned = dataclasses.replace(workspace.scan(root), scanned_ns=scanned_ns)
    files = [e for e in scanned.entries if e.kind == workspace.FILE]
    found = index.Index.load(scanned.root)
    found.known(scanned)
    found.save(scanned, layer.file_digests(scanned.root, files), None)
    return scanned, index.Index.load(scanned.root)


def _files(root, count: int, text: str):
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (root / f"f{i:03d}.txt").write_text(f"{text} {i}\n")
    return root


def _after_the_racy_window(root) -> int:
    """A scan time at which every file of ``root`` is older than the racy window."""
    newest = max(max(p.lstat().st_mtime_ns, p.lstat().st_ctime_ns) for p in root.rglob("*"))
    return newest + index.RACY_NS + SECOND


def test_the_list_a_workspace_left_at_its_path_gives_way_to_the_next_one(tmp_path):
    """Issue 34 (a)'s cause: a workspace made again at its path (a fresh clone into the same
    directory) has no file the old list vouches for. Fewer than REREAD_LIMIT files read again
    used to leave a list as it was, so the old one stayed, every build read every file again,
    and a workspace of more than 4 MiB was uploaded before it was looked up."""
    root = _files(tmp_path / "ws", 40, "old")
    _indexed(root, _after_the_racy_window(root))
    shutil.rmtree(root)
    root = _files(tmp_path / "ws", 40, "new")
    scanned, again = _indexed(root, _after_the_racy_window(root))
    assert set(again.known(scanned)) == {f"f{i:03d}.txt" for i in range(40)}


def test_a_large_file_read_again_is_recorded_at_once(tmp_path, monkeypatch):
    """One changed file leaves a long list as it is only while reading it again is cheap."""
    monkeypatch.setattr(index, "REREAD_BYTES", 1000)
    root = _files(tmp_path / "ws", 64, "small")
    (root / "weights.bin").write_bytes(b"0" * 4096)
    _indexed(root, _after_the_racy_window(root))
    (root / "weights.bin").write_bytes(b"1" * 4096)
    scanned, again = _indexed(root, _after_the_racy_window(root))
    assert "weights.bin" in again.known(scanned)


def test_a_few_small_files_read_again_leave_a_long_list_as_it_is(tmp_path):
    """The other side (a 50,000-file list is not rewritten for one edit): one file of 64
    changed, the list stays, and that file is read again next time."""
    root = _files(tmp_path / "ws", 64, "small")
    _indexed(root, _after_the_racy_window(root))
    written = index.path_for(str(root)).read_bytes()
    (root / "f000.txt").write_text("edited\n")
    scanned, again = _indexed(root, _after_the_racy_window(root))
    assert index.path_for(str(root)).read_bytes() == written
    assert set(again.known(scanned)) == {f"f{i:03d}.txt" for i in range(1, 64)}


def _tree(root):
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("A = 1\n")
    (root / "b.txt").write_text("bee\n")
    return root


def test_an_unchanged_file_is_trusted_once_older_than_the_racy_window(tmp_path):
    root = _tree(tmp_path / "ws")
    newest = max(os.lstat(p).st_ctime_ns for p in (root / "pkg" / "a.py", root / "b.txt"))
    _, later = _indexed(root, newest + index.RACY_NS + SECOND)
    assert set(later.known(workspace.scan(root))) == {"pkg/a.py", "b.txt"}


def test_a_file_indexed_within_the_racy_window_is_read_again(tmp_path):
    """git's racy-clean case: a write in the same timestamp tick as the read that indexed
    the file would leave its stat as it was, so such an entry is not trusted."""
    root = _tree(tmp_path / "ws")
    newest = max(os.lstat(p).st_ctime_ns for p in (root / "pkg" / "a.py", root / "b.txt"))
    _, racy = _indexed(root, newest + index.RACY_NS // 2)
    assert racy.known(workspace.scan(root)) == {}


def test_a_content_change_that_keeps_size_and_mtime_is_caught(tmp_path):
    root = _tree(tmp_path / "ws")
    _, indexed = _indexed(root, os.lstat(root / "b.txt").st_ctime_ns + 3 * index.RACY_NS)
    before = os.lstat(root / "b.txt")
    (root / "b.txt").write_text("BEE\n")  # same size
    os.utime(root / "b.txt", ns=(before.st_atime_ns, before.st_mtime_ns))  # mtime put back
    assert os.lstat(root / "b.txt").st_mtime_ns == before.st_mtime_ns
    assert "b.txt" not in indexed.known(workspace.scan(root))  # the ctime moved
    assert "pkg/a.py" in indexed.known(workspace.scan(root))


def test_a_file_replaced_by_a_rename_is_caught(tmp_path):
    root = _tree(tmp_path / "ws")
    _, indexed = _indexed(root, os.lstat(root / "b.txt").st_ctime_ns + 3 * index.RACY_NS)
    (tmp_path / "new").write_text("bee\n")
    os.replace(tmp_path / "new", root / "b.txt")  # an editor's save: a new inode
    assert "b.txt" not in indexed.known(workspace.scan(root))


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",  # damaged
        b'{"version": 5, "scanned_ns": 0, "files": {}}',  # the JSON index of version 5
        marshal.dumps({"version": index.VERSION, "scanned_ns": 0, "stamps": [1], "digests": {}}),
        marshal.dumps({"version": index.VERSION, "scanned_ns": 0, "stamps": {"a": 1}}),
        marshal.dumps({"version": index.VERSION})[:-3],  # cut short
        marshal.dumps([1, 2]),
    ],
)
def test_a_damaged_index_costs_a_read_not_a_wrong_answer(tmp_path, content):
    root = _tree(tmp_path / "ws")
    index.path_for(str(root)).parent.mkdir(parents=True)
    index.path_for(str(root)).write_bytes(content)
    assert index.Index.load(str(root)).known(workspace.scan(root)) == {}


def test_the_index_reads_back_what_it_wrote(tmp_path):
    root = _tree(tmp_path / "ws")
    (root / "caf\xe9.txt").write_text("menu\n")  # a non-ASCII name round-trips too
    scanned, indexed = _indexed(root, os.lstat(root / "b.txt").st_ctime_ns + 3 * index.RACY_NS)
    files = [e for e in scanned.entries if e.kind == workspace.FILE]
    assert indexed.known(scanned) == layer.file_digests(scanned.root, files)
    tree = {"b.txt": "0 420 4 abc ", "caf\xe9.txt": "0 420 5 def "}
    uploaded = index.Uploaded("sha256:k", "zstd", "r/w", (index.Layer("d", "g", 1),))
    indexed.save(scanned, indexed.known(scanned), uploaded, tree)
    assert index.Index.load(str(root)).tree("sha256:k") == tree


def _key(root) -> str:
    scanned = workspace.scan(root)
    files = [e for e in scanned.entries if e.kind == workspace.FILE]
    return index.content_key(delta.tree(scanned.entries, layer.file_digests(str(root), files)))


def test_the_content_key_follows_what_the_layer_ships_and_nothing_else(tmp_path):
    """The key names the layer (an image built on another machine is found by it): the
    same files elsewhere, with other times and inodes, have the same key; a mode, a name, a
    link target or a byte changed gives another."""
    root = _tree(tmp_path / "ws")
    (root / "latest").symlink_to("b.txt")
    key = _key(root)
    copy = shutil.copytree(root, tmp_path / "copy", symlinks=True)
    os.utime(copy / "b.txt", ns=(SECOND, SECOND))
    assert _key(copy) == key
    os.chmod(copy / "b.txt", 0o600)
    assert _key(copy) != key
    os.chmod(copy / "b.txt", os.lstat(root / "b.txt").st_mode & 0o777)
    assert _key(copy) == key
    (copy / "latest").unlink()
    (copy / "latest").symlink_to("pkg/a.py")
    assert _key(copy) != key
    (copy / "latest").unlink()
    (copy / "latest").symlink_to("b.txt")
    (copy / "b.txt").rename(copy / "c.txt")
    assert _key(copy) != key
    (copy / "c.txt").rename(copy / "b.txt")
    (copy / "b.txt").write_text("bed\n")
    assert _key(copy) != key


def _layer_files(registry, repo: str, ref: str) -> dict[str, bytes]:
    """The workspace files the image's last layer holds."""
    top = get_manifest(registry, repo, ref.split("@")[1])["layers"][-1]["digest"]
    blob = requests.get(f"http://{registry.host}/v2/{repo}/blobs/{top}", timeout=30).content
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob))) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_a_rebuild_after_a_change_that_kept_size_and_mtime_ships_the_new_content(
    registry, busybox_base, tmp_path
):
    ws = _tree(tmp_path / "ws")
    args = ("--image", busybox_base, "--workspace", str(ws), "--repo", f"{registry.host}/kept")
    first = ok(build(*args, "--compression", "gzip"))
    before = os.lstat(ws / "b.txt")
    (ws / "b.txt").write_text("BEE\n")
    os.utime(ws / "b.txt", ns=(before.st_atime_ns, before.st_mtime_ns))
    second = ok(build(*args, "--compression", "gzip"))
    assert second != first
    assert b"BEE\n" in _layer_files(registry, "kept", second).values()


def test_an_unchanged_workspace_is_found_without_reading_a_file(
    registry, busybox_base, tmp_path, monkeypatch
):
    ws = _tree(tmp_path / "ws")
    repo = f"{registry.host}/unread"
    first = workspace_image(busybox_base, ws, repo)
    monkeypatch.setattr(index, "RACY_NS", -SECOND)  # as if the files were long written

    def no_read(*args, **kwargs):
        raise AssertionError("a file was read")

    monkeypatch.setattr(layer, "_read_small", no_read)
    registry.requests()
    again = workspace_image(busybox_base, ws, repo)
    assert (again.reference, again.reused) == (first.reference, True)
    assert [r.method for r in registry.requests()] == ["HEAD", "HEAD"]  # the base, the tag
