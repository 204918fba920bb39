"""MkDocs hook: docs/configuration.md's marker becomes the table of the cluster stack's outputs.

The outputs contract is declared once, in ``launcher.stack.outputs.OutputKey`` (each output's key,
description and an example value); the stack renders it and the launcher parses it. This
table is made from the same declaration at build time, so it cannot name an output the stack
does not have.
"""

from __future__ import annotations

from typing import Any

MARKER = "<!-- outputs-reference -->"
# Examples longer than this (the Pools JSON) are left to the description.
LONGEST_EXAMPLE = 70


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def reference() -> str:
    from launcher.stack.outputs import SCHEMA_VERSION, OutputKey

    rows = ["| output | what it holds | example |", "| --- | --- | --- |"]
    for key in OutputKey:
        example = f"`{key.example}`" if len(key.example) <= LONGEST_EXAMPLE else ""
        rows.append(f"| `{key.value}` | {_cell(key.description)} | {_cell(example)} |")
    intro = f"Schema version {SCHEMA_VERSION}, {len(rows) - 2} outputs:\n\n"
    return intro + "\n".join(rows) + "\n"


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference())
