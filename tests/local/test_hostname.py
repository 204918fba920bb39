"""Each local node's own name resolves, as on AWS (VPC DNS), and the nodes' process ids differ.

torchrun's c10d rendezvous hands node 0's name to the others (MASTER_ADDR) and tells nodes apart
by name and process id; the workers share node 0's network namespace, so its name, hosts file
and resolver (launcher.local.containers.node_name). ``bridge`` needs an engine with its default
bridge, which the tests' engine (dockerd --bridge=none) does not have.
"""

from __future__ import annotations

import os
import socket

import pytest

from tests.support import cli
from tests.support.processes import rendezvous_port

# Each node: its name, the address it resolves to (no DNS server answers in the job's own
# network: only the hosts file can), its FQDN (torchrun's MASTER_ADDR) and its process id.
# Node 0 then waits (up to 30 s) for node 1's mark in the shared EFS directory: the workers end
# with the main node, as on Batch.
PROBE = (
    "import os, pathlib, socket, time; name = socket.gethostname(); "
    "node = os.environ['AWS_BATCH_JOB_NODE_INDEX']; "
    "print('probe', node, name, socket.gethostbyname(name), socket.getfqdn(name), os.getpid(), "
    "flush=True); mark = pathlib.Path(os.environ['LAUNCHER_EFS'], 'probed'); "
    "mark.touch() if node != '0' else [time.sleep(0.1) for _ in range(300) if not mark.exists()]"
)


@pytest.fixture(scope="module")
def stack(moto_server, synth_default):
    moto_server.reset()
    return moto_server.deploy(synth_default.outdir, synth_default.stack_names)["EfaBatch"]


@pytest.mark.parametrize("network", ["none", "host"])
def test_every_node_of_a_local_job_resolves_its_own_name(
    network, stack, moto_server, docker_engine, python_base, tmp_path
):
    env = {
        **os.environ,
        **moto_server.env,
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_LOCAL_STATE": str(tmp_path / "state"),
        "LAUNCHER_LOCAL_EFS": str(tmp_path / "efs"),
    }
    result = cli.launcher(
        "run", "--local", "--follow", "--no-workspace", "--nodes", "2", "--local-network",
        network, "--port", str(rendezvous_port()), "--image", python_base, "--",
        "python3", "-c", PROBE,
        env=env,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    probes = {}
    for line in out.splitlines():
        if "probe " in line:
            node, name, address, fqdn, pid = line.split("probe ", 1)[1].split()
            probes[node] = (name, address, fqdn, pid)
    assert sorted(probes) == ["0", "1"], out
    (name0, address0, _, pid0), (name1, address1, _, pid1) = probes["0"], probes["1"]
    assert name0 == name1  # the workers have node 0's name (Docker: its UTS settings)
    assert pid0 != pid1  # ... so their process ids must tell them apart
    if network == "none":
        assert name0.startswith("efa-batch-") and address0 == address1 == "127.0.0.1"
    else:  # the machine's own name, as this machine resolves it
        assert name0 == socket.gethostname()
        assert address0 == address1 == socket.gethostbyname(name0)
