"""What a job prints cannot drive the terminal of whoever reads its logs (launcher.cli.escapes):
the attacks of the outside review of 2026-11-28, each shown as text on a terminal, each byte
kept when piped. The run through the CLI and a real terminal is in tests/local/test_run.py."""

from __future__ import annotations

import io

import pytest

from launcher.cli import tables
from launcher.cli.escapes import for_terminal, visible

ESC = "\x1b"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("printed", "shown"),
    [
        # xterm ctlseqs, Operating System Commands: 52 sets the clipboard, 0 the title.
        (f"{ESC}]52;c;cm0gLXJmIH4K{ESC}\\", "\\x1b]52;c;cm0gLXJmIH4K\\x1b\\"),
        (f"{ESC}]0;sudo password:\x07", "\\x1b]0;sudo password:\\x07"),
        # A line that erases itself (CR, ECMA-48 EL) and says what the launcher would.
        ("oops\r" + f"{ESC}[2Klauncher: job SUCCEEDED", "oops\\r\\x1b[2Klauncher: job SUCCEEDED"),
        (f"{ESC}[31mred{ESC}[0m", "\\x1b[31mred\\x1b[0m"),
        ("\x9b31m", "\\x9b31m"),  # C1 CSI: the 8-bit form of ESC [
        ("bell\x07 backspace\x08 nul\x00 del\x7f", "bell\\x07 backspace\\x08 nul\\x00 del\\x7f"),
        # UAX 9 overrides and isolates reorder what follows (CVE-2021-42574).
        ("admin\u202e gnp.exe", "admin\\u202e gnp.exe"),
        ("\u2066x\u2069", "\\u2066x\\u2069"),
    ],
)
def test_every_control_a_job_prints_is_shown_as_text(printed, shown):
    assert visible(printed) == shown
    assert ESC not in visible(printed)


def test_text_tabs_newlines_and_other_scripts_are_left_as_they_are():
    """What jobs print every day: tabs, words in any script, emoji, a backslash, a tqdm bar
    (its blocks are printable); a newline inside a CloudWatch event stays one."""
    for text in (
        "step\t1\tloss 0.25",
        "ноды: 8, 节点 ✓ 🚀",
        "C:\\data",
        "42%|████▏ | 42/100",
        "a\nb",
    ):
        assert visible(text) == text


def test_escaped_only_on_a_terminal_and_raw_opts_out():
    assert for_terminal(_Terminal()) is True
    assert for_terminal(_Terminal(), raw=True) is False
    assert for_terminal(io.StringIO()) is False


def test_a_table_cell_cannot_drive_the_terminal_either(monkeypatch):
    """A job's name or reason in ``list``'s table: shown, not obeyed, on a terminal; piped as
    it is."""
    monkeypatch.setenv("NO_COLOR", "1")
    rows = [("j-1", f"x{ESC}]0;owned{ESC}\\", "FAILED")]
    terminal = _Terminal()
    tables.render(("ID", "NAME", "STATE"), rows, terminal)
    assert ESC not in terminal.getvalue() and "x\\x1b]0;owned" in terminal.getvalue()
