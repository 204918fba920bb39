"""The fabric guard and node health check, on the local backend, with each fault injected.

A p4d.24xlarge pool (8 GPUs, 4 EFA interfaces) rehearsed with ``LAUNCHER_LOCAL_CHECK_DEVICES``:
the nodes expect the type's GPUs and EFA devices though this machine has none. The image has
libfabric and aws-ofi-nccl where the EFA installer puts them, an ``fi_info`` that finds the efa
provider, and an ``nvidia-smi`` that answers the prelude's queries as the job's environment
tells it to (``FAKE_GPUS``, ``FAKE_ECC_GPU``, ``FAKE_REMAP_GPU``). The EFA devices are files in
a directory mounted at /dev/infiniband, as many as the test wants. NCCL is played by the
command: it writes real NCCL and aws-ofi-nccl INFO lines (tests/fixtures/nccl) to its debug
file, then would train for a minute.

What a user would notice: the job ends within seconds of the node's start (10 s is the
promise), with the bad-host code (79, retried elsewhere) or the misbuilt-image code (78, not
retried), the node named, and the command's training never reached.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace

import pytest

from devenv.clusters import cluster_info
from devenv.host_python import host_python_mounts
from launcher import local
from launcher.job import jobdef
from launcher.job.jobspec import JobSpec
from launcher.job.validation import in_pool
from launcher.local.containers import CHECK_DEVICES_ENV
from launcher.node import prelude
from tests.support import context_images
from tests.support.processes import rendezvous_port

FAKE_BIN = "/opt/fake/bin"  # not under /usr, which a test may bind from this machine
FAKE_NVIDIA_SMI = """#!/bin/sh
# Answers the prelude's three queries like nvidia-smi on a p4d.24xlarge (A100-SXM4-40GB);
# with FAKE_NODE set, only that node has the fault.
if [ -n "${FAKE_NODE:-}" ] && [ "$FAKE_NODE" != "${AWS_BATCH_JOB_NODE_INDEX:-0}" ]; then
  unset FAKE_GPUS FAKE_ECC_GPU FAKE_REMAP_GPU
fi
n=${FAKE_GPUS:-8}; i=0
while [ "$i" -lt "$n" ]; do
  case "$1" in
    --query-gpu=index,name) echo "$i, NVIDIA A100-SXM4-40GB";;
    --query-gpu=index,ecc.errors.uncorrected.volatile.total,retired_pages.pending)
      e=0; [ "$i" = "${FAKE_ECC_GPU:-}" ] && e=2; echo "$i, $e, No";;
    --query-remapped-rows=*)
      p=No; [ "$i" = "${FAKE_REMAP_GPU:-}" ] && p=Yes; echo "00000000:1$i:1C.0, $p, No";;
    *) echo "unknown query $1" >&2; exit 2;;
  esac
  i=$((i + 1))
done
"""
FAKE_FI_INFO = "#!/bin/sh\n[ \"$2\" = efa ] && echo 'provider: efa'\n"
EFA_FILES = ("opt/amazon/efa/lib/libfabric.so.1", "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so")
# aws-ofi-nccl 1.14+ and NCCL's own lines, as a p4d node writes them (tests/fixtures/nccl).
EFA_LINES = (
    "node:1:2 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found {} nics)",
    "node:1:2 [0] NCCL INFO Using network Libfabric",
)
SOCKET_LINES = (
    "node:1:2 [0] NCCL INFO NET/Plugin: Using internal network plugin.",
    "node:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>",
    "node:1:2 [0] NCCL INFO Using network Socket",
)


@pytest.fixture(scope="module")
def gpu_image(docker_engine, busybox_base) -> str:
    files = {path: ("", 0o644) for path in EFA_FILES}
    files[f"{FAKE_BIN[1:]}/nvidia-smi"] = (FAKE_NVIDIA_SMI, 0o755)
    files[f"{FAKE_BIN[1:]}/fi_info"] = (FAKE_FI_INFO, 0o755)
    dockerfile = f"FROM {busybox_base}\nENV PATH={FAKE_BIN}:/usr/bin:/bin\nCOPY opt /opt\n"
    return context_images.build(docker_engine, "fabric-guard:test", dockerfile, files)


@pytest.fixture
def state(docker_engine, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", docker_engine.host)
    monkeypatch.setenv("LAUNCHER_LOCAL_STATE", str(tmp_path / "state"))
    monkeypatch.setenv(CHECK_DEVICES_ENV, "1")
    return tmp_path


def nccl(lines: tuple[str, ...], nics: int = 4) -> str:
    """A command that starts like NCCL (its INFO lines in its debug file), then trains."""
    text = "\n".join(line.format(nics) for line in lines)
    return (
        f"printf '%s\\n' '{text}' > \"${{NCCL_DEBUG_FILE%%%h*}}fake.1.log\"; "
        "echo started; sleep 60; echo trained"
    )


def run(
    image: str,
    command: str,
    tmp_path,
    devices: int = 4,
    nodes: int = 2,
    restarts: bool = False,
    **env: str,
):
    """Run the job with ``devices`` EFA device files; (job, node-and-line pairs, seconds)."""
    infiniband = tmp_path / "infiniband"
    infiniband.mkdir(exist_ok=True)
    for i in range(devices):
        (infiniband / f"uverbs{i}").touch()
    spec = JobSpec(
        name="guard",
        command=("sh", "-c", command),
        image=image,
        nodes=nodes,
        env=tuple(env.items()),
        rendezvous_port=rendezvous_port(),
        restarts=restarts,
        attempts=1,  # 79 is retried (launcher.job.jobdef's rules); one attempt shows the fault
        # The node watch is python3: this machine's, read-only (devenv.host_python).
        mounts=host_python_mounts() if restarts else (),
    )
    if restarts:
        path = ("PATH", f"{FAKE_BIN}:{sys.prefix}/bin:/usr/bin:/bin")
        spec = replace(spec, env=(*spec.env, path))
    requests = jobdef.build(spec, cluster_info())
    sync = tmp_path / "sync"  # where nodes leave each other a word
    sync.mkdir(exist_ok=True)
    for group in requests.register["nodeProperties"]["nodeRangeProperties"]:
        container = group["container"]
        container["volumes"].append({"name": "fake-ib", "host": {"sourcePath": str(infiniband)}})
        container["volumes"].append({"name": "sync", "host": {"sourcePath": str(sync)}})
        container["mountPoints"].append(
            {"sourceVolume": "fake-ib", "containerPath": "/dev/infiniband", "readOnly": True}
        )
        container["mountPoints"].append({"sourceVolume": "sync", "containerPath": "/sync"})
    backend = local.LocalBackend("q", str(tmp_path / "efs"))
    started = time.monotonic()
    job_id = backend.schedule(requests)
    job = local.LocalBackend().wait(job_id, timeout=120)
    seconds = time.monotonic() - started
    return job, [(line.node, line.message) for line in backend.log_iter(job_id)], seconds


def said(logs, node: int, start: str) -> list[str]:
    return [line for n, line in logs if n == node and line.startswith(start)]


def test_a_healthy_node_says_what_it_verified_and_trains(state, gpu_image):
    # As on Batch, the job ends when the main node's command does: node 0 waits for node 1 to
    # have trained (a file in /sync), or a worker that started late would be stopped first.
    trains = "sleep 2; echo trained; touch /sync/$AWS_BATCH_JOB_NODE_INDEX; "
    waits = "while [ ! -e /sync/1 ]; do sleep 0.2; done"
    job, logs, _ = run(
        gpu_image, nccl(EFA_LINES).replace("sleep 60; echo trained", trains + waits), state
    )
    assert job.state == "SUCCEEDED", logs
    for node in (0, 1):
        (gpus,) = said(logs, node, "launcher: GPUs healthy")
        assert gpus.startswith(f"launcher: GPUs healthy on node {node} (p4d.24xlarge, host ")
        assert gpus.endswith(
            ": 8/8 x NVIDIA A100-SXM4-40GB, no uncorrected ECC errors, no pending or failed row "
            "remaps"
        )
        (efa,) = said(logs, node, "launcher: EFA ready")
        assert efa.startswith("launcher: EFA ready: 4/4 devices")
        (fabric,) = said(logs, node, "launcher: fabric verified")
        assert fabric.endswith(": NCCL on EFA, 4 of 4 NICs")
        assert "trained" in [line for n, line in logs if n == node]


@pytest.mark.parametrize(
    ("fault", "command", "devices", "env", "code", "found"),
    [
        ("TCP fallback", nccl(SOCKET_LINES), 4, {}, 78, "NCCL chose TCP sockets"),
        (
            "1 of 4 NICs",
            nccl(EFA_LINES, nics=1),
            4,
            {},
            79,
            "aws-ofi-nccl found 1 of the 4 EFA NICs the instance type has",
        ),
        ("7 of 8 GPUs", nccl(EFA_LINES), 4, {"FAKE_GPUS": "7"}, 79, "7 of 8 GPUs visible"),
        (
            "an ECC error",
            nccl(EFA_LINES),
            4,
            {"FAKE_ECC_GPU": "5"},
            79,
            "GPU 5: 2 uncorrected ECC errors",
        ),
        (
            "a pending row remap",
            nccl(EFA_LINES),
            4,
            {"FAKE_REMAP_GPU": "2"},
            79,
            "a row remap is pending",
        ),
    ],
)
def test_each_fault_ends_the_job_within_seconds_naming_the_node(
    state, gpu_image, fault, command, devices, env, code, found
):
    """Faults found before the command (GPUs, devices, ECC) never start it; NCCL's transport
    and NIC count end it within seconds of NCCL's start. 78: the image or the job's settings
    (Batch would fail it the same way on every host); 79: the host (tried again elsewhere)."""
    job, logs, seconds = run(gpu_image, command, state, devices=devices, nodes=1 + 1, **env)
    assert job.state == "FAILED", fault
    assert job.exit_code == code, (fault, logs)
    assert seconds < 10 + 8, (fault, seconds)  # the job's start on this engine is some seconds
    prefix = "launcher: BAD HOST: node 0 (p4d.24xlarge" if code == 79 else "launcher: EFA ERROR"
    (line,) = said(logs, 0, prefix)
    assert found in line, (fault, line)
    assert "node 0 (p4d.24xlarge, host " in line
    assert "trained" not in [message for _, message in logs]
    if code == 79 and "NICs" not in found and "NCCL" not in found:
        assert "started" not in [message for _, message in logs]  # the command never ran


def test_a_workers_bad_host_becomes_the_main_nodes_exit_code_under_the_node_watch(state, gpu_image):
    """Batch decides a multi-node job by its main node and does nothing when a child dies
    (Batch user guide, job-lifecycle.html): the node watch ends the main node with the
    worker's 79, which the retry rules try again."""
    job, logs, seconds = run(
        gpu_image, nccl(EFA_LINES), state, restarts=True, FAKE_GPUS="7", FAKE_NODE="1"
    )
    assert (job.state, job.exit_code) == ("FAILED", prelude.BAD_HOST_EXIT), logs
    (bad,) = said(logs, 1, "launcher: BAD HOST: node 1 (p4d.24xlarge")
    assert "7 of 8 GPUs visible" in bad
    assert said(logs, 0, "launcher: node 1 failed (exit code 79): the job stops")
    assert "trained" not in [message for _, message in logs]
    assert seconds < 30


def test_a_job_that_hides_nccls_info_lines_is_told_the_guard_cannot_check_them(state, gpu_image):
    """NCCL_DEBUG=WARN (a common setting) writes no INIT lines: the guard cannot see the
    network NCCL chose, so it says so, once per node, instead of passing in silence."""
    quick = nccl(SOCKET_LINES).replace("sleep 60", "sleep 1")
    job, logs, _ = run(gpu_image, quick, state, NCCL_DEBUG="WARN")
    assert job.state == "SUCCEEDED", logs
    for node in (0, 1):
        (line,) = said(logs, node, "launcher: fabric guard:")
        assert line.startswith(
            f"launcher: fabric guard: NCCL's network is not checked after it starts on node {node}"
        )
        assert "NCCL_DEBUG=WARN" in line


def test_a_rehearsal_without_devices_runs_under_the_default_require(state, gpu_image, monkeypatch):
    """A multi-node job on an EFA pool gets ``--efa require`` by default; on this machine,
    without the rehearsal setting, the nodes expect no device and the job runs on TCP, said
    once, by the main node (the image is the same on every node)."""
    monkeypatch.delenv(CHECK_DEVICES_ENV)
    job, logs, _ = run(gpu_image, "echo trained", state, devices=0)
    assert job.state == "SUCCEEDED", logs
    (line,) = said(logs, 0, "launcher: EFA")
    assert line.startswith("launcher: EFA: none on this machine (a local run)")
    assert not said(logs, 1, "launcher: EFA")
    for node in (0, 1):
        assert not said(logs, node, "launcher: GPUs")


def test_the_guard_is_the_default_only_for_multi_node_jobs_on_an_efa_pool():
    cluster = cluster_info()
    many = in_pool(JobSpec(name="a", command=("x",), image="i", nodes=2), cluster)[0]
    one = in_pool(JobSpec(name="a", command=("x",), image="i"), cluster)[0]
    cpu = in_pool(JobSpec(name="a", command=("x",), image="i", nodes=2), cluster_info(efa=False))[0]
    asked = in_pool(JobSpec(name="a", command=("x",), image="i", nodes=2, efa="auto"), cluster)[0]
    assert [s.efa.value for s in (many, one, cpu, asked)] == ["require", "auto", "off", "auto"]
    assert prelude.BAD_HOST_EXIT == 79
