"""What a workspace ships: the same paths the Docker SDK's .dockerignore matcher keeps."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading

import pytest
from docker.utils.build import exclude_paths

from launcher.errors import UsageError
from launcher.image import scan_ahead, workspace

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
    ".aws/credentials",
    "id_rsa",
    "keys/server.PEM",
    "src/.env.local",
    "src/credentials_test.py",
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
    ["!.env", "!**/*.pem"],
    ["*", "!src", "!id_rsa"],
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
    # The secret patterns head the file: the user's lines come later and win.
    all_patterns = [*workspace.SECRET_PATTERNS, *workspace.DEFAULT_IGNORES, *patterns]
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


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks on Linux")


def _fresh_process(script: str, root: os.PathLike[str]) -> str:
    """``script`` run by a new interpreter with ``root`` as ``ROOT``: as the CLI runs, with
    one thread (this one has more: aws-cdk-lib's jsii kernel keeps a reader thread)."""
    prelude = (
        "import os, sys\n"
        "from launcher.errors import UsageError\n"
        "from launcher.image import scan_ahead, workspace\n"
        "ROOT = sys.argv[1]\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(script), os.fspath(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@linux_only
def test_a_walk_started_ahead_is_the_walk_as_it_was_when_it_started(tmp_path):
    """The CLI walks the workspace in a child while it imports: the entries come back as
    an in-process walk gives them (stat, links, .dockerignore, a name that is not UTF-8),
    as they were when the walk ran (waitid(2), WNOWAIT: "leave the child in a waitable
    state", so the test knows the walk is over before it adds a file)."""
    root = _make(tmp_path / "ws")
    (root / ".dockerignore").write_text("*.secret\n")
    (root / "link").symlink_to("train.py")
    os.close(os.open(os.path.join(os.fsencode(root), b"caf\xe9.txt"), os.O_CREAT | os.O_WRONLY))
    _fresh_process(
        """
        before = workspace.scan(ROOT)
        pid = scan_ahead.start(ROOT)
        assert pid is not None
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        open(os.path.join(ROOT, "added later.py"), "w").close()
        walked = scan_ahead.scanned(ROOT)
        assert walked.root == before.root
        assert walked.entries == before.entries
        assert walked.stamps == before.stamps  # the same bytes hashed, not marshalled again
        assert all(type(e) is workspace.Entry for e in walked.entries)
        assert "added later.py" in {e.path for e in scan_ahead.scanned(ROOT).entries}
        """,
        root,
    )


@linux_only
def test_a_walk_ahead_that_fails_is_walked_again_and_says_why(tmp_path):
    root = _make(tmp_path / "ws")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "agent.sock"))
    try:
        said = _fresh_process(
            """
            pid = scan_ahead.start(ROOT)
            assert pid is not None
            try:
                scan_ahead.scanned(ROOT)
            except UsageError as error:
                print(error)
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                print("reaped")
            """,
            root,
        )
    finally:
        server.close()
    assert said.splitlines() == [
        f"--workspace: {root}/agent.sock is not a file, directory or symlink",
        "reaped",  # no zombie left behind
    ]


@linux_only
def test_a_walk_ahead_reaped_by_someone_else_is_walked_again(tmp_path):
    """A SIGCHLD handler or a library's waitpid(-1) may reap the child first: its exit
    status is then lost, so nothing vouches for what it wrote and the walk runs again."""
    root = _make(tmp_path / "ws")
    _fresh_process(
        """
        pid = scan_ahead.start(ROOT)
        os.waitpid(pid, 0)
        open(os.path.join(ROOT, "added later.py"), "w").close()
        assert "added later.py" in {e.path for e in scan_ahead.scanned(ROOT).entries}
        """,
        root,
    )


def test_a_process_with_threads_walks_in_process(tmp_path):
    """fork(2) copies only the calling thread: locks other threads hold stay held in the
    child. With a second thread running, nothing forks."""
    root = _make(tmp_path / "ws")
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert scan_ahead.start(root) is None
    finally:
        stop.set()
        other.join()
    assert scan_ahead.scanned(root).entries == workspace.scan(root).entries
