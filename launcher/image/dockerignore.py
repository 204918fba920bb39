""".dockerignore patterns, matched as the Docker SDK matches them, at a fraction of the cost.

The SDK (``docker.utils.build.PatternMatcher``, after moby's fileutils) is the reference:
patterns are normalised the same way, translated to the same regular expressions and
applied with the same rules (matched lower-cased; a pattern of N components also matches
a path whose first N parent components it matches; the last matching pattern wins, ``!``
re-includes; ``.dockerignore`` and ``Dockerfile`` are always kept). What differs is cost:
the SDK re-derives every path's parents for every pattern, about 70 us a file; here the
patterns are compiled once, parents are matched once per directory, and one combined
expression rules out most files in a single call. ``tests/test_workspace_scan.py`` holds
the two to the same answers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# What the SDK adds: exclude_paths keeps the Dockerfile, PatternMatcher the ignore file.
ALWAYS_KEPT = ("!Dockerfile", "!.dockerignore")


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


class Matcher:
    """Whether a workspace path is ignored; paths are relative, /-separated."""

    def __init__(self, patterns: Sequence[str]) -> None:
        compiled = []
        for raw in [*patterns, *ALWAYS_KEPT]:
            exclusion = raw.startswith("!")
            parts = _components(raw[1:] if exclusion else raw)
            if not parts:
                continue
            text = "/".join(parts)
            regex = re.compile(_translate(text.lower()))  # the SDK lower-cases both sides
            compiled.append(_Pattern(exclusion, len(parts), text, regex))
        self.patterns = tuple(compiled)
        self._reincluded = tuple(p.text for p in compiled if p.exclusion)
        self._screens: dict[int, tuple[re.Pattern[str], re.Pattern[str]]] = {}

    def _screen(self, depth: int) -> tuple[re.Pattern[str], re.Pattern[str]]:
        """Two expressions that rule out most paths of ``depth`` components in a call each:
        one for the patterns that can only ever match a path's last name (``**/NAME``: its
        ``(.*/)?`` takes any leading directories, and NAME's wildcards never cross a /), on
        that name; one for the others, on the whole path."""
        found = self._screens.get(depth)
        if found is None:
            names, paths = [], []
            for p in self.patterns:
                if not p.reaches(depth):
                    continue
                tail = p.text.lower()[3:]
                if p.text.startswith("**/") and "/" not in tail and "**" not in tail:
                    names.append(f"(?:{_translate(tail)})")
                else:
                    paths.append(f"(?:{p.regex.pattern})")
            found = self._screens[depth] = (
                re.compile("|".join(names) or "(?!)"),
                re.compile("|".join(paths) or "(?!)"),
            )
        return found

    def parents(self, parent: str) -> tuple[bool, ...]:
        """Per pattern, whether it matches ``parent``'s leading components (the SDK's second
        test); the same for every entry of one directory, so computed once for it."""
        if not parent:
            return (False,) * len(self.patterns)
        dirs = parent.lower().split("/")
        return tuple(
            p.depth <= len(dirs) and p.regex.match("/".join(dirs[: p.depth])) is not None
            for p in self.patterns
        )

    def ignored_names(self, rel_dir: str, names: Sequence[str]) -> set[str]:
        """Which of ``names``, the entries of directory ``rel_dir``, are ignored: what depends
        on the directory alone (its parents' matches, the patterns its entries can meet) is
        worked out once, and the screens rule out most names in one pass over the list."""
        prefix = f"{rel_dir}/" if rel_dir else ""
        parents = self.parents(rel_dir)
        candidates: Sequence[str] = names
        if not any(parents):
            by_name, by_path = self._screen(rel_dir.count("/") + 2 if rel_dir else 1)
            name_match, path_match = by_name.match, by_path.match
            candidates = [
                n
                for n in names
                if name_match(n.lower()) is not None or path_match((prefix + n).lower()) is not None
            ]
        return {n for n in candidates if self.ignored(prefix + n, parents)}

    def ignored(self, path: str, parents: tuple[bool, ...]) -> bool:
        lowered = path.lower()
        matched = False
        for pattern, by_parent in zip(self.patterns, parents, strict=True):
            if by_parent or pattern.regex.match(lowered) is not None:
                matched = not pattern.exclusion
        return matched

    def may_reinclude(self, directory: str) -> bool:
        """An ignored directory is still walked when a ``!`` pattern starts with its path."""
        return any(text.startswith(directory) for text in self._reincluded)
