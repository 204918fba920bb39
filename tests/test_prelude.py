"""The prelude under dash, the /bin/sh of Debian- and Ubuntu-based training images.

(The Docker tests run it under busybox ash; see test_efa_userspace.py.)
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from launcher import prelude

DASH = shutil.which("dash")


def run_dash(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    if DASH is None:
        pytest.fail("dash is not installed (Debian's /bin/sh)")
    return subprocess.run(
        [DASH, *prelude.command(command)[1:]],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_dash_parses_the_prelude():
    assert subprocess.run([DASH or "dash", "-n", "-c", prelude.SCRIPT], check=False).returncode == 0


def test_rendezvous_variables_on_a_worker_and_the_command_keeps_its_arguments():
    env = {
        "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS": "10.0.0.5",
        "AWS_BATCH_JOB_NODE_INDEX": "3",
        "LAUNCHER_MAIN_PORT": "29500",
        "LAUNCHER_NNODES": "4",
    }
    result = run_dash(
        [
            "sh",
            "-c",
            'echo "$MASTER_ADDR:$MASTER_PORT $PET_NODE_RANK/$PET_NNODES [$1]"',
            "-",
            "a b",
        ],
        env,
    )
    assert result.stdout == "10.0.0.5:29500 3/4 [a b]\n"


@pytest.fixture
def nccl_dir():
    yield
    shutil.rmtree(prelude.NCCL_LOG_DIR, ignore_errors=True)  # the watcher's files on this host


def test_the_exit_code_and_signals_pass_through_the_watcher(nccl_dir):
    env = {
        "LAUNCHER_MAIN_ADDR": "127.0.0.1",
        "NCCL_DEBUG_FILE": f"{prelude.NCCL_LOG_DIR}/%h.%p.log",
    }
    assert run_dash(["sh", "-c", "exit 7"], env).returncode == 7
    process = subprocess.Popen(
        [DASH or "dash", *prelude.command(["sleep", "30"])[1:]],
        env={"PATH": "/usr/bin:/bin", **env},
    )
    time.sleep(0.5)
    process.terminate()  # Batch (through the init process) sends SIGTERM to the shell
    assert process.wait(timeout=10) == 143  # the command got it and ended with it


def test_restarts_without_python3_in_the_image_say_so_and_run_the_command(tmp_path):
    """The node watch needs python3; an image without it still runs, with one warning."""
    for directory in ("/usr/bin", "/bin"):
        for tool in Path(directory).iterdir():
            if not tool.name.startswith("python") and not (tmp_path / tool.name).exists():
                (tmp_path / tool.name).symlink_to(tool)
    env = {
        "PATH": str(tmp_path),
        "LAUNCHER_RESTARTS": "on",
        "LAUNCHER_NNODES": "2",
        "AWS_BATCH_JOB_NODE_INDEX": "0",
        "LAUNCHER_MAIN_PORT": "29500",
    }
    result = run_dash(["sh", "-c", "echo trained; exit 3"], env)
    assert (result.returncode, result.stdout) == (3, "trained\n")
    assert "restarts WARNING: no python3 in the image" in result.stderr
