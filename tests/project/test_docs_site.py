"""The docs site's shape, fast: the nav and the pages in docs/ are one set, and the pages made
from the code at build time (docs/hooks/) hold what the code has. The strict build itself
(broken links and anchors) runs in ``make test`` (``make docs``), not here."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import yaml

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
    assert hook.MARKER in (DOCS / "cli.md").read_text()
    text = hook.reference()
    headings = re.findall(r"^## (launcher.*)$", text, re.MULTILINE)
    assert headings == ["launcher", *(f"launcher {c.name}" for c in COMMANDS)]
    for command in COMMANDS:
        assert f"usage: launcher {command.name} " in text
    assert hook.reference() == text  # the same text on every build


def test_the_outputs_table_is_every_output_the_stack_has():
    from launcher.stack.outputs import OutputKey

    hook = _hook("outputs_reference")
    assert hook.MARKER in (DOCS / "configuration.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \|", hook.reference(), re.MULTILINE)
    assert rows == [key.value for key in OutputKey]
