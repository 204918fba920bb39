"""docs/cli.md's reference, made from the parser and committed: run

    .venv/bin/python -m docs.hooks.cli_reference

after a change of the CLI's help (an option, a command, an example). It rewrites what follows
docs/cli.md's MARKER line with ``launcher --help`` and each subcommand's ``--help``, as
``launcher.cli.main.parser()`` prints them, and keeps the page's own text above the marker.
Each subcommand gets a heading of its own (``## launcher run``, anchor ``#launcher-run``) for
other pages to link to. ``tests/project/test_docs_site.py`` fails while the committed page
differs from what this makes, and names this command.

Not a MkDocs hook (any more): the site builds the committed page as it is, so the page read on
GitHub, the page the test checks and the page on the site are one text, and a build imports
no launcher code to make it.

The text is the same on every machine: 100 columns whatever the terminal (argparse wraps help
to ``$COLUMNS``), no colour, the defaults that read the environment (``--stack``:
``$LAUNCHER_STACK``) reading none, and the help layout of the Python the project's venv and
CI use (PYTHON): argparse is the standard library's and its layout changes between Python
releases, so this refuses to write the page from another one.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

PAGE = Path(__file__).resolve().parent.parent / "cli.md"
COMMAND = ".venv/bin/python -m docs.hooks.cli_reference"
# Everything after this line is generated; no double hyphen inside, which ends an HTML comment.
MARKER = f"<!-- Generated below: edit the commands' help, then run {COMMAND} -->"
# Debian 12's python3, from which `make` creates .venv (CI's `make test` included).
PYTHON = (3, 11)
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
    """The Markdown after the marker: the top-level help, then one section a subcommand, in
    the parser's order."""
    with _plain_environment():
        from launcher.cli.main import parser

        top = parser()
        parts = ["## launcher\n", _block(top.format_help())]
        for name, sub in _subcommands(top).items():
            parts.append(f"## launcher {name}\n")
            parts.append(_block(sub.format_help()))
    return "\n".join(parts)


def page(current: str) -> str:
    """``current`` (docs/cli.md's text) with everything after the marker line made anew."""
    head, found, _ = current.partition(MARKER + "\n")
    if not found:
        raise SystemExit(f"{PAGE}: no line {MARKER!r} to put the reference after")
    return head + MARKER + "\n\n" + reference()


def main() -> int:
    if sys.version_info[:2] != PYTHON:
        wanted, this = ".".join(map(str, PYTHON)), ".".join(map(str, sys.version_info[:2]))
        print(
            f"docs/cli.md is made with Python {wanted}'s argparse (the venv's and CI's); "
            f"this is {this}, which lays help out otherwise: run it with a {wanted} venv",
            file=sys.stderr,
        )
        return 2
    PAGE.write_text(page(PAGE.read_text()))
    print(f"wrote {PAGE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
