"""How the node's files become the text a job definition carries.

What runs on a node travels in the job definition's command: ``/bin/sh -c SCRIPT launcher
CMD...``, where SCRIPT is the prelude (launcher/node/prelude.sh) with the node watch's Python
programs (launcher/node/watch/) inside it, and the check job's CMD is the check script
(launcher/node/check.sh). They are files, shipped as package data and read with
``importlib.resources``, so that ShellCheck, ruff and mypy read them as what they are, and a
failing test can print them as lines; nothing else is written to a node (it has no launcher).

The files carry more than the node needs, and this module takes it out, so that the text is the
same, byte for byte, as when it was written as f-strings (tests/node/test_assembled.py):

- shell (``shell``): lines that start with ``##`` are for whoever reads the file, and a
  ShellCheck directive that gives a reason (``# shellcheck disable=SC2086 # why``) is for the
  linter: both are left out. ``@NAME@`` becomes the value the caller gives for NAME (an exit
  code, a directory list, a Python program); a name without a value is an error, not a gap.
- Python (``program``): what the node runs starts after the line ``# --- node program ---``;
  above it are the module's docstring and the imports of the values the program uses. Below
  it, type annotations, declarations (``pending: dict[...]`` with no value) and the
  ``if __name__ == "__main__":`` lines are for mypy and the tests (which import the module
  without starting it): annotations and declarations are left out (``x: T = v`` becomes
  ``x = v``), and a guarded block is dedented to where it stands in the program (``python3
  -c`` runs it as ``__main__``, so the guard would hold anyway). The names of the given values
  become their literals, so the node gets ``c.settimeout(10)`` where the module says
  ``c.settimeout(HELLO_SECONDS)``. Without annotations the program also runs on an image's
  older python3.

The result is checked: no ``@NAME@`` left in shell, and a program that compiles.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from importlib.resources import files

PLACEHOLDER = re.compile(r"@([A-Z][A-Z0-9_]*)@")
# A line for the file's reader (##) or for ShellCheck (a directive with a reason after it).
FILE_ONLY = re.compile(r"\s*(##|# shellcheck \S.* # )")
PROGRAM_START = "# --- node program ---\n"
MAIN_GUARD = 'if __name__ == "__main__":'
INDENT = "    "


def read(package: str, name: str) -> str:
    """A file of the package, as its bytes say (no newline translation)."""
    return files(package).joinpath(name).read_bytes().decode("utf-8")


def shell(text: str, values: Mapping[str, str]) -> str:
    """A shell file's text as the node gets it: the file-only lines out, placeholders filled."""
    kept = "".join(line for line in text.splitlines(keepends=True) if not FILE_ONLY.match(line))

    def value(match: re.Match[str]) -> str:
        if match[1] not in values:
            raise KeyError(f"no value for the placeholder {match[0]}")
        return values[match[1]]

    # One pass: a value (a Python program, say) is never searched for placeholders itself.
    return PLACEHOLDER.sub(value, kept)


def sections(text: str) -> dict[str, str]:
    """A shell file's sections, by the names of its ``## === NAME ===`` lines, in order."""
    found: dict[str, str] = {}
    name = ""
    for line in text.splitlines(keepends=True):
        if match := re.fullmatch(r"## === ([A-Z_]+) ===\n", line):
            name = match[1]
            if name in found:
                raise ValueError(f"two sections named {name}")
            found[name] = ""
        elif name:
            found[name] += line
        elif not FILE_ONLY.match(line):
            raise ValueError(f"a line of the script before its first section: {line!r}")
    return found


def literal(value: int | str | bytes) -> str:
    """A value as the program's source spells it: double quotes, ``\\n`` the only escape."""
    if isinstance(value, int):
        return str(value)
    text = value.decode() if isinstance(value, bytes) else value
    if any(c in text for c in "\"'\\") or not text.replace("\n", "").isprintable():
        raise ValueError(f"{value!r} needs more than this spelling")
    quoted = '"' + text.replace("\n", "\\n") + '"'
    return "b" + quoted if isinstance(value, bytes) else quoted


def program(text: str, values: Mapping[str, int | str | bytes]) -> str:
    """A node watch module's program as ``python3 -c`` gets it (see the module's docstring)."""
    if not text.isascii():
        raise ValueError("a node program is ASCII (ast's columns count bytes)")
    lines = text.splitlines(keepends=True)
    start = lines.index(PROGRAM_START) + 1  # the marker's line number: the program is below it
    edits: list[tuple[int, int, int, str]] = []  # (line, from column, to column, new text)
    dropped: set[int] = set()
    dedented: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef):
            arguments = node.args
            for arg in arguments.posonlyargs + arguments.args + arguments.kwonlyargs:
                if arg.annotation is not None:
                    edits.append(_cut(arg.col_offset + len(arg.arg), arg.annotation))
            if node.returns is not None:
                line = lines[node.returns.lineno - 1]
                arrow = line.rindex("->", 0, node.returns.col_offset)
                edits.append(_cut(len(line[:arrow].rstrip()), node.returns))
        elif isinstance(node, ast.AnnAssign) and node.value is None:
            line = lines[node.lineno - 1]  # ASCII: ast's columns index the line's characters
            alone = node.end_lineno == node.lineno and line.strip() == line[
                node.col_offset : node.end_col_offset
            ]
            if not alone:
                raise ValueError(f"line {node.lineno}: a declaration shares its line")
            dropped.add(node.lineno)
        elif isinstance(node, ast.AnnAssign):
            edits.append(_cut(node.target.end_col_offset or 0, node.annotation))
        elif isinstance(node, ast.If) and lines[node.lineno - 1].rstrip("\n") == MAIN_GUARD:
            if node.orelse:
                raise ValueError(f"line {node.lineno}: a guard with an else")
            dropped.add(node.lineno)
            dedented.update(range(node.lineno + 1, (node.end_lineno or 0) + 1))
        elif isinstance(node, ast.Name) and node.id in values and node.lineno > start:
            spelled = literal(values[node.id])
            edits.append((node.lineno, node.col_offset, node.end_col_offset or 0, spelled))
    for number, begin, end, replacement in sorted(edits, reverse=True):
        line = lines[number - 1]
        lines[number - 1] = line[:begin] + replacement + line[end:]
    out = []
    for number, line in enumerate(lines[start:], start + 1):
        if number in dropped:
            continue
        if number in dedented:
            if not line.startswith(INDENT):
                raise ValueError(f"line {number}: a guarded line is not indented by 4")
            line = line[len(INDENT) :]
        out.append(line)
    result = "".join(out)
    compile(result, "<node program>", "exec")
    return result


def _cut(begin: int, annotation: ast.expr) -> tuple[int, int, int, str]:
    """Take out ``: TYPE`` or `` -> TYPE``: from ``begin`` to the annotation's end."""
    if annotation.end_lineno != annotation.lineno:
        raise ValueError(f"line {annotation.lineno}: an annotation on more than one line")
    return (annotation.lineno, begin, annotation.end_col_offset or 0, "")
