"""What the launcher writes on this machine is the user's alone, and no other local user can
take its directories first or steer its writes through a link (launcher.private).

The tests run as root and play the other user as uid 65534 (nobody): directories are handed to
it with chown, and its moves run under ``setpriv`` (util-linux), as that user would run them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from launcher import local, private
from launcher.errors import UnsafeDirectory
from tests.conftest import ROOT
from tests.support.local_jobs import one_node_requests
from tests.support.processes import required_or_skip

OTHER = 65534  # the machine's other user


@pytest.fixture(autouse=True)
def as_root() -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        required_or_skip("these tests play another user: they need root and setpriv")


def as_user(uid: int, *argv: str, env: dict[str, str] | None = None) -> str:
    """``argv`` run as ``uid`` (no groups); its stdout and stderr."""
    command = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    return done.stdout + done.stderr


def owned_by(path: Path, uid: int, mode: int) -> Path:
    """``path`` made a directory of ``uid`` with ``mode``."""
    path.mkdir()
    os.chown(path, uid, uid)
    path.chmod(mode)
    return path


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory any user may enter, as /tmp or a 0755 home directory is (pytest's own is
    root's alone, where the other user could not even look)."""
    path = Path(tempfile.mkdtemp(prefix="test-private-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def victim(tmp_path) -> Path:
    """A file of root's, 0600: what a link planted by another user would point at."""
    path = tmp_path / "victim"
    path.write_bytes(b"root's own\n")
    path.chmod(0o600)
    return path


def _write(home: Path) -> None:
    private.write(home / "record.json", b"new")


def _append(home: Path) -> None:
    descriptor = private.append(home / "record.json")
    os.write(descriptor, b"a log line\n")
    os.close(descriptor)


def _create(home: Path) -> None:
    private.create(home / "record.json", b"export TOKEN=s3cret\n", 0o644)


@pytest.mark.parametrize("writer", [_write, _append, _create], ids=lambda w: w.__name__)
def test_no_write_follows_a_link(tmp_path, victim, writer: Callable[[Path], None]):
    """A link at a name the launcher writes, or at the temporary name ``write`` used to take
    (``.NAME.PID.tmp``), is refused or replaced, never followed: the file it points at keeps
    its bytes and its mode (open(2): O_NOFOLLOW fails on a link, O_CREAT|O_EXCL "symbolic links
    are not followed"; rename(2) replaces the link itself). Before, ``write`` truncated and
    filled the file the tmp name's link pointed at, and the secret file and the start gate
    were chmod-ed through a link."""
    home = private.directory(tmp_path / "state")
    (home / "record.json").symlink_to(victim)
    (home / f".record.json.{os.getpid()}.tmp").symlink_to(victim)
    with contextlib.suppress(OSError, UnsafeDirectory):
        writer(home)
    assert victim.read_bytes() == b"root's own\n"
    assert victim.stat().st_mode & 0o777 == 0o600
    assert (home / "record.json").is_symlink() or (home / "record.json").read_bytes() == b"new"


def _subdirectory(home: Path) -> None:
    private.subdirectory(home / "record.json", 0o755)


@pytest.mark.parametrize("writer", [_create, _subdirectory], ids=lambda w: w.__name__)
def test_a_linked_secret_file_or_start_gate_is_refused(tmp_path, writer):
    """The secret file and the start gate are new names in a new directory: anything already
    there, here a link to a directory of root's, is an error, and the directory keeps its mode
    (the gate was made with mkdir(exist_ok=True) and chmod 0755 through the link)."""
    target = tmp_path / "roots"
    target.mkdir(mode=0o700)
    home = private.directory(tmp_path / "runtime")
    (home / "record.json").symlink_to(target)
    with pytest.raises(FileExistsError):
        writer(home)
    assert target.stat().st_mode & 0o777 == 0o700 and not list(target.iterdir())


def test_a_directory_another_user_owns_is_refused_and_left_as_it_is(tmp_path):
    """Root may chmod another user's directory, but it stays theirs: they can chmod it back
    and read or replace what root put in it. So a state, cache or stand-in directory of
    someone else's is refused, one line naming it and its owner (exit 1: the machine's setup,
    not the command), where ``directory`` used to chmod it 0700 and go on."""
    state = owned_by(tmp_path / "state", OTHER, 0o777)
    with pytest.raises(UnsafeDirectory) as refused:
        private.directory(state / "jobs", own_from=state)
    assert str(refused.value).startswith(f"{state}: owned by uid {OTHER}, not by you (uid 0)")
    assert refused.value.exit_code == 1
    assert state.stat().st_mode & 0o777 == 0o777 and not (state / "jobs").exists()


def test_a_linked_state_directory_is_refused(tmp_path):
    """A link where the launcher's directory should be is not followed (O_NOFOLLOW): the
    directory it points at keeps its mode and gets nothing."""
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o755)
    (tmp_path / "state").symlink_to(target)
    with pytest.raises(UnsafeDirectory, match="a symbolic link or a file, not a directory"):
        private.directory(tmp_path / "state" / "jobs", own_from=tmp_path / "state")
    assert target.stat().st_mode & 0o777 == 0o755 and not list(target.iterdir())


@pytest.mark.parametrize(
    ("owner", "mode", "used"), [(0, 0o700, True), (OTHER, 0o700, False), (0, 0o755, False)]
)
def test_xdg_runtime_dir_is_used_only_when_it_is_the_users_alone(
    shared, monkeypatch, owner, mode, used
):
    """The XDG Base Directory spec: $XDG_RUNTIME_DIR "MUST be owned by the user, and they MUST
    be the only one having read and write access to it. Its Unix access mode MUST be 0700"
    (Mercurial's chg ignores it otherwise, too). `sudo` can hand root another user's, who could
    then rename what root makes in it: the launcher uses /dev/shm instead. Each attempt's
    directory is new, 0700 and the user's."""
    runtime = owned_by(shared / "run", owner, mode)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    made = [private.job_runtime("local-x:1") for _ in range(2)]
    try:
        assert made[0] != made[1]
        assert all((p.parent == runtime) is used for p in made)
        assert all((p.stat().st_uid, p.stat().st_mode & 0o777) == (0, 0o700) for p in made)
    finally:
        for path in made:
            private.forget_runtime(path)
    assert not any(p.exists() for p in made)


def test_a_name_taken_in_dev_shm_first_stops_no_one(shared):
    """Without $XDG_RUNTIME_DIR a non-root user's runtime directory was /dev/shm/efa-batch-UID:
    another user who made that name first kept it (the sticky bit lets nobody else remove it),
    and every local run of the first failed at its chmod. Now each attempt's directory has a
    name of its own (mkdtemp): the squatter's name is ignored and nothing lands in it."""
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm here")
    uid = random.randrange(20000, 60000)
    squatted = Path(f"/dev/shm/efa-batch-{uid}")
    shutil.rmtree(squatted, ignore_errors=True)
    owned_by(squatted, OTHER, 0o777)
    probe = (
        "import os\nfrom launcher import private\n"
        "path = private.job_runtime('local-x')\n"
        "st = os.stat(path)\nprint(path, st.st_uid, oct(st.st_mode & 0o777))\n"
    )
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        said = as_user(uid, sys.executable, "-c", probe, env=env)
        made = Path(said.split()[0])
        assert said.split()[1:] == [str(uid), "0o700"], said
        assert made.parent == Path("/dev/shm") and made != squatted
        assert not list(squatted.iterdir())
    finally:
        shutil.rmtree(squatted, ignore_errors=True)
        for path in Path("/dev/shm").glob("efa-batch-local-x.*"):
            if path.stat().st_uid == uid:
                shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize(("mode", "refused"), [("0777", True), ("1777", False)])
def test_a_dev_shm_where_others_may_rename_is_refused(mode, refused):
    """/dev/shm is sticky on every distribution (1777), so what the user makes there only they
    and root may rename (inode(7), "The sticky bit"). On a machine where it is not, another
    user could swap the job's directory after mkdtemp: refused in one line (exit 1) that says
    so. Played in a mount namespace of the test's own, with a tmpfs of that mode on /dev/shm."""
    probe = (
        "from launcher import private\nfrom launcher.errors import LauncherError\n"
        "try:\n    print(private.job_runtime('local-x'))\n"
        "except LauncherError as exc:\n    print(exc.exit_code, exc)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    script = f'mount -t tmpfs -o mode={mode} none /dev/shm && exec "$@"'
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script, "sh", sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    if "mount" in done.stderr or "unshare" in done.stderr:
        required_or_skip(f"no mount namespace here: {done.stderr.strip()}")
    said = done.stdout.strip()
    if refused:
        assert said.startswith("1 /dev/shm: others may write it and it is not sticky"), said
    else:
        assert said.startswith("/dev/shm/efa-batch-local-x."), said + done.stderr


# --- a local run, with another user on the machine --------------------------------------------


@pytest.fixture
def local_env(docker_engine, tmp_path, monkeypatch) -> Path:
    """The library's local backend on the test engine, its state in the test's directory."""
    monkeypatch.setenv("DOCKER_HOST", docker_engine.host)
    monkeypatch.setenv("LAUNCHER_LOCAL_STATE", str(tmp_path / "state"))
    return tmp_path


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


# The other user, knowing a waiting job's id and its supervisor's pid (both in `ps`: the
# supervisor's command line names the job), makes the job's directory first, with a link at
# the temporary name the secret file was written under.
PLANT = """
mkdir -m 777 "$1/efa-batch/$2" && ln -s "$4" "$1/efa-batch/$2/.attempt-1-node-0.sh.$3.tmp"
"""
READ = 'cat "$1" 2>/dev/null; find "$0" -type f -exec cat {} + 2>/dev/null; true'


def test_another_users_runtime_directory_never_gets_a_secret(
    local_env, shared, monkeypatch, busybox_base, docker_engine, victim
):
    """`sudo` hands root the invoking user's $XDG_RUNTIME_DIR, and that user made efa-batch
    in it. Before: root kept a waiting job's secrets in a directory the user made first,
    chmod-ed it 0700 (it stayed theirs) and wrote the secret there, through the user's link
    into a file of root's, left 0644. Now the launcher writes nothing there (its directory is
    new, random, in /dev/shm), and the other user reads the secret neither there nor where it
    is, and root's file is untouched."""
    value = "s3cret-" + os.urandom(6).hex()
    secrets = local_env / "secrets.json"
    secrets.write_text(json.dumps({"team/wandb": value}))
    runtime = owned_by(shared / "run-other", OTHER, 0o700)
    owned_by(runtime / "efa-batch", OTHER, 0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    efs = local_env / "efs"
    backend = local.LocalBackend("q", str(efs), secrets_file=secrets)
    first = backend.schedule(
        one_node_requests('until [ -e "$LAUNCHER_EFS/go" ]; do sleep 0.1; done', busybox_base)
    )
    waiting = backend.schedule(
        one_node_requests(
            'printf %s "$WANDB_API_KEY" | sha256sum; '
            'until [ -e "$LAUNCHER_EFS/done" ]; do sleep 0.1; done',
            busybox_base,
            after=[first],
            secrets={"WANDB_API_KEY": "team/wandb"},
        )
    )
    store = local.Store()
    supervisor = store.load(waiting).writer
    assert supervisor is not None
    as_user(
        OTHER, "sh", "-c", PLANT, "plant", str(runtime), waiting, str(supervisor.pid), str(victim)
    )
    (efs / "go").touch()
    _wait_for(lambda: bool(store.load(waiting).containers), "the waiting job's start")
    container = docker_engine.client().containers.get(store.load(waiting).containers[0])
    (delivered,) = [m["Source"] for m in container.attrs["Mounts"] if "secrets" in m["Destination"]]
    read = as_user(OTHER, "sh", "-c", READ, str(runtime), delivered)
    (efs / "done").touch()
    assert local.LocalBackend().wait(waiting, timeout=60).state == "SUCCEEDED"
    lines = [line.message for line in local.LocalBackend().log_iter(waiting, node=0)]
    assert f"{hashlib.sha256(value.encode()).hexdigest()}  -" in lines  # the job had it
    assert value not in read
    assert (victim.read_bytes(), victim.stat().st_mode & 0o777) == (b"root's own\n", 0o600)
    assert not Path(delivered).is_relative_to(runtime)


def test_the_efs_stand_in_and_its_checkpoints_are_the_users_alone(
    local_env, shared, busybox_base, docker_engine
):
    """A job's checkpoints land in the EFS stand-in as the container's root writes them (0644
    with Docker's umask); the stand-in was made 0755, so any local user read them. Now it is
    made 0700 and the user's; the container, root with CAP_DAC_OVERRIDE (Docker's default
    capabilities), still writes in it."""
    efs = shared / "home" / "efs"
    efs.parent.mkdir(mode=0o755)
    backend = local.LocalBackend("q", str(efs))
    job_id = backend.schedule(
        one_node_requests('echo weights > "$LAUNCHER_EFS/checkpoint.pt"', busybox_base)
    )
    assert local.LocalBackend().wait(job_id, timeout=60).state == "SUCCEEDED"
    assert (efs / "checkpoint.pt").read_text() == "weights\n"
    assert (efs.stat().st_uid, efs.stat().st_mode & 0o777) == (0, 0o700)
    assert "weights" not in as_user(OTHER, "cat", str(efs / "checkpoint.pt"))
