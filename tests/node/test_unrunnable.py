"""A command that cannot be run is said in the user's terms, with the shell's exit code.

The prelude checks the command before it runs it (RUN, ``_unrunnable``) and claims only what
would fail anyway: the shell's own line (``launcher: line 246: python3: not found``) read as
the launcher's. Here under dash (Debian's and Ubuntu's /bin/sh), bash (Amazon Linux's) and
busybox ash (the demo's base) on this machine, and in a container of the busybox base.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from launcher.node import prelude

SHELLS = {
    "dash": [shutil.which("dash") or "dash"],
    "bash": [shutil.which("bash") or "bash"],
    "busybox": [shutil.which("busybox") or "busybox", "sh"],
}
PATH = "/usr/bin:/bin"


def run(shell: str, command: list[str], home: Path, path: str = PATH):
    """The prelude on this machine under ``shell``, ``command`` as the job's, in ``home``."""
    return subprocess.run(
        [*SHELLS[shell], *prelude.command(command)[1:]],
        env={"PATH": path, "TMPDIR": str(home), "LAUNCHER_EFS": str(home / "efs")},
        cwd=home,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def said(result: subprocess.CompletedProcess) -> str:
    """The one line the node said (stderr), with nothing of the shell's own."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture(params=sorted(SHELLS))
def shell(request) -> str:
    return request.param


def test_a_name_the_image_lacks_is_not_found_127(shell, tmp_path):
    result = run(shell, ["no-such-program", "train.py"], tmp_path)
    assert result.returncode == 127
    assert said(result) == (
        f"launcher: your command 'no-such-program' was not found in the image (PATH={PATH}): "
        "use an image that has it, or give its full path"
    )


def test_torchrun_missing_says_the_image_needs_pytorch(shell, tmp_path):
    # This machine's /usr/bin (/bin is often a link to it) without torchrun: make test
    # installs Debian's PyTorch.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in Path("/usr/bin").iterdir():
        if program.name != "torchrun":
            (bin_dir / program.name).symlink_to(program)
    result = run(shell, ["torchrun", "--nnodes=2", "train.py"], tmp_path, path=str(bin_dir))
    assert result.returncode == 127
    assert "your command 'torchrun' was not found in the image" in said(result)
    assert "the image needs PyTorch" in said(result)


def test_a_script_without_the_execute_bit_is_not_executable_126(shell, tmp_path):
    script = tmp_path / "hello.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    result = run(shell, [str(script)], tmp_path)
    assert result.returncode == 126
    assert said(result) == (
        f"launcher: your command '{script}' is not executable: run it through its interpreter "
        f"(sh {script}), or chmod +x it before the image is built"
    )
    # A relative path is found from the working directory; python for .py.
    (tmp_path / "hello.py").write_text("print('hi')\n")
    result = run(shell, ["./hello.py"], tmp_path)
    assert result.returncode == 126 and "(python3 ./hello.py)" in said(result)


def test_a_missing_path_a_directory_and_a_name_only_unexecutable_on_path(shell, tmp_path):
    missing = run(shell, ["./train.sh"], tmp_path)
    assert missing.returncode == 127
    assert said(missing) == (
        f"launcher: your command './train.sh' was not found in the image (no such file in "
        f"{tmp_path})"
    )
    directory = run(shell, [str(tmp_path)], tmp_path)
    assert directory.returncode == 126
    assert said(directory).endswith("is a directory, not a program")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "prep").write_text("#!/bin/sh\necho prep\n")
    unexecutable = run(shell, ["prep"], tmp_path, path=f"{bin_dir}:{PATH}")
    assert unexecutable.returncode == 126
    assert said(unexecutable) == (
        f"launcher: your command 'prep' is not executable ({bin_dir}/prep has no execute "
        "permission): chmod +x it before the image is built"
    )


def test_a_script_whose_interpreter_is_missing_or_ends_in_cr(shell, tmp_path):
    bash_script = tmp_path / "job.sh"
    bash_script.write_text("#!/opt/none/bash\necho hi\n")
    bash_script.chmod(0o755)
    result = run(shell, [str(bash_script)], tmp_path)
    assert result.returncode == 127
    assert said(result).endswith(
        "cannot be run: its #! line names /opt/none/bash, which is not in the image"
    )
    windows = tmp_path / "win.sh"
    windows.write_bytes(b"#!/bin/sh\r\necho hi\r\n")
    windows.chmod(0o755)
    result = run(shell, [str(windows)], tmp_path)
    assert result.returncode == 127
    assert "a Windows line ending (CR)" in said(result) and "dos2unix FILE" in said(result)
    python_script = tmp_path / "hello.py"
    python_script.write_text("#!/usr/bin/env no-such-python\nprint('hi')\n")
    python_script.chmod(0o755)
    result = run(shell, [str(python_script)], tmp_path)
    assert result.returncode == 127
    assert said(result).endswith(
        f"its #! line asks for no-such-python, which was not found in the image (PATH={PATH})"
    )


def test_what_would_run_runs_and_its_exit_code_is_its_own(shell, tmp_path):
    """Builtins, PATH names, scripts that run, and a script's own 127 (a command inside it not
    found) go to the shell and the program: no line of the launcher's."""
    assert run(shell, ["true"], tmp_path).returncode == 0
    result = run(shell, ["sh", "-c", "echo ran; exit 3"], tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (3, "ran\n", "")
    script = tmp_path / "inner.sh"
    script.write_text("#!/bin/sh\nno-such-inner-program\n")
    script.chmod(0o755)
    inner = run(shell, [str(script)], tmp_path)
    assert inner.returncode == 127 and "your command" not in inner.stderr
    # Two files of one name on PATH, the first without the execute bit: busybox's command -v
    # names the first, but the shell runs the second, and so does the job.
    first, second = tmp_path / "a", tmp_path / "b"
    for directory, mode in ((first, 0o644), (second, 0o755)):
        directory.mkdir()
        (directory / "tool").write_text(f"#!/bin/sh\necho {directory.name}\n")
        (directory / "tool").chmod(mode)
    result = run(shell, ["tool"], tmp_path, path=f"{first}:{second}:{PATH}")
    assert (result.returncode, result.stdout) == (0, "b\n"), result.stderr


def test_in_a_container_of_the_busybox_base(busybox_base, docker_engine, tmp_path):
    """The demo's base (busybox, no python3), as a node of a two-node job on the Docker
    engine, the workspace mounted at /workspace: both lines, and the container ends with the
    shell's code, which is the job's."""
    from devenv.clusters import cluster_info
    from launcher.job import jobdef
    from launcher.job.jobspec import JobSpec

    (tmp_path / "hello.sh").write_text("#!/bin/sh\necho hi\n")
    (tmp_path / "hello.sh").chmod(0o644)

    def node(command: tuple[str, ...]) -> tuple[int, str]:
        spec = JobSpec(name="job", command=command, image="img", nodes=2, efa="off")
        register = jobdef.build(spec, cluster_info(efa=False)).register
        container = docker_engine.client().containers.run(
            busybox_base,
            command=register["nodeProperties"]["nodeRangeProperties"][0]["container"]["command"],
            environment={"AWS_BATCH_JOB_NODE_INDEX": "0", "LAUNCHER_NNODES": "2"},
            volumes={str(tmp_path): {"bind": "/workspace", "mode": "ro"}},
            working_dir="/workspace",
            network_mode="none",
            detach=True,
        )
        try:
            code = container.wait(timeout=60)["StatusCode"]
            return code, container.logs(stdout=False, stderr=True).decode()
        finally:
            container.remove(force=True)

    code, err = node(("python3", "hello.py"))
    assert code == 127
    assert "launcher: your command 'python3' was not found in the image (PATH=" in err
    assert "line " not in err, err  # nothing of the shell's own
    code, err = node(("/workspace/hello.sh",))
    assert code == 126
    assert (
        "launcher: your command '/workspace/hello.sh' is not executable: run it through its "
        "interpreter (sh /workspace/hello.sh), or chmod +x it before the image is built"
    ) in err
