"""MkDocs hook: docs/cli.md's marker becomes the CLI reference, from the parser itself.

The reference is ``launcher --help`` and each subcommand's ``--help``, as
``launcher.cli.main.parser()`` prints them at build time, so it is never written twice and never
falls behind the CLI. Each subcommand gets a heading of its own (``## launcher run``, anchor
``#launcher-run``) for other pages to link to.

The text is made the same on every machine: 100 columns whatever the terminal, no colour, and
the defaults that read the environment (``--stack``: ``$LAUNCHER_STACK``) read none.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from typing import Any
from unittest import mock

MARKER = "<!-- cli-reference -->"
COLUMNS = "100"
# Environment variables the parser's defaults or argparse's formatting read.
CLEARED = ("LAUNCHER_STACK", "LAUNCHER_IMAGE", "FORCE_COLOR", "PYTHON_COLORS")


@contextlib.contextmanager
def _plain_environment() -> Iterator[None]:
    """COLUMNS and NO_COLOR set, CLEARED unset; the environment as it was afterwards."""
    with mock.patch.dict(os.environ, {"COLUMNS": COLUMNS, "NO_COLOR": "1"}):
        for name in CLEARED:
            os.environ.pop(name, None)
        yield


def _subcommands(top: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _block(text: str) -> str:
    return "```text\n" + text.rstrip() + "\n```\n"


def reference() -> str:
    """The Markdown that replaces the marker: the top-level help, then one section a
    subcommand, in the parser's order."""
    with _plain_environment():
        from launcher.cli.main import parser

        top = parser()
        parts = ["## launcher\n", _block(top.format_help())]
        for name, sub in _subcommands(top).items():
            parts.append(f"## launcher {name}\n")
            parts.append(_block(sub.format_help()))
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference())
