"""The rules by which launcher.node.assemble turns the node's files into the command's text.

tests/node/test_assembled.py holds the result for the real files; these hold each rule on a
small text, so a rule that breaks is named.
"""

from __future__ import annotations

import pytest

from launcher.node import assemble

SHELL = """\
# shellcheck shell=sh disable=SC2242 # exit @NAME@: filled in
## for the reader
## === FIRST ===
echo @WORD@
  ## indented, for the reader too
  # shellcheck disable=SC2086 # split on purpose
  kill $_pids
    # shellcheck disable=SC2086
    python3 -c '@PROGRAM@' $args
## === SECOND ===
exit @CODE@ # a comment the node keeps
"""


def test_shell_leaves_out_the_files_lines_and_fills_the_placeholders():
    values = {"WORD": "hi", "PROGRAM": "print('@WORD@')", "CODE": "78"}
    assert assemble.shell(SHELL, values) == (
        "echo hi\n"
        "  kill $_pids\n"
        "    # shellcheck disable=SC2086\n"  # no reason: the script's own, kept
        "    python3 -c 'print('@WORD@')' $args\n"  # a value is not searched again
        "exit 78 # a comment the node keeps\n"
    )


def test_a_placeholder_without_a_value_is_an_error():
    with pytest.raises(KeyError, match="@CODE@"):
        assemble.shell(SHELL, {"WORD": "hi", "PROGRAM": ""})


def test_sections_are_named_and_in_order():
    parts = assemble.sections(SHELL)
    assert list(parts) == ["FIRST", "SECOND"]
    assert parts["SECOND"] == "exit @CODE@ # a comment the node keeps\n"
    with pytest.raises(ValueError, match="before its first section"):
        assemble.sections("echo lost\n" + SHELL)


PROGRAM = '''\
"""A docstring the node does not get."""

from launcher.node.watch import HELLO_SECONDS, WELCOME_LINE

# fmt: off
# --- node program ---
import socket, sys
if __name__ == "__main__":
    port = int(sys.argv[1])
    seen: set[str]
    seen = set()
def answer(c: socket.socket, peer: tuple[str, int] = ("", 0)) -> bytes | None:
    c.settimeout(HELLO_SECONDS); line: bytes = c.recv(64)
    return WELCOME_LINE if line else None  # HELLO_SECONDS stays in a comment
if __name__ == "__main__":
    while True:
        answer(socket.socket())
'''


def test_a_program_loses_what_is_for_mypy_and_the_tests_and_gets_its_values():
    values = {"HELLO_SECONDS": 10, "WELCOME_LINE": b"welcome\n"}
    assert assemble.program(PROGRAM, values) == (
        "import socket, sys\n"
        "port = int(sys.argv[1])\n"
        "seen = set()\n"
        'def answer(c, peer = ("", 0)):\n'
        "    c.settimeout(10); line = c.recv(64)\n"
        '    return b"welcome\\n" if line else None  # HELLO_SECONDS stays in a comment\n'
        "while True:\n"
        "    answer(socket.socket())\n"
    )


@pytest.mark.parametrize(
    ("value", "spelled"),
    [(10, "10"), ("LAUNCHER_WATCH_TOKEN", '"LAUNCHER_WATCH_TOKEN"'), (b"a\n", 'b"a\\n"')],
)
def test_values_are_spelled_as_the_program_always_had_them(value, spelled):
    assert assemble.literal(value) == spelled


@pytest.mark.parametrize("value", ["it's", 'say "hi"', "back\\slash", "tab\t"])
def test_a_value_that_needs_more_spelling_is_refused(value):
    # A single quote would also end the shell's '...' around the program.
    with pytest.raises(ValueError):
        assemble.literal(value)
