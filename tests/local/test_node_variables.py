"""docs/jobs.md's table of the variables a node gets, against real nodes: one-node, two-node
and array jobs run with `launcher run --local` on the emulated stack, each printing its
working directory and environment. A row's Where column must hold on every node it names,
and no variable of the launcher's or Batch's may appear that the table does not name."""

from __future__ import annotations

import os

import pytest

from launcher import local
from tests.job.test_node_variables import PRELUDE_OWN, node_variables
from tests.support import cli

# The names a node may get from the launcher, Batch, PyTorch or NCCL: each must be in the table.
PREFIXES = ("LAUNCHER_", "AWS_BATCH_", "PET_", "MASTER_", "FI_", "NCCL_", "GLOO_", "TP_")
SHOW = 'echo "@cwd $(pwd)"; env'


@pytest.fixture(scope="module")
def stack(moto_server, synth_default):
    moto_server.reset()
    return moto_server.deploy(synth_default.outdir, synth_default.stack_names)["EfaBatch"]


@pytest.fixture(scope="module")
def nodes(stack, moto_server, docker_engine, registry, busybox_base, tmp_path_factory):
    """Each node's working directory and environment, by job shape: a one-node job without
    EFA or a workspace, a two-node job with both (the default pool has EFA), a 2-child array."""
    home = tmp_path_factory.mktemp("variables")
    (home / "ws").mkdir()
    (home / "ws" / "train.py").write_text("print('hello')\n")
    env = {
        **os.environ,
        **moto_server.env,
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_REGISTRY": registry.host,
        "LAUNCHER_LOCAL_STATE": str(home / "state"),
        "LAUNCHER_LOCAL_EFS": str(home / "efs"),
    }
    shapes = {
        "one": ("--no-workspace", "--efa", "off"),
        "two": ("--nodes", "2", "--workspace", str(home / "ws")),
        "array": ("--no-workspace", "--efa", "off", "--array", "2"),
    }
    os.environ["LAUNCHER_LOCAL_STATE"] = env["LAUNCHER_LOCAL_STATE"]  # for the reads below
    try:
        seen = {}
        for shape, args in shapes.items():
            result = cli.launcher(
                "run", "--local", "--image", busybox_base, *args, "--", "sh", "-c", SHOW, env=env
            )
            assert result.returncode == 0, result.stderr
            job_id = result.stdout.split()[-1]
            backend = local.LocalBackend()
            assert backend.wait(job_id, timeout=120).state.value == "SUCCEEDED"
            ids = [f"{job_id}:0", f"{job_id}:1"] if shape == "array" else [job_id]
            count = 2 if shape == "two" else 1
            seen[shape] = [
                _parse([line.message for line in backend.log_iter(i, node=n)])
                for i in ids
                for n in range(count)
            ]
        return seen
    finally:
        os.environ.pop("LAUNCHER_LOCAL_STATE", None)


def _parse(lines: list[str]) -> tuple[str, dict[str, str]]:
    """The directory and the variables (the prelude's lines and a value's own lines dropped)."""
    cwd = next(line.removeprefix("@cwd ") for line in lines if line.startswith("@cwd "))
    pairs = (line.split("=", 1) for line in lines if "=" in line and not line.startswith("@"))
    return cwd, {name: value for name, value in pairs if name.isidentifier()}


def test_the_working_directory_is_the_workspace(nodes):
    assert [cwd for cwd, _ in nodes["two"]] == ["/workspace", "/workspace"]


def test_every_node_rows_hold_on_every_node_of_every_shape(nodes):
    every = {n for n, w in node_variables().items() if w == "every node"}
    for shape, found in nodes.items():
        for number, (_, variables) in enumerate(found):
            assert not every - set(variables), (shape, number, sorted(every - set(variables)))


def test_multi_node_rows_are_on_multi_node_jobs_only(nodes):
    """Batch sets the node variables "only in multi-node parallel jobs", and the main node's
    address "only in multi-node parallel job child nodes" (Batch user guide, job_env_vars)."""
    table = node_variables()
    multi = {n for n, w in table.items() if w == "multi-node jobs"}
    workers = {n for n, w in table.items() if w == "multi-node workers"}
    (_, main), (_, worker) = nodes["two"]
    assert multi <= set(main) and multi | workers <= set(worker)
    assert not workers & set(main)
    for _, variables in nodes["one"] + nodes["array"]:
        assert not (multi | workers) & set(variables)
    assert main["LAUNCHER_NODE_RANK"] == main["AWS_BATCH_JOB_NODE_INDEX"] == "0"
    assert worker["LAUNCHER_NODE_RANK"] == worker["AWS_BATCH_JOB_NODE_INDEX"] == "1"
    assert nodes["one"][0][1]["LAUNCHER_NODE_RANK"] == "0"


def test_conditional_rows_appear_with_their_condition_only(nodes):
    table = node_variables()
    array = {n for n, w in table.items() if w == "array children"}
    workspace = {n for n, w in table.items() if w == "with a workspace"}
    # Left out: what the fabric check sets from the image's libraries, the local nodes' own
    # NCCL_SOCKET_IFNAME (loopback, with or without EFA) .
    image_or_local = {"NCCL_NET_PLUGIN", "LD_LIBRARY_PATH", "NCCL_SOCKET_IFNAME"}
    efa = {n for n, w in table.items() if w == "with EFA"} - image_or_local
    local_only = {n for n, w in table.items() if w == "local runs"}
    ((_, one),) = nodes["one"]
    assert [v["AWS_BATCH_JOB_ARRAY_INDEX"] for _, v in nodes["array"]] == ["0", "1"]
    assert not array & set(one) and not (array & set(nodes["two"][0][1]))
    assert workspace <= set(nodes["two"][0][1]) and not workspace & set(one)
    assert efa <= set(nodes["two"][0][1]) and not efa & set(one)
    for _, variables in nodes["one"] + nodes["two"] + nodes["array"]:
        assert local_only <= set(variables)


def test_no_node_gets_a_variable_the_table_does_not_name(nodes):
    named = set(node_variables())
    for shape, found in nodes.items():
        for _, variables in found:
            ours = {n for n in variables if n.startswith(PREFIXES)}
            assert not ours - named - PRELUDE_OWN, (shape, sorted(ours - named))
            assert not PRELUDE_OWN & ours, "the prelude's own reached the command"
