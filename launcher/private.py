"""Files the launcher writes on the user's machine are the user's alone.

Job records hold `--env` values and job definitions, node logs hold job output, the cache's
index holds every workspace file's sha256 (a weak secret's hash can be guessed offline): so
the launcher's own directories are 0700 and its files 0600, whatever the umask (which only
takes bits away from what ``os.open`` and ``mkdir`` ask for).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600


def directory(path: Path, *, own_from: Path | None = None) -> Path:
    """``path`` made if missing, and every directory from ``own_from`` (the launcher's root,
    default ``path`` alone) down to it made 0700; the directories above are left as they are."""
    path.mkdir(parents=True, exist_ok=True)
    top = own_from if own_from is not None and own_from in (path, *path.parents) else path
    for part in (path, *path.parents):
        os.chmod(part, DIRECTORY_MODE)
        if part == top:
            break
    return path


def write(path: Path, data: bytes) -> None:
    """Replace ``path`` whole with a 0600 file (a reader sees the old or the new one)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(descriptor, FILE_MODE)  # a leftover tmp file of another mode is reused
        with os.fdopen(descriptor, "wb") as out:
            descriptor = -1
            out.write(data)
    finally:
        if descriptor >= 0:
            os.close(descriptor)
    tmp.replace(path)


def append(path: Path) -> int:
    """A descriptor appending to ``path``, created 0600 if missing."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)


def runtime_directory() -> Path:
    """A directory of the user's alone on a tmpfs: ``$XDG_RUNTIME_DIR`` (systemd makes it per
    user, 0700, in memory), else one under /dev/shm; never a disk a value would outlive."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and Path(base).is_dir():
        top = Path(base) / "efa-batch"
    else:
        shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
        top = shm / f"efa-batch-{os.getuid()}"
    return directory(top, own_from=top)


def job_runtime(job_id: str) -> Path:
    """A local job's own 0700 directory in ``runtime_directory`` (its secrets, its start)."""
    top = runtime_directory()
    return directory(top / job_id.replace(":", "-"), own_from=top)


def forget_runtime(job_id: str) -> None:
    shutil.rmtree(runtime_directory() / job_id.replace(":", "-"), ignore_errors=True)
