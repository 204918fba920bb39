"""The docs site's shape, fast: the nav and the pages in docs/ are one set, and the pages made
from the code (docs/hooks/: the outputs table at build time, the committed CLI reference) hold
what the code has. The strict build itself (broken links and anchors) runs in ``make test``
(``make docs``), not here."""

from __future__ import annotations

import difflib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.support.processes import required_or_skip

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _nav_files(entries: list[object]) -> list[str]:
    files: list[str] = []
    for entry in entries:
        values = entry.values() if isinstance(entry, dict) else [entry]
        for value in values:
            files += _nav_files(value) if isinstance(value, list) else [str(value)]
    return files


def _config() -> dict:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def _hook(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, DOCS / "hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_nav_entry_is_a_page_and_every_page_is_in_the_nav():
    nav = _nav_files(_config()["nav"])
    assert len(nav) == len(set(nav))
    assert set(nav) == {p.name for p in DOCS.glob("*.md")}


def test_the_build_is_strict_and_validates_links_anchors_and_the_nav():
    config = _config()
    assert config["strict"] is True
    assert config["validation"] == {
        "omitted_files": "warn",
        "not_found": "warn",
        "unrecognized_links": "warn",
        "absolute_links": "warn",
        "anchors": "warn",
    }
    assert config["site_dir"].startswith("build/")  # ignored (.gitignore)
    for hook in config["hooks"]:
        assert (ROOT / hook).is_file()


def test_the_cli_reference_is_every_subcommands_help():
    from launcher.cli.main import COMMANDS

    hook = _hook("cli_reference")
    text = hook.reference()
    headings = re.findall(r"^## (launcher.*)$", text, re.MULTILINE)
    assert headings == ["launcher", *(f"launcher {c.name}" for c in COMMANDS)]
    for command in COMMANDS:
        assert f"usage: launcher {command.name} " in text
    assert hook.reference() == text  # the same text every time
    assert str(ROOT) not in text and "/home/" not in text  # nothing of this machine's


def test_the_committed_cli_reference_is_not_stale(monkeypatch):
    """docs/cli.md is committed with the reference in it, and the site builds it as it is (no
    hook rewrites it): the page must be what the generator makes from today's parser, on any
    terminal (argparse wraps help to $COLUMNS; the generator fixes 100) and whatever
    $LAUNCHER_STACK says (--stack's default)."""
    hook = _hook("cli_reference")
    if sys.version_info[:2] != hook.PYTHON:
        required_or_skip(f"docs/cli.md is made with Python {hook.PYTHON}'s argparse")
    assert "docs/hooks/cli_reference.py" not in _config()["hooks"]
    monkeypatch.setenv("COLUMNS", "37")
    monkeypatch.setenv("LAUNCHER_STACK", "SomeoneElses")
    page = (DOCS / "cli.md").read_text()
    assert page.count(hook.MARKER) == 1
    made = hook.page(page)
    if page != made:
        diff = difflib.unified_diff(
            page.splitlines(), made.splitlines(), "docs/cli.md", "the parser's help", lineterm=""
        )
        shown = "\n".join(list(diff)[:30])
        pytest.fail(f"docs/cli.md is stale: run {hook.COMMAND}\n{shown}", pytrace=False)


def test_the_outputs_table_is_every_output_the_stack_has():
    from launcher.stack.outputs import OutputKey

    hook = _hook("outputs_reference")
    assert hook.MARKER in (DOCS / "configuration.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \|", hook.reference(), re.MULTILINE)
    assert rows == [key.value for key in OutputKey]
