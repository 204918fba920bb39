"""A workspace that changed a little ships as a little layer over the full one.

Once a workspace's full layer is in the repository, a later state of it can be that layer
plus a *delta*: the entries that differ from it (added or changed files, directories and
links, with their parent directories) and a whiteout for each path it had that is gone
(OCI image spec, layer.md: ``.wh.<name>`` hides the path in the layers below, and applies
to lower layers only). The delta is cumulative, always against the last full layer, so an
image has at most two workspace layers; once it would carry more than ``MAX_FRACTION`` of
the full layer's bytes, the next build is full again (and becomes the new base of deltas).

Pure: a tree is ``path -> "kind mode size digest link"`` (one string an entry: the cheapest
to store, load and compare for 50,000 files); no I/O here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from launcher.image.workspace import Entry, sort_key

MAX_FRACTION = 0.25  # of the full layer's bytes: past it, a full layer again

Tree = dict[str, str]  # path -> "kind mode size digest link"


def state(e: Entry, digests: dict[str, str]) -> str:
    return f"{e.kind[0]} {e.mode} {e.size} {digests.get(e.path, '')} {e.link}"


def tree(entries: Iterable[Entry], digests: dict[str, str]) -> Tree:
    """The state a layer of ``entries`` ships (what a delta is computed against)."""
    return {e.path: state(e, digests) for e in entries}


@dataclass(frozen=True)
class Delta:
    entries: tuple[Entry, ...]  # to write, in layer order
    whiteouts: tuple[str, ...]  # paths of the full layer that are gone (topmost only)
    bytes: int  # file bytes the delta carries


def delta(base: Tree, entries: tuple[Entry, ...], digests: dict[str, str]) -> Delta:
    """What turns the state ``base`` into ``entries`` (sorted, as a workspace scan gives)."""
    get = base.get
    changed = {e.path for e in entries if get(e.path) != state(e, digests)}
    by_path = {e.path: e for e in entries}
    for path in list(changed):  # parents too: their modes, should they be new
        parent = path.rpartition("/")[0]
        while parent and parent not in changed:
            if parent in by_path:
                changed.add(parent)
            parent = parent.rpartition("/")[0]
    gone = sorted((p for p in base if p not in by_path), key=sort_key)
    topmost: list[str] = []
    for path in gone:  # component-wise: a directory comes right before its contents
        if not topmost or not path.startswith(topmost[-1] + "/"):
            topmost.append(path)
    shipped = tuple(e for e in entries if e.path in changed)
    return Delta(shipped, tuple(topmost), sum(e.size for e in shipped))


def size(full: Tree) -> int:
    """File bytes of a state."""
    return sum(int(s.split(" ", 3)[2]) for s in full.values())


def worth_it(change: Delta, full_bytes: int) -> bool:
    return change.bytes <= MAX_FRACTION * max(full_bytes, 1)
