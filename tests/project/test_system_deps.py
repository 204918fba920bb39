"""The Makefile's Debian packages (`make demo`, `make test`): every apt-get goes through
devenv/apt_install.sh, which waits for another apt-get's lock instead of failing on it. The
script runs here against a stand-in apt-get on PATH that answers as apt 2.6 does."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.conftest import ROOT

SCRIPT = ROOT / "devenv" / "apt_install.sh"
LOCKED = (
    "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)\n"
    "E: Unable to lock directory /var/lib/apt/lists/"
)


def test_the_makefile_installs_debian_packages_only_through_the_waiting_script():
    recipes = [line for line in (ROOT / "Makefile").read_text().splitlines() if line[:1] == "\t"]
    assert [line for line in recipes if "apt-get" in line] == []
    assert any("sh devenv/apt_install.sh $$missing" in line for line in recipes)
    packages = re.search(r"^DEMO_DEBIAN_PACKAGES := (.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert packages is not None and "$(PYTHON_BASE_PACKAGES)" in packages[1]


def fake_apt(tmp_path: Path, locked_updates: int, update_error: str = LOCKED) -> Path:
    """An apt-get that fails ``update`` with ``update_error`` ``locked_updates`` times, then
    succeeds, and records each call's arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "count").write_text("0")
    (tmp_path / "error").write_text(update_error + "\n")
    apt = bin_dir / "apt-get"
    apt.write_text(
        "#!/bin/sh\n"
        f'cd {tmp_path}; echo "$*" >> calls\n'
        'if [ "$1" = update ]; then\n'
        "  n=$(cat count); echo $((n + 1)) > count\n"
        f'  if [ "$n" -lt {locked_updates} ]; then cat error >&2; exit 100; fi\n'
        "fi\n"
    )
    apt.chmod(0o755)
    return bin_dir


def install(tmp_path: Path, bin_dir: Path, timeout: int = 5) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "APT_LOCK_TIMEOUT": str(timeout),
        "APT_LOCK_POLL": "1",
    }
    return subprocess.run(
        ["sh", str(SCRIPT), "jq", "zsh"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_held_lock_is_waited_for_with_one_line_then_the_packages_install(tmp_path):
    result = install(tmp_path, fake_apt(tmp_path, locked_updates=2))
    assert result.returncode == 0, result.stderr
    assert result.stderr == "==> waiting for another apt-get to finish (up to 5 s)\n"
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[:3] == ["update -qq"] * 3
    assert calls[3:] == ["-o DPkg::Lock::Timeout=5 install -y -qq --no-install-recommends jq zsh"]


def test_a_lock_held_past_the_timeout_fails_saying_what_to_do(tmp_path):
    result = install(tmp_path, fake_apt(tmp_path, locked_updates=99), timeout=2)
    assert result.returncode == 1
    last = result.stderr.splitlines()[-1]
    assert last == (
        "==> another apt-get still holds the package lists after 2 s: "
        "run make again when it ends (or set APT_LOCK_TIMEOUT)"
    )
    assert "install" not in (tmp_path / "calls").read_text()


def test_another_failure_of_update_is_not_waited_for(tmp_path):
    error = "E: The repository 'http://deb.example bookworm Release' does not have a Release file."
    result = install(tmp_path, fake_apt(tmp_path, locked_updates=99, update_error=error))
    assert result.returncode == 1
    assert result.stderr == error + "\n"
    assert (tmp_path / "calls").read_text().splitlines() == ["update -qq"]
