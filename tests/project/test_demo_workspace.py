"""The demo's rendezvous worker (demo/workspace/rendezvous.sh) as a newcomer reads its output:
the tries made while the main node starts are quiet, and a main node that never answers ends
the worker with one line that says so. Run with dash, a stand-in ``nc`` that is refused the
first N times, and a ``seq`` of three tries, so no wait is 20 s."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

REFUSED = "nc: can't connect to remote host (127.0.0.1): Connection refused"


def worker(tmp_path: Path, refusals: int) -> subprocess.CompletedProcess:
    shell = shutil.which("dash") or shutil.which("sh")
    assert shell is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "tries").write_text("0")
    (bin_dir / "nc").write_text(
        "#!/bin/sh\n"
        f"cd {tmp_path}; n=$(cat tries); echo $((n + 1)) > tries\n"
        f'if [ "$n" -lt {refusals} ]; then echo "{REFUSED}" >&2; exit 1; fi\n'
        "cat > received\n"
    )
    (bin_dir / "seq").write_text("#!/bin/sh\necho 1 2 3\n")
    for tool in (bin_dir / "nc", bin_dir / "seq"):
        tool.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "AWS_BATCH_JOB_NODE_INDEX": "1",
        "AWS_BATCH_JOB_NUM_NODES": "2",
        "AWS_BATCH_JOB_MAIN_NODE_INDEX": "0",
        "LAUNCHER_MAIN_ADDR": "127.0.0.1",
        "LAUNCHER_MAIN_PORT": "29500",
        "LAUNCHER_EFS": str(tmp_path / "efs"),
    }
    return subprocess.run(
        [shell, str(ROOT / "demo" / "workspace" / "rendezvous.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize("refusals", [0, 2])
def test_the_worker_says_hello_and_nothing_of_the_refused_tries(tmp_path, refusals):
    result = worker(tmp_path, refusals)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "rank 1 of 2: main at 127.0.0.1:29500\n"
    assert result.stderr == ""
    assert (tmp_path / "received").read_text() == "hello from rank 1\n"


def test_a_main_node_that_never_answers_ends_the_worker_with_one_line(tmp_path):
    result = worker(tmp_path, refusals=3)
    assert result.returncode == 1
    assert result.stderr == (
        "rank 1: no rendezvous: the main node did not answer at 127.0.0.1:29500 in 20 s "
        f"({REFUSED})\n"
    )
