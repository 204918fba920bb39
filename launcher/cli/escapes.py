"""Text a job wrote, made safe to show on a terminal.

A job's output reaches the terminal of whoever reads its logs, and a terminal obeys what it
is sent: ``ESC ] 52`` writes the clipboard, ``ESC ] 0`` the window title, a carriage return
or ``ESC [ 2K`` erases the line, so a job can print ``[node 0] `` followed by a forged
``launcher: job SUCCEEDED`` (ECMA-48; xterm's ctlseqs, "Operating System Commands"). On a
terminal, every control character but tab and newline is shown as an escape (``\\x1b``,
``\\r``), and so are the Unicode controls that reorder what follows them (Unicode Standard
Annex 9; CVE-2021-42574, "Trojan Source"). Piped, the bytes pass as they are: a program
reading them asked for them, and ``--raw`` asks for them on a terminal too.
"""

from __future__ import annotations

from typing import TextIO

# C0 but tab and newline, DEL, C1 (8-bit CSI, OSC ... as code points U+0080-U+009F), and the
# bidirectional embeddings, overrides and isolates (UAX 9, 2.1-2.2).
_KEPT = {0x09, 0x0A}
_CONTROLS = [
    *(code for code in range(0x20) if code not in _KEPT),
    *range(0x7F, 0xA0),
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
]
_NAMED = {0x0D: "\\r"}
_ESCAPED = {
    code: _NAMED.get(code, f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    for code in _CONTROLS
}


def visible(text: str) -> str:
    """``text`` with every control character (tab and newline aside) written out as an
    escape, so that what a terminal shows is what the text says."""
    return text.translate(_ESCAPED)


def for_terminal(stream: TextIO, *, raw: bool = False) -> bool:
    """Whether text bound for ``stream`` is escaped: a terminal, unless ``--raw``."""
    isatty = getattr(stream, "isatty", None)
    return not raw and bool(isatty and isatty())
