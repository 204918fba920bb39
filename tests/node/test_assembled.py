"""The command every job definition carries, pinned byte for byte.

The prelude, the node watch and the check job's script are assembled from files
(launcher/node/) into the ``/bin/sh -c`` command of every node. The golden files in
tests/fixtures/node/ were written from the code before that move (commit f4f35f7, when they were
f-strings), so the move changed no byte of what a node runs; from now on they pin the assembled
command, and a change to the node's script shows here as a diff. A deliberate change updates the
goldens with ``.venv/bin/python tests/node/goldens.py`` (tests/node/goldens.py says what each
covers), in the same commit, so the diff of the goldens is the review of what nodes now run.
"""

from __future__ import annotations

import difflib

import pytest

from launcher.node import prelude
from tests.node import goldens


def assert_same_text(golden: str, assembled: str, name: str) -> None:
    """Byte for byte, and where not, a unified diff of the lines (not one escaped line)."""
    if assembled.encode() == golden.encode():
        return
    diff = difflib.unified_diff(
        golden.splitlines(keepends=True),
        assembled.splitlines(keepends=True),
        fromfile=f"tests/fixtures/node/{name} (golden)",
        tofile=f"{name} (assembled now)",
    )
    pytest.fail("the assembled text differs from its golden:\n" + "".join(diff), pytrace=False)


def golden(name: str) -> str:
    return (goldens.FIXTURES / name).read_bytes().decode()


@pytest.mark.parametrize("name", sorted(goldens.texts()))
def test_the_assembled_text_is_the_golden(name):
    assert_same_text(golden(name), goldens.texts()[name], name)


@pytest.mark.parametrize("setting", sorted(goldens.settings()))
def test_the_job_definitions_commands_are_the_golden(setting):
    what, register = goldens.settings()[setting]
    known = {name: golden(name) for name in goldens.texts()}
    name = f"command-{setting}.txt"
    expected = goldens.parse(golden(name), known)
    actual = list(goldens.commands(register()))
    assert [where for where, _ in actual] == [where for where, _ in expected], name
    for (where, argv), (_, want) in zip(actual, expected, strict=True):
        assert len(argv) == len(want), (name, where, argv[3:], want[3:])
        for index, (arg, wanted) in enumerate(zip(argv, want, strict=True)):
            assert_same_text(wanted, arg, f"{name} [{where}] argument {index}")
        assert prelude.user_command(argv) == want[4:]
    # The file itself, header and all, as the generator writes it now.
    assert_same_text(golden(name), goldens.render(what, register(), known), name)


def test_every_golden_file_is_a_text_or_a_setting():
    named = set(goldens.texts()) | {f"command-{s}.txt" for s in goldens.settings()}
    assert {p.name for p in goldens.FIXTURES.iterdir()} == named
