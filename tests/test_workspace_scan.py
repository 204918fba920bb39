"""What a workspace ships: the same paths the Docker SDK's .dockerignore matcher keeps."""

from __future__ import annotations

import os
import socket

import pytest
from docker.utils.build import exclude_paths

from launcher.errors import UsageError
from launcher.image import workspace

TREE = [
    "README.md",
    "Dockerfile",
    "train.py",
    "src/model.py",
    "src/Model.PY",
    "src/data/loader.py",
    "src/data/cache.tmp",
    "src/a-b/c.py",
    "src/a/b.py",
    "logs/run1/out.log",
    "logs/run1/keep.log",
    "logs/keep.txt",
    "docs/build/html/index.html",
    "docs/conf.py",
    "weights/big.bin",
    "weights/small.bin",
    "deep/x/y/z/file.txt",
    "notes.secret",
    ".env",
    "sub/.git/HEAD",
]

PATTERN_SETS = [
    [],
    ["*.secret", ".env"],
    ["logs", "!logs/keep.txt"],
    ["logs/**", "!logs/run1/keep.log"],
    ["**/*.tmp", "docs/build"],
    ["weights/*", "!weights/small.bin"],
    ["*", "!src", "!train.py"],
    ["src/*/*.py"],
    ["**/data", "deep/x"],
    ["./README.md", "src/../train.py", "/docs/"],
    ["src/model.py", "[a-c]*/**"],
    ["?ocs", "!docs/conf.py"],
    ["*.PY"],
    ["Dockerfile", ".dockerignore"],
]


def _make(root):
    for rel in TREE:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rel)
    return root


@pytest.mark.parametrize("patterns", PATTERN_SETS, ids=lambda p: " ".join(p) or "none")
def test_the_same_paths_as_the_docker_sdk(tmp_path, patterns):
    root = _make(tmp_path / "ws")
    (root / ".dockerignore").write_text("# a comment\n\n" + "\n".join(patterns) + "\n")
    ours = {e.path for e in workspace.scan(root).entries}
    all_patterns = list(workspace.DEFAULT_IGNORES) + patterns
    theirs = {p for p in exclude_paths(str(root), all_patterns) if p and p != "."}
    assert ours == theirs


def test_entries_are_sorted_component_wise_with_their_stat(tmp_path):
    root = _make(tmp_path / "ws")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o750)
    (root / "link").symlink_to("run.sh")
    scanned = workspace.scan(root)
    paths = [e.path for e in scanned.entries]
    assert paths == sorted(paths, key=lambda p: p.split("/"))
    assert paths.index("src/a/b.py") < paths.index("src/a-b")  # by components, not by text
    by_path = {e.path: e for e in scanned.entries}
    assert (by_path["run.sh"].kind, by_path["run.sh"].mode) == (workspace.FILE, 0o750)
    assert (by_path["link"].kind, by_path["link"].link) == (workspace.SYMLINK, "run.sh")
    assert by_path["src"].kind == workspace.DIRECTORY
    st = os.lstat(root / "README.md")
    assert (by_path["README.md"].size, by_path["README.md"].ino) == (st.st_size, st.st_ino)


def test_virtual_environments_are_skipped_whatever_their_name(tmp_path):
    root = _make(tmp_path / "ws")
    (root / "myenv" / "lib").mkdir(parents=True)
    (root / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    (root / "myenv" / "lib" / "site.py").write_text("")
    assert not any(e.path.startswith("myenv") for e in workspace.scan(root).entries)


def test_a_socket_is_one_line(tmp_path):
    root = _make(tmp_path / "ws")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "agent.sock"))
    try:
        with pytest.raises(UsageError, match="agent.sock is not a file, directory or symlink"):
            workspace.scan(root)
        (root / ".dockerignore").write_text("*.sock\n")
        assert "agent.sock" not in {e.path for e in workspace.scan(root).entries}
    finally:
        server.close()
