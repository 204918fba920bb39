"""Files the launcher writes on the user's machine are the user's alone.

Job records hold `--env` values and job definitions, node logs hold job output, the cache's
index holds every workspace file's sha256 (a weak secret's hash can be guessed offline), a local
job's runtime directory its secrets: so the launcher's own directories are 0700 and its files
0600, whatever the umask (which only takes bits away from what ``os.open`` and ``mkdir`` ask
for).

Nor may another user steer a write. Where others may write (``/dev/shm``, ``/tmp``) a name can
be taken first, or be a symbolic link to a file of the user's. So the launcher's directories
are entered with ``O_NOFOLLOW`` and must be the user's; a runtime directory gets a random name
(``mkdtemp``) in a directory where nobody else may rename it; files are made with
``O_EXCL|O_NOFOLLOW``; and modes are set on a descriptor (``fchmod``), never on a path that
could be a link (open(2): "If the trailing component of pathname is a symbolic link, then the
open fails" with ``O_NOFOLLOW``; "if pathname already exists, then open() fails" with
``O_CREAT|O_EXCL``, "symbolic links are not followed").
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from pathlib import Path

from launcher.errors import UnsafeDirectory

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600
_ENTER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW


_MOVE_IT = "move it away (or have its owner remove it) and run again"
_RUNTIME = "set XDG_RUNTIME_DIR to a directory of yours alone (0700), or have it made 1777"


def _unsafe(path: Path, why: str, remedy: str = _MOVE_IT) -> UnsafeDirectory:
    return UnsafeDirectory(
        f"{path}: {why}; the launcher keeps your files only in directories of yours alone: "
        + remedy
    )


def _own(
    path: Path,
    name: str | Path | None = None,
    *,
    dir_fd: int | None = None,
    mode: int = DIRECTORY_MODE,
) -> int:
    """A descriptor of the directory ``path`` (``name`` in ``dir_fd``, if given), which must be
    a real directory of the user's, set to ``mode``; UnsafeDirectory otherwise."""
    try:
        descriptor = os.open(path if name is None else name, _ENTER, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _unsafe(path, "a symbolic link or a file, not a directory") from None
        raise
    found = os.fstat(descriptor)
    if found.st_uid != os.geteuid():
        os.close(descriptor)
        raise _unsafe(path, f"owned by uid {found.st_uid}, not by you (uid {os.geteuid()})")
    if stat.S_IMODE(found.st_mode) != mode:
        os.fchmod(descriptor, mode)
    return descriptor


def directory(path: Path, *, own_from: Path | None = None) -> Path:
    """``path`` made if missing, and every directory from ``own_from`` (the launcher's root,
    default ``path`` alone) down to it made 0700 and checked to be a real directory of the
    user's (UnsafeDirectory if not); the directories above are made if missing, else left as
    they are. Each is entered from the one above by descriptor, so none is followed as a link."""
    top = own_from if own_from is not None and own_from in (path, *path.parents) else path
    top.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        top.mkdir(DIRECTORY_MODE)
    descriptor = _own(top)
    try:
        here = top
        for name in path.relative_to(top).parts:
            here = here / name
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, DIRECTORY_MODE, dir_fd=descriptor)
            inner = _own(here, name, dir_fd=descriptor)
            os.close(descriptor)
            descriptor = inner
    finally:
        os.close(descriptor)
    return path


def subdirectory(path: Path, mode: int) -> Path:
    """A new directory ``path`` of mode ``mode`` (set on its descriptor); anything already
    there, a link included, is refused (FileExistsError), never followed."""
    os.mkdir(path, DIRECTORY_MODE)
    os.close(_own(path, mode=mode))
    return path


def create(path: Path, data: bytes, mode: int = FILE_MODE) -> None:
    """A new file ``path`` holding ``data``, of mode ``mode`` (set on its descriptor); anything
    already there, a link included, is refused (FileExistsError), never followed or truncated."""
    with os.fdopen(os.open(path, _NEW_FILE, FILE_MODE), "wb") as out:
        os.fchmod(out.fileno(), mode)
        out.write(data)


def write(path: Path, data: bytes) -> None:
    """Replace ``path`` whole with a 0600 file (a reader sees the old or the new one). The
    temporary file's name is random (``mkstemp``: ``O_EXCL|O_NOFOLLOW``), and the rename
    replaces a link at ``path`` rather than writing through it."""
    descriptor, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(descriptor, FILE_MODE)  # mkstemp asks for 0600, which a umask may narrow
        with os.fdopen(descriptor, "wb") as out:
            descriptor = -1
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        if descriptor >= 0:
            os.close(descriptor)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def append(path: Path) -> int:
    """A descriptor appending to ``path``, created 0600 if missing; a link is not followed."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, FILE_MODE)


def runtime_base() -> Path:
    """Where local jobs' runtime directories go, on a tmpfs (never a disk a secret would
    outlive): ``$XDG_RUNTIME_DIR`` when it is the user's alone, as the XDG Base Directory spec
    requires ("MUST be owned by the user ... Its Unix access mode MUST be 0700"; ``sudo`` may
    hand on another user's), else /dev/shm (else the temporary directory). That one must keep
    others from renaming what the user makes in it: theirs or root's, and sticky if others may
    write it (inode(7): in a sticky directory only a file's owner, the directory's owner and
    root may rename or delete it); UnsafeDirectory if not."""
    me = os.geteuid()
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        with contextlib.suppress(OSError):
            found = os.stat(xdg)
            if stat.S_ISDIR(found.st_mode) and found.st_uid == me and not found.st_mode & 0o077:
                return Path(xdg)
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    found = os.stat(base)
    if found.st_uid not in (me, 0):
        raise _unsafe(base, f"owned by uid {found.st_uid}, neither you nor root", _RUNTIME)
    if found.st_mode & 0o022 and not found.st_mode & stat.S_ISVTX:
        raise _unsafe(base, "others may write it and it is not sticky", _RUNTIME)
    return base


def job_runtime(job_id: str) -> Path:
    """A new 0700 directory of the user's for one attempt of a local job (its secrets, its start
    gate) in ``runtime_base``, named at random (``mkdtemp``), so that no one can take the name
    first; whoever made it keeps the path to find it again (``forget_runtime``)."""
    prefix = f"efa-batch-{job_id.replace(':', '-')}."
    made = Path(tempfile.mkdtemp(prefix=prefix, dir=runtime_base()))
    os.close(_own(made))  # mkdtemp asks for 0700, which a umask may narrow
    return made


def forget_runtime(path: str | os.PathLike[str] | None) -> None:
    """Remove a runtime directory ``job_runtime`` made (links in it are removed, not followed)."""
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)
