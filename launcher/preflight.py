"""What the launcher remembers between runs about the account: a default security group found
fine, for an hour, so a run costs no extra call (the cache is per user, in the XDG cache)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

FINE_FOR_SECONDS = 3600


def _path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "efa-batch" / "default-groups.json"


def _load() -> dict[str, float]:
    try:
        found = json.loads(_path().read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def recently_fine(group_id: str, now: float | None = None) -> bool:
    checked = _load().get(group_id)
    now = time.time() if now is None else now
    return isinstance(checked, (int, float)) and 0 <= now - checked < FINE_FOR_SECONDS


def remember_fine(group_id: str, now: float | None = None) -> None:
    """Best effort: a cache that cannot be written only costs the next run one call."""
    found = _load()
    found[group_id] = time.time() if now is None else now
    path = _path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(found))
        tmp.replace(path)
    except OSError:
        pass
