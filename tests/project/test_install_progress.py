"""`make demo`'s install shows progress (devenv/install_progress.py), on pip's real output."""

from __future__ import annotations

import io
import itertools

from devenv.install_progress import follow

# pip 25 with --progress-bar off, as this machine printed it (abridged: 12 packages).
PIP = (
    "Looking in indexes: https://pypi.org/simple\n"
    "WARNING: Location 'file:///opt/pypi-more/simple/requests/' is ignored: it is neither a "
    "file nor a directory.\n"
    "Processing /opt/pypi/files/requests-2.34.2-py3-none-any.whl\n"
    + "".join(
        f"Collecting pkg{i}>=1 (from requests)\n"
        f"  Downloading pkg{i}-1.0-py3-none-any.whl (500 kB)\n"
        for i in range(10)
    )
    + "Collecting big (from requests)\n"
    "  Downloading big-1.0-cp311-manylinux_x86_64.whl (12.5 MB)\n"
    "Installing collected packages: "
    + ", ".join(f"pkg{i}" for i in range(10))
    + ", big, requests\n"
    "Successfully installed " + " ".join(f"pkg{i}-1.0" for i in range(10)) + " big-1.0 requests-2\n"
)


def run(text: str, tty: bool) -> tuple[int, str]:
    out = io.StringIO()
    seconds = itertools.count()
    code = follow(io.StringIO(text), out, tty, clock=lambda: float(next(seconds)))
    return code, out.getvalue()


def test_piped_a_line_every_ten_packages_and_the_totals():
    code, out = run(PIP, tty=False)
    assert code == 0
    assert out.splitlines() == [
        "  10 packages found, 4 MB downloaded, 20 s",  # the clock ticks once a line
        "  installing 12 packages (26 s so far)",
        "  installed 12 packages in 27 s",
    ]
    assert "WARNING" not in out  # pip's configuration warnings are not the user's business


def test_on_a_terminal_one_line_is_redrawn():
    code, out = run(PIP, tty=True)
    assert code == 0
    drawn, *rest = out.split("\n")
    assert drawn.count("\r") == 12 and drawn.endswith(
        "12 packages found, 5 MB downloaded, 24 s\033[K"
    )
    assert rest[:2] == ["  installing 12 packages (26 s so far)", "  installed 12 packages in 27 s"]


def test_an_error_passes_through_with_pips_last_lines_and_fails():
    code, out = run(
        "Collecting nothere\nERROR: No matching distribution found for nothere\n", False
    )
    assert code == 1
    assert out.splitlines() == [
        "  ERROR: No matching distribution found for nothere",
        "  pip's last lines:",
        "    Collecting nothere",
        "    ERROR: No matching distribution found for nothere",
    ]
