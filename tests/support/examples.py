"""The examples of README.md and docs/*.md as the tests run them (tests/project/test_demo.py).

Every fenced block is one of:
- ``console``: lines starting with ``$ `` are commands (a trailing backslash continues one),
  the rest is sample output, not compared. A page's commands run in one bash session, in
  order, so a variable set in one block (``JOB=$(launcher run ...)``) is there in the next.
- ``python``: a complete script, run with the same environment.
- ``text``, ``json``, ``yaml``, ``toml``, ``ini``, ``dockerfile``, ``diff``: shown, not run.
A console or python block that cannot run against the emulated stack (a real account, GPUs)
says so on the line before its fence: ``<!-- not run: REASON -->``. ``sh``/``bash``/``shell``
blocks are refused: a reader cannot tell a command from its output in them, and neither can
the test.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

RUN = ("console", "python")
SHOWN = ("text", "json", "yaml", "toml", "ini", "dockerfile", "diff")
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)\s*$")
NOT_RUN = re.compile(r"^\s*<!-- not run: (?P<why>.+?) -->\s*$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    not_run: str | None  # the reason, when the block says it cannot run here

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"

    def commands(self) -> list[str]:
        """A console block's commands, continuations joined."""
        commands: list[str] = []
        pending: str | None = None
        for line in self.text.splitlines():
            if pending is not None:
                pending += "\n" + line
            elif line.startswith("$ "):
                pending = line[2:]
            else:
                continue
            if not pending.endswith("\\"):
                commands.append(pending)
                pending = None
        if pending is not None:
            raise ValueError(f"{self.where}: a command ends in a backslash")
        return commands


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, with the reason it is not run, if it says one."""
    lines = path.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent = len(opening["indent"])
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(rf"^ {{0,{indent}}}```\s*$", lines[j]):
            body.append(lines[j][indent:] if lines[j][:indent].isspace() else lines[j])
            j += 1
        if j == len(lines):
            raise ValueError(f"{path.name}:{i + 1}: a fence that never closes")
        before = NOT_RUN.match(lines[i - 1]) if i else None
        found.append(
            Block(path, i + 1, opening["lang"], "\n".join(body), before["why"] if before else None)
        )
        i = j + 1
    return found


def refusals(block: Block) -> list[str]:
    """Why a block breaks the convention above, in words; none when it keeps it."""
    if block.lang not in (*RUN, *SHOWN):
        return [
            f"{block.where}: a ```{block.lang or '(no language)'} block: use console, "
            f"python, or one of {', '.join(SHOWN)}"
        ]
    if block.not_run is not None and block.lang not in RUN:
        return [f"{block.where}: 'not run' on a block that is never run"]
    if block.lang == "console" and not block.commands():
        return [f"{block.where}: a console block without a $ command"]
    return []


def script(page: list[Block], python: str) -> str:
    """One bash script running a page's examples in order; each command echoed first, so a
    failure's output says which one failed."""
    parts = ["set -euo pipefail"]
    for block in page:
        if block.not_run is not None or block.lang not in RUN:
            continue
        parts.append(f"echo {shlex.quote(f'### {block.where}')}")
        if block.lang == "console":
            for command in block.commands():
                parts.append(f"echo {shlex.quote('$ ' + command)}")
                parts.append(command)
        else:
            delimiter = "EXAMPLE_PY_EOF"
            assert delimiter not in block.text
            parts.append(f"{python} - <<'{delimiter}'\n{block.text}\n{delimiter}")
    return "\n".join(parts) + "\n"
