"""Progress: the library emits events; the CLI draws transfers on a terminal only."""

from __future__ import annotations

import io

from launcher.console import Console
from launcher.progress import Event, Transfer


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_transfers_are_drawn_on_a_terminal_and_messages_always_printed():
    out = Terminal()
    transfer = Transfer("upload", Console(out), total=4 * 2**20)
    transfer.update(2**20)
    transfer.message("step 1/2")
    transfer.close()
    text = out.getvalue()
    assert "upload: 1.0 MB / 4.2 MB" in text and "step 1/2\n" in text
    assert text.endswith("\n")


def test_only_messages_reach_a_pipe():
    out = io.StringIO()
    console = Console(out)
    transfer = Transfer("upload", console)
    transfer.update(10)
    transfer.close()
    console(Event("submitted"))
    assert out.getvalue() == "submitted\n"


def test_the_library_is_silent_without_a_callback(capsys):
    transfer = Transfer("upload", None)
    transfer.update(10)
    transfer.message("nothing printed")
    transfer.close()
    assert capsys.readouterr() == ("", "")
