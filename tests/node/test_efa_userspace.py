"""The prelude's EFA userspace check and NCCL transport line, run by the local executor.

Images with and without libfabric and the aws-ofi-nccl plugin (files at the paths the EFA
installer uses; nothing here has an EFA device, so presence is what can be checked), and NCCL
debug files made of real NCCL output (``tests/fixtures/nccl``).
"""

from __future__ import annotations

import pytest

from devenv.clusters import cluster_info
from launcher import local
from launcher.job import jobdef
from launcher.job.jobspec import JobSpec, Mount
from launcher.local.containers import CHECK_DEVICES_ENV
from launcher.node import prelude
from tests.conftest import ROOT
from tests.support import context_images
from tests.support.processes import rendezvous_port

FIXTURES = ROOT / "tests" / "fixtures" / "nccl"
EFA_FILES = ("opt/amazon/efa/lib/libfabric.so.1", "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so")


@pytest.fixture(scope="module")
def efa_image(docker_engine, busybox_base) -> str:
    """The busybox base plus libfabric and the plugin where the EFA installer puts them."""
    files = {path: ("", 0o644) for path in EFA_FILES}
    dockerfile = f"FROM {busybox_base}\nCOPY opt /opt\n"
    return context_images.build(docker_engine, "efa-userspace:test", dockerfile, files)


@pytest.fixture
def state(docker_engine, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", docker_engine.host)
    monkeypatch.setenv("LAUNCHER_LOCAL_STATE", str(tmp_path / "state"))
    return tmp_path


def run(image: str, command: str, tmp_path, **spec):
    values = {
        "name": "efa",
        "command": ("sh", "-c", command),
        "image": image,
        "nodes": 2,
        "rendezvous_port": rendezvous_port(),
    }
    requests = jobdef.build(JobSpec(**(values | spec)), cluster_info())
    backend = local.LocalBackend("q", str(tmp_path / "efs"))
    job_id = backend.schedule(requests)
    job = local.LocalBackend().wait(job_id, timeout=120)
    return job, [(line.node, line.message) for line in backend.log_iter(job_id)]


def lines(logs, node: int = 0) -> list[str]:
    return [line for n, line in logs if n == node]


def test_an_image_without_the_userspace_gets_one_unmistakable_line(state, busybox_base):
    """Locally TCP is what a machine without EFA gives, so the line says it is expected, and
    still names what the image would lack on AWS, where a two-node job's default, --efa
    require, would stop the job before its command: once, by the main node (every node has the
    same image; a line per node read like a failure repeated)."""
    job, logs = run(busybox_base, "echo training", state)
    assert job.state == "SUCCEEDED"
    (line,) = [line for line in lines(logs, 0) if line.startswith("launcher: EFA")]
    assert line.startswith(
        "launcher: EFA: none on this machine (a local run), so NCCL uses TCP sockets here, "
        "as expected; on AWS this job would stop here (--efa require), as the image lacks: "
        "no libfabric "
    )
    assert "aws-ofi-nccl plugin" in line and "WARNING" not in line
    assert not [line for line in lines(logs, 1) if line.startswith("launcher: EFA")]
    for node in (0, 1):
        assert "training" in lines(logs, node)


def test_efa_require_fails_the_job_before_the_command_runs(state, busybox_base, monkeypatch):
    """The default on an EFA pool; rehearsed with the pool's devices expected (a machine
    without EFA otherwise expects none, and runs on TCP)."""
    monkeypatch.setenv(CHECK_DEVICES_ENV, "1")
    job, logs = run(busybox_base, "echo training", state)
    assert job.state == "FAILED"
    assert job.exit_code == prelude.EFA_REQUIRED_EXIT
    (error,) = [line for line in lines(logs) if line.startswith("launcher: EFA")]
    assert error.startswith("launcher: EFA ERROR on node 0 (p4d.24xlarge, host ")
    assert ": no libfabric" in error and "--efa require" in error
    assert "training" not in lines(logs)


def test_an_image_with_the_userspace_is_ready_and_nccl_can_find_the_plugin(state, efa_image):
    probe = 'echo "LD=$LD_LIBRARY_PATH PLUGIN=$NCCL_NET_PLUGIN"'
    job, logs = run(efa_image, probe, state, efa="require")
    assert job.state == "SUCCEEDED"
    main = lines(logs)
    (ready,) = [line for line in main if line.startswith("launcher: EFA")]
    assert ready == (  # a machine without EFA: said so, and the image is ready for AWS
        "launcher: EFA: none on this machine (a local run), so NCCL uses TCP sockets here, as "
        "expected; the image has libfabric and aws-ofi-nccl for AWS"
    )
    # The image set neither: without them NCCL would never load the plugin.
    assert "LD=/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib PLUGIN=ofi" in main


def test_a_users_nccl_net_plugin_is_left_alone(state, efa_image):
    probe = 'echo "PLUGIN=$NCCL_NET_PLUGIN"'
    _, logs = run(efa_image, probe, state, env=(("NCCL_NET_PLUGIN", "/x/libnccl-net-ofi.so"),))
    assert "PLUGIN=/x/libnccl-net-ofi.so" in lines(logs)
    assert not any("NCCL_NET_PLUGIN=ofi" in line for line in lines(logs))


# NCCL writes its debug output to $NCCL_DEBUG_FILE (%h host, %p pid); here the "training"
# command writes real NCCL output there, as NCCL would.
WRITE_NCCL_LOG = (
    'f=$(echo "$NCCL_DEBUG_FILE" | sed "s/%h/$(hostname)/; s/%p/$$/"); '
    'cat /fixtures/{name} > "$f"; echo training done'
)


@pytest.mark.parametrize(
    ("fixture", "network_line"),
    [
        ("efa_init.log", "launcher: NCCL network Libfabric"),
        ("socket_init.log", "launcher: NCCL network Socket (TCP sockets: EFA is NOT in use)"),
    ],
    ids=["efa_init.log", "socket_init.log"],
)
def test_the_transport_nccl_chose_is_one_line_per_node(state, efa_image, fixture, network_line):
    job, logs = run(
        efa_image,
        WRITE_NCCL_LOG.format(name=fixture),
        state,
        mounts=(Mount("bind", "/fixtures", str(FIXTURES), readonly=True),),
    )
    assert job.state == "SUCCEEDED"
    for node in (0, 1):
        node_lines = lines(logs, node)
        assert node_lines.count(network_line) == 1
        assert "training done" in node_lines
        assert not any(" NCCL INFO " in line for line in node_lines)  # INFO stays in files
    warns = [line for _, line in logs if " NCCL WARN " in line]
    expected = 2 if fixture == "efa_init.log" else 0  # forwarded verbatim, once per node
    assert len(warns) == expected


def test_without_efa_the_prelude_only_does_the_rendezvous(state, busybox_base):
    job, logs = run(busybox_base, "echo $LAUNCHER_MAIN_ADDR", state, efa="off")
    assert job.state == "SUCCEEDED"
    assert lines(logs) == ["127.0.0.1"]
