"""The README is a door and every example is one a test runs (tests/support/examples.py keeps
the convention; tests/project/test_demo.py runs them against the demo's emulated stack)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT
from tests.support import examples

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_is_read_in_ten_minutes_with_the_first_run_early():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    first = next(
        block
        for block in examples.blocks(ROOT / "README.md")
        if block.not_run is None and any(c.startswith("launcher run") for c in block.commands())
    )
    assert first.line <= 80


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_block_is_run_shown_or_says_why_not(page):
    assert [r for block in examples.blocks(page) for r in examples.refusals(block)] == []


def test_a_block_the_convention_refuses_is_named_with_its_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# t\n\n```sh\nlauncher list\n```\n\n<!-- not run: no account -->\n```text\nx\n```\n"
        "```console\nonly output\n```\n"
    )
    refused = [r for block in examples.blocks(page) for r in examples.refusals(block)]
    assert refused == [
        "page.md:3: a ```sh block: use console, python, or one of "
        "text, json, yaml, toml, ini, dockerfile, diff",
        "page.md:8: 'not run' on a block that is never run",
        "page.md:11: a console block without a $ command",
    ]


def test_console_commands_continue_across_backslashes_and_skip_output():
    page_blocks = examples.blocks(ROOT / "README.md")
    commands = [c for b in page_blocks if b.lang == "console" for c in b.commands()]
    assert "source .demo/env" in commands
    assert not any(re.match(r"^\s*(rank|hello) ", c) for c in commands)


def test_indented_blocks_in_lists_are_found_with_their_reason(tmp_path):
    page = tmp_path / "list.md"
    page.write_text(
        "1. Deploy.\n\n   <!-- not run: a real account -->\n   ```console\n"
        "   $ cdk deploy \\\n       --all\n   ```\n"
    )
    (block,) = examples.blocks(page)
    assert (block.lang, block.not_run, block.line) == ("console", "a real account", 4)
    assert block.commands() == ["cdk deploy \\\n    --all"]
