"""The prelude under dash, the /bin/sh of Debian- and Ubuntu-based training images.

(The Docker tests run it under busybox ash; see test_efa_userspace.py.)
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from launcher.node import prelude
from tests.support.chroot import copy_with_libraries

DASH = shutil.which("dash")


def own(home: Path) -> dict[str, str]:
    """The prelude's own files (TMPDIR) and the checkpoint directory (under LAUNCHER_EFS, /tmp
    without it) in ``home``: this machine's /tmp is shared with every other run on it."""
    return {"TMPDIR": str(home), "LAUNCHER_EFS": str(home / "efs")}


def run_dash(command: list[str], env: dict[str, str], home: Path) -> subprocess.CompletedProcess:
    """The prelude under dash on this machine, with ``command`` as the job's, in ``home``."""
    if DASH is None:
        pytest.fail("dash is not installed (Debian's /bin/sh)")
    return subprocess.run(
        [DASH, *prelude.command(command)[1:]],
        env={"PATH": "/usr/bin:/bin", **own(home), **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_dash_parses_the_prelude():
    assert subprocess.run([DASH or "dash", "-n", "-c", prelude.SCRIPT], check=False).returncode == 0


def test_rendezvous_variables_on_a_worker_and_the_command_keeps_its_arguments(tmp_path):
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
        tmp_path,
    )
    assert result.stdout == "10.0.0.5:29500 3/4 [a b]\n"


def test_the_exit_code_and_signals_pass_through_the_watcher(tmp_path):
    """With the NCCL watcher on (in directories of the test's own: this machine's /tmp is
    shared with every other run on it)."""
    env = {
        "LAUNCHER_MAIN_ADDR": "127.0.0.1",
        prelude.NCCL_DIR_ENV: str(tmp_path / "nccl"),
        "NCCL_DEBUG_FILE": f"{tmp_path}/nccl/%h.%p.log",
    }
    assert run_dash(["sh", "-c", "exit 7"], env, tmp_path).returncode == 7
    process = subprocess.Popen(
        [DASH or "dash", *prelude.command(["sh", "-c", "echo started; exec sleep 30"])[1:]],
        env={"PATH": "/usr/bin:/bin", **own(tmp_path), **env},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "started\n"
    time.sleep(0.5)  # the shell sets its trap just after starting the command
    process.terminate()  # Batch (through the init process) sends SIGTERM to the shell
    assert process.wait(timeout=10) == 143  # the command got it and ended with it
    # Its own directory removed; NCCL's and the checkpoint directory (on EFS) stay.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["efs", "nccl"]


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
    (tmp_path / ".home").mkdir()  # beside the tools (a dot: no tool's name)
    result = run_dash(["sh", "-c", "echo trained; exit 3"], env, tmp_path / ".home")
    assert (result.returncode, result.stdout) == (3, "trained\n")
    assert "restarts WARNING: no python3 in the image" in result.stderr


# --- the EFA userspace check, in an image made of files ----------------------------------------
#
# The check looks for libfabric, the aws-ofi-nccl plugin and /dev/infiniband/uverbs* at fixed
# paths, so it runs in a chroot: dash and the few tools the prelude calls, plus whichever of
# those files an image would have (empty files: presence is what the check reads), never this
# machine's own libraries or devices. fi_info is a stub that says whether libfabric's efa
# provider works.

EFA_LIB = "/opt/amazon/efa/lib/libfabric.so.1"
OFI_NCCL_LIB = "/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so"
FI_INFO = "/opt/amazon/efa/bin/fi_info"  # where the EFA installer puts it (not on PATH)
IMAGE_TOOLS = ("dash", "ls", "grep", "tr", "mkdir", "cat")
PROBE = 'echo "LD=${LD_LIBRARY_PATH:-} PLUGIN=${NCCL_NET_PLUGIN:-}"; echo trained'


def _image(root: Path, tools: tuple[str, ...]) -> Path:
    """dash as /bin/sh and ``tools``, with their libraries, in ``root``."""
    for tool in tools:
        copy_with_libraries(tool, root)
    (root / "usr/bin/sh").symlink_to("dash")
    (root / "bin").symlink_to("usr/bin")
    return root


@pytest.fixture(scope="module")
def base_image(tmp_path_factory) -> Path:
    """dash as /bin/sh and the tools the prelude calls, with their libraries."""
    return _image(tmp_path_factory.mktemp("image"), IMAGE_TOOLS)


@pytest.fixture
def image(base_image, tmp_path):
    """``image(*files, devices=N, fi_info=SHELL)``: the base plus ``files`` (empty), ``devices``
    EFA devices and, with ``fi_info``, a stub fi_info whose body is that shell text."""

    def make(*files: str, devices: int = 0, fi_info: str | None = None) -> Path:
        root = tmp_path / "image"
        shutil.copytree(base_image, root, symlinks=True, copy_function=os.link)
        for path in files:
            (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (root / path.lstrip("/")).touch()
        (root / "dev/infiniband").mkdir(parents=True)
        for index in range(devices):
            (root / f"dev/infiniband/uverbs{index}").touch()
        if fi_info is not None:
            stub = root / FI_INFO.lstrip("/")
            stub.parent.mkdir(parents=True, exist_ok=True)
            stub.write_text(f"#!/bin/sh\n{fi_info}\n")
            stub.chmod(0o755)
        return root

    return make


def run_efa_check(root: Path, efa: str = "auto", want: int = 0, **env: str):
    """The prelude in ``root`` as a node runs it, EFA on, with the probe as the command."""
    return subprocess.run(
        [
            shutil.which("chroot") or "/usr/sbin/chroot",
            str(root),
            *prelude.command(["sh", "-c", PROBE]),
        ],
        env={
            "PATH": "/usr/bin:/bin",
            "LAUNCHER_MAIN_ADDR": "10.0.0.5",
            "LAUNCHER_EFA": efa,
            "LAUNCHER_EFA_DEVICES": str(want),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def efa_line(result: subprocess.CompletedProcess) -> str:
    (line,) = [
        line for line in (result.stdout + result.stderr).splitlines() if "launcher: EFA" in line
    ]
    return line


def test_an_image_without_the_userspace_gets_one_warning_and_runs(image):
    """Without libfabric's efa provider and aws-ofi-nccl, NCCL quietly falls back to TCP
    sockets: one line says so, and the command runs (``--efa auto``)."""
    result = run_efa_check(image(), want=4)
    assert (result.returncode, result.stdout.splitlines()[-1]) == (0, "trained")
    assert result.stderr == (
        "launcher: EFA WARNING: no libfabric (libfabric.so.1); no aws-ofi-nccl plugin "
        "(libnccl-net-ofi.so or libnccl-net.so); 0 of 4 EFA devices visible: NCCL will fall "
        "back to TCP sockets, not EFA; see docs/jobs.md, 'The base image contract'\n"
    )


def test_a_local_run_says_tcp_is_expected_and_what_the_image_would_lack_on_aws(image):
    """A rehearsal on a machine without EFA (the local backend sets LAUNCHER_REHEARSAL=local
    and no devices): TCP is expected there, so the line is not a warning, but an image that
    would fall back to TCP on AWS too is still named."""
    # A rehearsal in a Capacity Block's pool names the block's compute environment, as Batch
    # would (launcher.local.containers.placement): the sign of a rehearsal is its own variable.
    root = image(EFA_LIB)
    result = run_efa_check(
        root,
        AWS_BATCH_CE_NAME="EfaBatch-ComputeEnvironment-IYY8BHAZAAD5",
        **{prelude.REHEARSAL_ENV: "local"},
    )
    assert (result.returncode, result.stdout.splitlines()[-1], result.stderr) == (0, "trained", "")
    assert efa_line(result) == (
        "launcher: EFA: none on this machine (a local run), so NCCL uses TCP sockets here, as "
        "expected; on AWS this image would fall back to TCP too: no aws-ofi-nccl plugin "
        "(libnccl-net-ofi.so or libnccl-net.so) (see docs/jobs.md, 'The base image contract')"
    )
    # Under --efa require (a multi-node job's default on an EFA pool) AWS would not fall
    # back: the rehearsal says the job would stop there (the next test: 78 on AWS).
    result = run_efa_check(root, efa="require", **{prelude.REHEARSAL_ENV: "local"})
    assert (result.returncode, result.stdout.splitlines()[-1], result.stderr) == (0, "trained", "")
    assert (
        "on AWS this job would stop here (--efa require), as the image lacks: no aws-ofi-nccl"
        in (efa_line(result))
    )


def test_efa_require_fails_the_node_with_78_before_the_command(image):
    """``--efa require``: a missing piece ends the node with EX_CONFIG before the command
    starts, saying what is missing, instead of a training run on TCP sockets."""
    result = run_efa_check(image(EFA_LIB), efa="require", want=4)
    assert result.returncode == prelude.EFA_REQUIRED_EXIT == 78
    assert "trained" not in result.stdout
    assert result.stderr == (
        "launcher: EFA ERROR on node 0: no aws-ofi-nccl plugin (libnccl-net-ofi.so or "
        "libnccl-net.so); 0 of 4 EFA devices visible: failing the job (--efa require); see "
        "docs/jobs.md, 'The base image contract'\n"
    )


def test_the_installers_paths_are_found_and_given_to_nccl(image):
    """The EFA installer's directories are not on the loader's path: the check puts them there
    and names the plugin to NCCL (libnccl-net-ofi.so, since aws-ofi-nccl 1.14, is loaded with
    NCCL_NET_PLUGIN=ofi: prelude.PLUGIN_NAMES), then asks fi_info whether libfabric's efa
    provider works on the node's devices."""
    root = image(EFA_LIB, OFI_NCCL_LIB, devices=4, fi_info='[ "$*" = "-p efa -t FI_EP_RDM" ]')
    result = run_efa_check(root, efa="require", want=4)
    assert result.returncode == 0, result.stderr
    assert efa_line(result) == (
        f"launcher: EFA ready: 4/4 devices, libfabric {EFA_LIB} (efa provider usable (fi_info -p "
        f"efa)), aws-ofi-nccl {OFI_NCCL_LIB}, /opt/amazon/efa/lib put on LD_LIBRARY_PATH, "
        "/opt/amazon/ofi-nccl/lib put on LD_LIBRARY_PATH, NCCL_NET_PLUGIN=ofi"
    )
    assert result.stdout.splitlines()[-2:] == [
        "LD=/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib PLUGIN=ofi",
        "trained",
    ]


@pytest.mark.parametrize(
    ("devices", "fi_info", "code", "line"),
    [
        (
            2,
            "exit 0",
            prelude.BAD_HOST_EXIT,
            "launcher: BAD HOST: node 0: 2 of 4 EFA devices visible (the instance type has 4): "
            "ending with exit code 79 so that the job is tried again on another instance",
        ),
        (
            4,
            "exit 1",
            prelude.EFA_REQUIRED_EXIT,
            "launcher: EFA ERROR on node 0: libfabric has no usable efa provider (fi_info -p efa "
            "failed): failing the job (--efa require); see docs/jobs.md, 'The base image "
            "contract'",
        ),
    ],
)
def test_missing_devices_or_a_broken_provider_fail_a_required_check(
    image, devices, fi_info, code, line
):
    """Fewer uverbs devices than the node type has (LAUNCHER_EFA_DEVICES, from the job
    definition) is the host: the bad-host code, tried again elsewhere. A libfabric whose efa
    provider does not start is the image: it would fail on every host, so it is not."""
    root = image(EFA_LIB, OFI_NCCL_LIB, devices=devices, fi_info=fi_info)
    result = run_efa_check(root, efa="require", want=4)
    assert result.returncode == code
    assert result.stderr.splitlines()[-1] == line


def test_without_fi_info_the_provider_is_present_not_verified(image):
    result = run_efa_check(image(EFA_LIB, OFI_NCCL_LIB, devices=4), want=4)
    assert "(efa provider present, not verified (no fi_info))" in efa_line(result)
    assert efa_line(result).startswith("launcher: EFA ready: 4/4 devices")


@pytest.mark.parametrize(
    ("plugin", "env", "expected"),
    [
        # What NCCL loads when NCCL_NET_PLUGIN is unset: nothing to name.
        ("/opt/amazon/aws-ofi-nccl/lib/libnccl-net.so", {}, ""),
        ("/opt/aws-ofi-nccl/lib/libnccl-net-aws-ofi.so", {}, "aws-ofi"),
        # The user's own choice is left alone.
        (OFI_NCCL_LIB, {"NCCL_NET_PLUGIN": "/x/libnccl-net-ofi.so"}, "/x/libnccl-net-ofi.so"),
    ],
)
def test_the_plugin_is_named_to_nccl_only_where_nccl_needs_it(image, plugin, env, expected):
    result = run_efa_check(image(EFA_LIB, plugin), **env)
    assert result.returncode == 0, result.stderr
    assert efa_line(result).startswith(f"launcher: EFA ready: 0/0 devices, libfabric {EFA_LIB}")
    assert f"aws-ofi-nccl {plugin}," in efa_line(result)
    assert result.stdout.splitlines()[-2].endswith(f" PLUGIN={expected}")


def test_libraries_already_on_the_loaders_path_are_left_there(image):
    """An image that put libfabric in a system directory and the plugin on its own
    LD_LIBRARY_PATH keeps the path it set: nothing is put in front of its choice."""
    root = image("/usr/lib/libfabric.so.1", "/opt/nccl-net/libnccl-net-ofi.so")
    result = run_efa_check(root, LD_LIBRARY_PATH="/opt/nccl-net")
    assert efa_line(result) == (
        "launcher: EFA ready: 0/0 devices, libfabric /usr/lib/libfabric.so.1 (efa provider not "
        "checked (no EFA device here)), aws-ofi-nccl /opt/nccl-net/libnccl-net-ofi.so, "
        "NCCL_NET_PLUGIN=ofi"
    )
    assert result.stdout.splitlines()[-2] == "LD=/opt/nccl-net PLUGIN=ofi"


# --- the checkpoint timer and the NCCL watcher, in an image of this machine's tools ------------
#
# Each test runs the prelude as a node does, in a chroot of its own: its /tmp is the node's,
# never this machine's, which other runs share.

NODE_TOOLS = (*IMAGE_TOOLS, "rm", "mktemp", "date", "sleep", "tail", "head", "wc", "sed", "cut")
BLOCK_CE = "EfaBatch-ComputeEnvironment-IYY8BHAZAAD5"
FALLBACK_CE = "EfaBatch-PoolOndemandComputeEnvironment3A9F0918-P7KVVXX1RSUV"


@pytest.fixture(scope="module")
def node_tools(tmp_path_factory) -> Path:
    root = _image(tmp_path_factory.mktemp("node-image"), NODE_TOOLS)
    (root / "dev").mkdir()
    os.mknod(root / "dev/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return root


@pytest.fixture
def node_image(node_tools, tmp_path) -> Path:
    """A node's root file system of its own (/tmp included), linked from ``node_tools``."""
    root = tmp_path / "node"
    shutil.copytree(node_tools, root, symlinks=True, copy_function=os.link)
    (root / "tmp").mkdir(mode=0o1777)
    return root


def start_node(root: Path, command: str, **env: str) -> subprocess.Popen:
    """The prelude in ``root`` with ``sh -c COMMAND`` as the job's command."""
    return subprocess.Popen(
        [
            shutil.which("chroot") or "/usr/sbin/chroot",
            str(root),
            *prelude.command(["sh", "-c", command]),
        ],
        # The checkpoint directory goes under LAUNCHER_EFS (/tmp without it).
        env={"PATH": "/usr/bin:/bin", "LAUNCHER_MAIN_ADDR": "10.0.0.5", "LAUNCHER_EFS": "/efs"}
        | env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def in_block(checkpoint_in: int, **env: str) -> dict[str, str]:
    """What the launcher gives every node of a job in the block (launcher.job.capacity.environment),
    with the checkpoint time ``checkpoint_in`` seconds from now; ``env`` on top (Batch's own)."""
    at = int(time.time()) + checkpoint_in
    return {
        "LAUNCHER_CAPACITY_BLOCK": "cr-0123456789abcdef0",
        "LAUNCHER_WINDOW_START": str(at - 3600),
        "LAUNCHER_WINDOW_END": str(at + 1800 + 600),
        "LAUNCHER_CHECKPOINT_SIGNAL": "USR1",
        "LAUNCHER_CHECKPOINT_AT": str(at),
        "LAUNCHER_CAPACITY_BLOCK_CE": BLOCK_CE,
        "LAUNCHER_FALLBACK_CE": FALLBACK_CE,
        **env,
    }


def fails_after(tenths: int) -> str:
    """A command that runs ``tenths`` tenths of a second, then fails with its own code, unless a
    signal ends it first (it catches none)."""
    return f"i=0; while [ $i -lt {tenths} ]; do sleep 0.1; i=$((i + 1)); done; exit 3"


def test_a_signalled_run_ends_75_and_the_next_runs_failure_is_its_own(node_image):
    """In the block's compute environment, before the checkpoint time: the timer sends the
    signal and the node ends with 75 (tried again). The next run on the same machine (the
    retry; or a prelude started by hand where one ran before) fails with its own exit code:
    the mark of the signal was the first run's, in a directory of its own, gone with it. Before,
    /tmp/launcher-checkpoint-sent stayed behind and turned any later failure into 75."""
    # 3 s ahead (at least 2 s, whole seconds): the prelude must start before it however busy
    # the machine is; the command would end by itself after 6 s.
    signalled = start_node(node_image, fails_after(60), **in_block(3, AWS_BATCH_CE_NAME=BLOCK_CE))
    _, err = signalled.communicate(timeout=30)
    assert signalled.returncode == prelude.NODE_LOST_EXIT, err
    assert ": sent SIGUSR1 to the command (pid " in err
    assert "ended with exit code 138 after the checkpoint signal: ending with exit code 75" in err
    assert list((node_image / "tmp").iterdir()) == []  # nothing left behind

    # What the old prelude left there, and a run with the NCCL watcher on, which keeps the
    # prelude beside its command to read the outcome (the two fast tests of the issue).
    (node_image / "tmp/launcher-checkpoint-sent").touch()
    again = start_node(node_image, "exit 3", NCCL_DEBUG_FILE=f"{prelude.NCCL_LOG_DIR}/%h.%p.log")
    _, err = again.communicate(timeout=30)
    assert (again.returncode, err) == (3, "")


@pytest.mark.parametrize(
    ("env", "tenths", "why"),
    [
        (  # the checkpoint time comes within the command's 1.5 s
            in_block(1, AWS_BATCH_CE_NAME=FALLBACK_CE),
            15,
            f"this attempt runs in compute environment {FALLBACK_CE} (the pool's fallback), not "
            f"in the block's ({BLOCK_CE}), so EC2 does not end it with the block; the command "
            "runs to its own end",
        ),
        (
            in_block(-60, AWS_BATCH_CE_NAME=BLOCK_CE),
            3,
            "this attempt started after the checkpoint time (",
        ),
        (  # a stack too old to name the compute environments: the time alone decides
            {
                k: v
                for k, v in in_block(-60, AWS_BATCH_CE_NAME=FALLBACK_CE).items()
                if not k.endswith("_CE")
            },
            3,
            "this attempt started after the checkpoint time (",
        ),
    ],
    ids=["on-the-fallback", "after-the-checkpoint-time", "older-stack-after-the-time"],
)
def test_an_attempt_the_block_will_not_end_gets_no_signal_and_keeps_its_exit_code(
    node_image, env, tenths, why
):
    """The checkpoint values ride in the SubmitJob's overrides, which every attempt of the job
    gets (SubmitJob.retryStrategy: "The retry strategy to use for failed jobs from this
    SubmitJob operation"). An attempt that Batch placed in another compute environment than
    the block's (AWS_BATCH_CE_NAME: "the name of the compute environment where your job is
    placed", Batch user guide, job_env_vars.html), or that starts after the checkpoint time,
    is told why in one line and its command runs to its own end with its own exit code. Before,
    the timer fired (at once, or at the checkpoint time on the fallback) and every retry ended
    with 75 in turn until the job failed."""
    node = start_node(node_image, fails_after(tenths), **env)
    _, err = node.communicate(timeout=30)
    assert node.returncode == 3, err
    (line,) = err.splitlines()
    assert (
        line.startswith("launcher: Capacity Block cr-0123456789abcdef0 ends at ")
        and f": no checkpoint signal: {why}" in line
    )
    assert list((node_image / "tmp").iterdir()) == []


def test_on_an_older_stack_the_checkpoint_time_alone_decides(node_image):
    """Without LAUNCHER_CAPACITY_BLOCK_CE (a stack whose Pools output predates the name; the
    launcher warns at submit) the prelude cannot tell the block from the fallback: an attempt
    that starts before the checkpoint time is signalled wherever it runs, as documented."""
    # 3 s ahead, as above: with 1 s, a prelude slow to start on a busy machine began after the
    # checkpoint time and rightly sent no signal (a CI run failed so: 3 == 75).
    env = {
        k: v for k, v in in_block(3, AWS_BATCH_CE_NAME=FALLBACK_CE).items() if not k.endswith("_CE")
    }
    node = start_node(node_image, fails_after(60), **env)
    _, err = node.communicate(timeout=30)
    assert node.returncode == prelude.NODE_LOST_EXIT, err
    assert ": sent SIGUSR1 to the command (pid " in err


# Behind the scanner's `grep ' NCCL WARN ' CHUNK`, a grep that says it started (a file) and
# takes a second before it reads the chunk: the race of a scan still running as the command
# ends, made certain instead of likely.
SLOW_WARN_GREP = """#!/bin/sh
case "$1" in " NCCL WARN ") : > /tmp/warn-grep-started; sleep 1;; esac
exec /usr/libexec/grep "$@"
"""


def test_each_nccl_warn_line_is_forwarded_once_when_the_command_ends_mid_scan(node_image):
    """The command writes one NCCL WARN line, waits until the watcher's scan is reading it,
    writes a second and ends. The scan under way finishes and one last scan follows it, so
    each line is in the node's output once. Before, the scan was killed while its grep ran on
    in the background and the last scan rewrote the chunk that grep was reading: the first line
    was lost and the second forwarded twice (issue 42, item 7: 'assert 3 == 2')."""
    grep = node_image / "usr/bin/grep"
    (node_image / "usr/libexec").mkdir(parents=True, exist_ok=True)
    grep.rename(node_image / "usr/libexec/grep")
    grep.write_text(SLOW_WARN_GREP)
    grep.chmod(0o755)
    log = f"{prelude.NCCL_LOG_DIR}/node.7.log"  # as NCCL_DEBUG_FILE's %h.%p expands
    command = (
        f'echo "node:7:7 [0] NCCL WARN first" >> {log}; i=0; '
        "while [ ! -e /tmp/warn-grep-started ] && [ $i -lt 100 ]; do "
        "sleep 0.1; i=$((i + 1)); done; "
        f'echo "node:7:7 [0] NCCL WARN second" >> {log}'
    )
    node = start_node(node_image, command, NCCL_DEBUG_FILE=f"{prelude.NCCL_LOG_DIR}/%h.%p.log")
    out, err = node.communicate(timeout=30)
    assert node.returncode == 0, err
    assert out.splitlines() == [
        "node:7:7 [0] NCCL WARN first",
        "node:7:7 [0] NCCL WARN second",
    ]
