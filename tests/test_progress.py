"""Progress is drawn on a terminal and silent otherwise."""

from __future__ import annotations

import io

from launcher.image.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_on_a_terminal():
    out = Terminal()
    progress = Progress("upload", total=4 * 2**20, stream=out)
    progress.update(2**20)
    progress.line("step 1/2")
    progress.close()
    text = out.getvalue()
    assert "upload:" in text and "4.0 MiB" in text and "step 1/2" in text
    assert text.endswith("\n")


def test_progress_is_silent_when_not_a_terminal():
    out = io.StringIO()
    progress = Progress("upload", stream=out)
    progress.update(10)
    progress.line("step")
    progress.close()
    assert out.getvalue() == ""
