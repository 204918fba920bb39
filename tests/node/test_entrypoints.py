"""The node command behind the entrypoints of the images users bring.

A Batch job's command is the image's Cmd, and Batch cannot override the image's ENTRYPOINT
(ContainerProperties has no such field), so the entrypoint runs first. AWS's own PyTorch
training images for EC2 end theirs with ``eval "$@"``, which parses the command again; NGC's
and tini pass it on with exec. Each kind runs here on the real Docker engine, as a worker node
of a two-node job: the prelude must give it the main node's address (never its own) and the
command its arguments unchanged, and the base's entrypoint must still have run.
"""

from __future__ import annotations

import pytest

from devenv.clusters import cluster_info
from launcher.job import jobdef
from launcher.job.jobspec import JobSpec
from launcher.node import prelude
from tests.support.entrypoint_bases import ENTRYPOINTS, push_entrypoint_base

MAIN = "10.11.12.13"  # a worker is told this address; nothing is sent to it (no network)
USER_COMMAND = (
    "sh",
    "-c",
    'echo "main=$MASTER_ADDR pet=$PET_MASTER_ADDR rank=$PET_NODE_RANK dlc=${DLC_SETUP:-}'
    ' ngc=${NGC_SETUP:-}"; printf "<%s>\\n" "$@"',
    "-",
    "a b",
    "$HOME",
    "c'd",
    'e"f',
)
EXPECTED_ARGS = ["<a b>", "<$HOME>", "<c'd>", '<e"f>']


@pytest.fixture(scope="module")
def bases(docker_engine, registry) -> dict[str, str]:
    client = docker_engine.client()
    return {
        kind: push_entrypoint_base(client, f"{registry.host}/entrypoint-{kind}", kind)
        for kind in ENTRYPOINTS
    }


def worker_command(command: tuple[str, ...] = USER_COMMAND) -> list[str]:
    spec = JobSpec(name="job", command=command, image="img", nodes=2, efa="off")
    requests = jobdef.build(spec, cluster_info(efa=False))
    return requests.register["nodeProperties"]["nodeRangeProperties"][0]["container"]["command"]


def run_worker(
    docker_engine, image: str, command: tuple[str, ...] = USER_COMMAND
) -> tuple[int, list[str], str]:
    client = docker_engine.client()
    container = client.containers.run(
        image,
        command=worker_command(command),
        environment={
            "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS": MAIN,
            "AWS_BATCH_JOB_NODE_INDEX": "1",
            "AWS_BATCH_JOB_NUM_NODES": "2",
            "LAUNCHER_NNODES": "2",
            "LAUNCHER_MAIN_PORT": "29500",
            "HOME": "/root",
        },
        network_mode="none",
        detach=True,
    )
    try:
        code = container.wait(timeout=60)["StatusCode"]
        out = container.logs(stdout=True, stderr=False).decode().splitlines()
        err = container.logs(stdout=False, stderr=True).decode()
    finally:
        container.remove(force=True)
    return code, out, err


@pytest.mark.parametrize("kind", sorted(ENTRYPOINTS))
def test_a_worker_gets_the_main_nodes_address_behind_every_entrypoint(kind, bases, docker_engine):
    code, out, err = run_worker(docker_engine, bases[kind])
    assert code == 0, err
    summary, *args = out
    assert summary.startswith(f"main={MAIN} pet={MAIN} rank=1 "), (summary, err)
    assert args == EXPECTED_ARGS
    # The base's own entrypoint still ran, and its setup reached the command.
    assert ("dlc=done" in summary) == (kind == "dlc-eval")
    assert ("ngc=done" in summary) == (kind == "ngc-exec")
    if kind == "dlc-eval":
        assert "parsed the command again (eval); running it as given" in err


@pytest.mark.parametrize("kind", sorted(ENTRYPOINTS))
def test_a_command_the_image_lacks_is_said_in_the_users_terms_behind_every_entrypoint(
    kind, bases, docker_engine
):
    """The prelude's check before the command (RUN) behind `eval "$@"`, exec and no
    entrypoint: the user's words and the shell's 127, never the prelude's line number."""
    code, _, err = run_worker(docker_engine, bases[kind], ("train-model", "--epochs", "3"))
    assert code == 127, err
    assert "launcher: your command 'train-model' was not found in the image (PATH=" in err
    assert "line " not in err, err


def test_an_entrypoint_that_drops_the_arguments_fails_the_node_with_a_reason():
    """`bash -c "$*"` hands the joined command over as a script without its arguments: the
    job cannot run as asked, so the node fails with exit 78 and says why (never silently)."""
    import subprocess

    env = {"PATH": "/usr/bin:/bin", "AWS_BATCH_JOB_NODE_INDEX": "1"}
    result = subprocess.run(
        ["bash", "-c", 'exec bash -c "$*"', "entrypoint", *worker_command()],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == prelude.EFA_REQUIRED_EXIT
    assert "changed the command's arguments" in result.stderr


def test_the_old_prelude_lost_the_main_address_behind_eval():
    """The issue's reproduction, `bash -c 'eval "$@"' _ <the prelude command>`, against the
    prelude without its guard: the worker computed its own address. Guarded, it does not."""
    import subprocess

    env = {
        "PATH": "/usr/bin:/bin",
        "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS": MAIN,
        "AWS_BATCH_JOB_NODE_INDEX": "1",
    }
    command = worker_command()
    unguarded = [*command[:2], command[2].removeprefix(prelude.REPARSE_GUARD), *command[3:]]
    show = ["sh", "-c", 'echo "$MASTER_ADDR"']

    def master_addr(cmd: list[str]) -> str:
        result = subprocess.run(
            ["bash", "-c", 'eval "$@"', "_", *cmd[:4], *show],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        return result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""

    assert master_addr(unguarded) != MAIN
    assert master_addr(command) == MAIN


@pytest.mark.parametrize("kind", sorted(ENTRYPOINTS))
def test_a_python_functions_runner_arrives_byte_for_byte_behind_every_entrypoint(
    kind, bases, docker_engine
):
    """The runner (launcher.node.function) is many lines of Python with both quotes and
    backslashes, passed as ``python3 -c RUNNER``: what the node would run is what was sent."""
    import hashlib

    from launcher.node.function import RUNNER

    command = ("sh", "-c", 'printf %s "$1" | sha256sum', "-", RUNNER)
    code, out, err = run_worker(docker_engine, bases[kind], command)
    assert code == 0, err
    assert out[-1].split()[0] == hashlib.sha256(RUNNER.encode()).hexdigest(), (out, err)
