""".dockerignore patterns, matched as the Docker SDK matches them, at a fraction of the cost.

The SDK (``docker.utils.build.PatternMatcher``, after moby's fileutils) is the reference:
patterns are normalised the same way, translated to the same regular expressions and
applied with the same rules (matched lower-cased; a pattern of N components also matches
a path whose first N parent components it matches; the last matching pattern wins, ``!``
re-includes; ``.dockerignore`` and ``Dockerfile`` are always kept). What differs is cost:
the SDK re-derives every path's parents for every pattern, about 70 us a file; here the
patterns are compiled once, parents are matched once per directory, and a screen (a dict
lookup on a name's first and last characters, then a prefix or suffix test; one combined
expression for the other patterns) rules out most files in a few calls.
``tests/image/test_workspace.py`` holds the two to the same answers.

A matcher may also hold *secret* patterns (``launcher.image.workspace.SECRET_PATTERNS``):
lines read as if they headed the ``.dockerignore``, so the user's own lines come later and
win, a ``!`` line bringing a file back as Docker's rules say. ``matches`` tells what left a
name out, so the walk can name what only the secret lines left out.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

# What the SDK adds: exclude_paths keeps the Dockerfile, PatternMatcher the ignore file.
ALWAYS_KEPT = ("!Dockerfile", "!.dockerignore")
_WILDCARDS = frozenset("*?[\\")


class Match(enum.Enum):
    """What the last pattern to match a path says (a path no pattern matches is kept)."""

    IGNORED = "ignored"  # by a line of .dockerignore or a default
    SECRET = "secret"  # by a secret pattern, and nothing later
    KEPT = "kept"  # by a ``!`` line
    KEPT_SECRET = "kept secret"  # by a ``!`` line, where a secret pattern matches too


_LEFT_OUT = frozenset((Match.IGNORED, Match.SECRET))


def parse(text: str) -> list[str]:
    """Patterns of a .dockerignore file: one a line, blank lines and # comments skipped."""
    stripped = (line.strip() for line in text.splitlines())
    return [line for line in stripped if line and not line.startswith("#")]


def _components(pattern: str) -> list[str]:
    """The SDK's ``Pattern.normalize``: split on /, drop empty and "." parts, fold "..".

    "For historical reasons, the pattern . is ignored" (Docker reference).
    """
    parts = [p for p in pattern.strip().split("/") if p and p != "."]
    i = 0
    while i < len(parts):
        if parts[i] == "..":
            del parts[i]
            if i > 0:
                del parts[i - 1]
                i -= 1
        else:
            i += 1
    return parts


def _translate(pattern: str) -> str:
    """The SDK's fnmatch ``translate``: ``**`` spans directories, ``*`` and ``?`` do not."""
    i, n, out = 0, len(pattern), "^"
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            if i < n and pattern[i] == "*":
                i += 1
                if i < n and pattern[i] == "/":
                    i += 1
                out += ".*" if i >= n else "(.*/)?"
            else:
                out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            j = i
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out += "\\["
            else:
                stuff = pattern[i:j].replace("\\", "\\\\")
                i = j + 1
                if stuff[0] == "!":
                    stuff = "^" + stuff[1:]
                elif stuff[0] == "^":
                    stuff = "\\" + stuff
                out += f"[{stuff}]"
        else:
            out += re.escape(c)
    return out + "$"


@dataclass(frozen=True)
class _Pattern:
    exclusion: bool
    depth: int  # components
    text: str  # components joined by /
    regex: re.Pattern[str]

    def reaches(self, depth: int) -> bool:
        """Whether it can match a whole path of ``depth`` components: without ``**`` a
        pattern's wildcards never cross a /, so only paths of its own depth."""
        return self.depth == depth or "**" in self.text


@dataclass(frozen=True)
class _Screen:
    """Tests that rule out most paths of one depth: a path may match only if its last name
    starts with one of ``heads[name[:head]]``, ends with one of ``tails[name[-tail:]]`` (the
    keys, a name's first and last few characters, rule out most names in one dict lookup
    where a tuple of twenty prefixes would be tried one by one) or matches ``by_name``, or
    the whole path matches ``by_path``."""

    head: int
    heads: dict[str, tuple[str, ...]]
    tail: int
    tails: dict[str, tuple[str, ...]]
    by_name: re.Pattern[str] | None
    by_path: re.Pattern[str] | None

    @classmethod
    def of(cls, starts: list[str], ends: list[str], names: list[str], paths: list[str]) -> _Screen:
        head = min([2, *map(len, starts)])  # a prefix shorter than the key: key on less
        tail = min([3, *map(len, ends)])  # suffixes are never empty
        heads: dict[str, tuple[str, ...]] = {}
        tails: dict[str, tuple[str, ...]] = {}
        for start in starts:
            heads[start[:head]] = (*heads.get(start[:head], ()), start)
        for end in ends:
            tails[end[-tail:]] = (*tails.get(end[-tail:], ()), end)
        return cls(
            head,
            heads,
            tail,
            tails,
            re.compile("|".join(names)) if names else None,
            re.compile("|".join(paths)) if paths else None,
        )

    def may_match(self, path: str) -> bool:
        """Whether ``path`` (lower-cased) may match: ``Matcher.matches`` inlines this."""
        name = path.rpartition("/")[2]
        start = self.heads.get(name[: self.head])
        end = self.tails.get(name[-self.tail :])
        return (
            (start is not None and name.startswith(start))
            or (end is not None and name.endswith(end))
            or (self.by_name is not None and self.by_name.match(name) is not None)
            or (self.by_path is not None and self.by_path.match(path) is not None)
        )


class Matcher:
    """Whether a workspace path is ignored; paths are relative, /-separated. ``secrets``:
    patterns read before ``patterns`` whose matches ``matches`` tells apart."""

    def __init__(self, patterns: Sequence[str], secrets: Sequence[str] = ()) -> None:
        compiled = []
        self._secrets = 0  # the first patterns: the secret ones
        for i, raw in enumerate([*secrets, *patterns, *ALWAYS_KEPT]):
            exclusion = raw.startswith("!")
            parts = _components(raw[1:] if exclusion else raw)
            if not parts:
                continue
            text = "/".join(parts)
            regex = re.compile(_translate(text.lower()))  # the SDK lower-cases both sides
            compiled.append(_Pattern(exclusion, len(parts), text, regex))
            if i < len(secrets):
                self._secrets = len(compiled)
        self.patterns = tuple(compiled)
        self._reincluded = tuple(p.text for p in compiled if p.exclusion)
        self._screens: dict[int, _Screen] = {}
        self._matched_none = (False,) * len(compiled)

    def _screen(self, depth: int) -> _Screen:
        """What rules out most paths of ``depth`` components in a few calls: for the patterns
        ``**/...NAME`` (its ``(.*/)?`` takes any leading directories, and no wildcard but
        ``**`` crosses a /, so a path it matches ends in a name NAME matches), string tests
        on that last name where NAME has one ``*`` at most (``.env*``: its prefix; ``*.pem``:
        its suffix; a plain name: itself as a prefix) and one expression for the rest of the
        one-name patterns; one expression for the other patterns, on the whole path. Each
        test may let through a name no pattern matches (``.github`` for ``.git``,
        ``config.json`` for ``**/.docker/config.json``), never the reverse: ``match``
        decides."""
        found = self._screens.get(depth)
        if found is None:
            starts: list[str] = []
            ends: list[str] = []
            names, paths = [], []
            for p in self.patterns:
                if not p.reaches(depth):
                    continue
                tail = p.text.lower()[3:]
                last = tail.rpartition("/")[2]
                if not (p.text.startswith("**/") and "**" not in tail):
                    paths.append(f"(?:{p.regex.pattern})")
                elif _WILDCARDS.isdisjoint(last.replace("*", "", 1)):
                    head, star, rest = last.partition("*")
                    if star and rest:
                        ends.append(rest)
                    else:
                        starts.append(head)
                elif "/" in tail:
                    paths.append(f"(?:{p.regex.pattern})")
                else:
                    names.append(f"(?:{_translate(tail)})")
            found = self._screens[depth] = _Screen.of(starts, ends, names, paths)
        return found

    def parents(self, parent: str) -> tuple[bool, ...]:
        """Per pattern, whether it matches ``parent``'s leading components (the SDK's second
        test); the same for every entry of one directory, so computed once for it. A pattern
        of N components meets the first N only, so the screens of each length rule out most
        directories before any pattern is tried."""
        if not parent:
            return self._matched_none
        dirs = parent.lower().split("/")
        heads = ["/".join(dirs[:n]) for n in range(1, len(dirs) + 1)]
        if not any(self._screen(n).may_match(head) for n, head in enumerate(heads, 1)):
            return self._matched_none
        return tuple(
            p.depth <= len(dirs) and p.regex.match(heads[p.depth - 1]) is not None
            for p in self.patterns
        )

    def matches(self, rel_dir: str, names: Sequence[str]) -> dict[str, Match]:
        """What the last pattern to match says of each of ``names``, the entries of
        directory ``rel_dir`` (names no pattern matches are left out of the answer): what
        depends on the directory alone (its parents' matches, the patterns its entries can
        meet) is worked out once, and the screens rule out most names in one pass over the
        list."""
        prefix = f"{rel_dir}/" if rel_dir else ""
        parents = self.parents(rel_dir)
        candidates: Collection[str] = names
        if not any(parents):
            screen = self._screen(rel_dir.count("/") + 2 if rel_dir else 1)
            head, heads, tail, tails = screen.head, screen.heads.get, screen.tail, screen.tails.get
            screened = {
                n
                for n in names
                if (
                    (start := heads((low := n.lower())[:head])) is not None
                    and low.startswith(start)
                )
                or ((end := tails(low[-tail:])) is not None and low.endswith(end))
            }
            if screen.by_name is not None:
                name_match = screen.by_name.match
                screened.update(n for n in names if name_match(n.lower()) is not None)
            if screen.by_path is not None:
                path_match = screen.by_path.match
                screened.update(n for n in names if path_match((prefix + n).lower()) is not None)
            candidates = screened
        found = {}
        for n in candidates:
            said = self.match(prefix + n, parents)
            if said is not None:
                found[n] = said
        return found

    def ignored_names(self, rel_dir: str, names: Sequence[str]) -> set[str]:
        """Which of ``names``, the entries of directory ``rel_dir``, are ignored."""
        return {n for n, said in self.matches(rel_dir, names).items() if said in _LEFT_OUT}

    def match(self, path: str, parents: tuple[bool, ...]) -> Match | None:
        """What the last pattern to match ``path`` says; None when none matches."""
        lowered = path.lower()
        patterns = self.patterns
        for i in range(len(patterns) - 1, -1, -1):  # the last to match decides
            pattern = patterns[i]
            if parents[i] or pattern.regex.match(lowered) is not None:
                if not pattern.exclusion:
                    return Match.SECRET if i < self._secrets else Match.IGNORED
                for j in range(min(i, self._secrets)):  # brought back from the secrets?
                    if parents[j] or patterns[j].regex.match(lowered) is not None:
                        return Match.KEPT_SECRET
                return Match.KEPT
        return None

    def ignored(self, path: str, parents: tuple[bool, ...]) -> bool:
        return self.match(path, parents) in _LEFT_OUT

    def may_reinclude(self, directory: str) -> bool:
        """An ignored directory is still walked when a ``!`` pattern starts with its path."""
        return any(text.startswith(directory) for text in self._reincluded)
