"""What the launcher remembers between runs about the account: a default security group found
fine, for an hour, so a run costs no extra call (the cache is per user, in the XDG cache)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from launcher import cache

FINE_FOR_SECONDS = 3600


def _path() -> Path:
    return cache.directory() / "default-groups.json"


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
    cache.write_atomically(_path(), json.dumps(found).encode())
