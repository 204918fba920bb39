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


def tree(entries: Iterable[Entry], digests: dict[str, str]) -> Tree:
    """The state a layer of ``entries`` ships (what a delta is computed against): an entry's
    state is "kind mode size digest link" (kind as its tar type flag's byte value)."""
    get = digests.get
    return {e[0]: f"{e[1][0]} {e[2]} {e[4]} {get(e[0], '')} {e[3]}" for e in entries}


@dataclass(frozen=True)
class Delta:
    entries: tuple[Entry, ...]  # to write, in layer order
    whiteouts: tuple[str, ...]  # paths of the full layer that are gone (topmost only)
    bytes: int  # file bytes the delta carries


def delta(base: Tree, current: Tree, entries: tuple[Entry, ...]) -> Delta:
    """What turns the state ``base`` into ``current``, the state of ``entries`` (sorted, as a
    workspace scan gives). The comparison is of whole states, as sets (a C loop, not 50,000
    Python steps)."""
    changed = {path for path, _ in current.items() - base.items()}
    for path in list(changed):  # parents too: their modes, should they be new
        parent = path.rpartition("/")[0]
        while parent and parent not in changed:
            if parent in current:
                changed.add(parent)
            parent = parent.rpartition("/")[0]
    gone = sorted(base.keys() - current.keys(), key=sort_key)
    topmost: list[str] = []
    for path in gone:  # component-wise: a directory comes right before its contents
        if not topmost or not path.startswith(topmost[-1] + "/"):
            topmost.append(path)
    shipped = tuple(e for e in entries if e[0] in changed) if changed else ()
    return Delta(shipped, tuple(topmost), sum(e.size for e in shipped))


def size(full: Tree) -> int:
    """File bytes of a state."""
    return sum(int(s.split(" ", 3)[2]) for s in full.values())


def worth_it(change: Delta, full_bytes: int) -> bool:
    return change.bytes <= MAX_FRACTION * max(full_bytes, 1)
