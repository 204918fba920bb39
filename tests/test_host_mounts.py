"""A job mounts the paths and devices of the machine it runs on (``--mount type=bind`` and
``type=device``) only where that is allowed (issue 43, item 2): on AWS where the stack runs
privileged jobs (``allow_privileged``), in a local run when the command line says
``--allow-host-mounts``, never because a job file says so. The mounts the launcher makes itself
(EFS, FSx for Lustre, EFA devices, shared memory) are not the job's and stay.

Why each mount is refused: through the node's Docker socket a job starts a container of its own
with ``--privileged`` and the host's ``/`` (Docker's security page: "only trusted users should
be allowed to control your Docker daemon", docs.docker.com/engine/security/#docker-daemon-attack-
surface); a writable ``/`` changes what the node runs as root; a disk device holds every other
job's files. The node's agent runs with ``ECS_DISABLE_PRIVILEGED=true`` on such a stack
(infra/cluster.py), which keeps ``privileged`` out but not a bind of the socket.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from devenv.clusters import cluster_info
from devenv.emulator import ACCOUNT, REGION
from launcher.api import Cluster, make_spec
from launcher.errors import UsageError
from launcher.job.jobspec import parse_mount
from tests.conftest import cdk_context
from tests.support import cli as cli_support

IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/base@sha256:" + "a" * 64
TRUSTED = "Trusted"  # a stack that runs privileged jobs, deployed beside the default one
COMMAND = ("python", "train.py")

# What a hostile job file or a careless flag asks for: each is root on the host.
HOST_MOUNTS = {
    "docker.sock": "type=bind,src=/var/run/docker.sock,dst=/var/run/docker.sock",
    "root": "type=bind,src=/,dst=/host",
    "disk": "type=device,src=/dev/nvme0n1",
}
# The same mounts as a job file's mappings.
FILE_MOUNTS = {
    "docker.sock": {"type": "bind", "src": "/var/run/docker.sock", "dst": "/var/run/docker.sock"},
    "root": {"type": "bind", "src": "/", "dst": "/host"},
    "disk": {"type": "device", "src": "/dev/nvme0n1"},
}
AWS_REFUSAL = (
    "launcher: error: mount {mount}: {stack} does not let jobs mount their node's paths or "
    "devices (its Docker socket or / alone are root on the node); deploy with -c "
    "allow_privileged=true to allow them"
)
LOCAL_REFUSAL = (
    "launcher: error: mount {mount}: a local run mounts this machine's paths or devices only "
    "when the command line allows it; pass --allow-host-mounts (allow_host_mounts=True in the "
    "Python API and TorchX)"
)


@pytest.fixture(scope="module")
def synth_trusted(tmp_path_factory):
    from devenv.synth import synthesize

    context = cdk_context(allow_privileged="true", stack_name=TRUSTED)
    return synthesize(context, tmp_path_factory.mktemp("cdk-trusted"))


def _deployed(server, synthesized):
    """The server holding ``synthesized``'s stacks alone (moto names both stacks' ECR
    repositories alike, so the two cannot stand side by side): deployed again only when the
    test before wanted the other one; the tests below are ordered so that happens once."""
    name = synthesized.config.stack_name
    if getattr(server, "host_mounts_stack", None) != name:
        server.reset()
        server.deploy(synthesized.outdir, synthesized.stack_names)
        server.host_mounts_stack = name
    return server


@pytest.fixture
def plain(moto_server, synth_default):
    """The default stack: no privileged jobs."""
    return _deployed(moto_server, synth_default)


@pytest.fixture
def trusted(moto_server, synth_trusted):
    """A stack that runs privileged jobs (allow_privileged=true)."""
    return _deployed(moto_server, synth_trusted)


def launcher(server, *args: str, **extra: str):
    env = {k: v for k, v in os.environ.items() if k != "LAUNCHER_STACK"}
    return cli_support.launcher(*args, env={**env, **server.env, **extra}, timeout=120)


def account(server) -> tuple[int, int]:
    """(job definitions, jobs in every queue): what a refused run must leave as it was."""
    batch = server.client("batch")
    queues = [q["jobQueueName"] for q in batch.describe_job_queues()["jobQueues"]]
    jobs = sum(
        len(
            batch.list_jobs(jobQueue=q, filters=[{"name": "AFTER_CREATED_AT", "values": ["0"]}])[
                "jobSummaryList"
            ]
        )
        for q in queues
    )
    return len(batch.describe_job_definitions()["jobDefinitions"]), jobs


def job_file(directory: Path, *mounts: dict[str, str], **keys: object) -> Path:
    """A job file as a cloned repository might hold it: two nodes of COMMAND, no workspace."""
    path = directory / "job.yaml"
    body = {"image": IMAGE, "workspace": False, "nodes": 2, "command": list(COMMAND)}
    path.write_text(json.dumps({**body, **keys, "mounts": list(mounts)}))  # JSON is YAML
    return path


def refused_once(result, line: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [line]
    assert result.stdout == ""


# --- AWS: the stack decides (the default stack first, then the one that allows them) ------------


@pytest.mark.parametrize("name", sorted(HOST_MOUNTS))
def test_a_host_mount_flag_is_refused_where_the_stack_runs_no_privileged_jobs(plain, name):
    before = account(plain)
    result = launcher(
        plain, "run", "--no-workspace", "--image", IMAGE, "--nodes", "2",
        "--mount", "type=efs,dst=/data", "--mount", HOST_MOUNTS[name], "--", *COMMAND,
    )  # fmt: skip
    refused_once(result, AWS_REFUSAL.format(mount=parse_mount(HOST_MOUNTS[name]), stack="EfaBatch"))
    assert account(plain) == before


@pytest.mark.parametrize("name", sorted(FILE_MOUNTS))
def test_a_job_files_host_mount_is_refused_there_too(plain, tmp_path, name):
    before = account(plain)
    result = launcher(plain, "run", "-f", str(job_file(tmp_path, FILE_MOUNTS[name])))
    refused_once(result, AWS_REFUSAL.format(mount=parse_mount(HOST_MOUNTS[name]), stack="EfaBatch"))
    assert account(plain) == before


def test_the_refusal_names_the_first_host_mount_and_counts_the_rest(plain, tmp_path):
    result = launcher(
        plain, "run", "--dryrun", "-f", str(job_file(tmp_path, *FILE_MOUNTS.values()))
    )
    mount = f"{parse_mount(HOST_MOUNTS['docker.sock'])} (and 2 more)"
    refused_once(result, AWS_REFUSAL.format(mount=mount, stack="EfaBatch"))


def test_the_launchers_own_mounts_stay_on_a_stack_without_privileged_jobs(plain):
    """EFS through its access point, the EFA devices of a p4d (4) and shared memory are the
    launcher's, not the job's host mounts: the default stack's job definition has them."""
    result = launcher(
        plain, "run", "--dryrun", "--no-workspace", "--image", IMAGE, "--nodes", "2",
        "--mount", "type=efs,dst=/data,readonly", "--shm-size", "8g", "--", *COMMAND,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    register = json.loads(result.stdout)["registerJobDefinition"]
    (node_range,) = register["nodeProperties"]["nodeRangeProperties"]
    container = node_range["container"]
    (efs,) = container["volumes"]
    assert efs["efsVolumeConfiguration"]["authorizationConfig"]["iam"] == "ENABLED"
    assert container["mountPoints"] == [
        {"sourceVolume": "efs", "containerPath": "/data", "readOnly": True}
    ]
    linux = container["linuxParameters"]
    assert [d["hostPath"] for d in linux["devices"]] == [
        f"/dev/infiniband/uverbs{i}" for i in range(4)
    ]
    assert linux["sharedMemorySize"] == 8192


def test_the_nodes_fsx_mount_is_the_launchers_own():
    """The node mounts FSx for Lustre at boot and the job binds the node's /fsx (jobdef): a
    host path in the definition, but the launcher's, so a stack without privileged jobs keeps
    it (no AWS call: the dry run of a spec without a workspace is built from the outputs)."""
    cluster = Cluster(cluster_info(fsx_file_system_id="fs-0123456789abcdef0"))
    fsx = parse_mount("type=fsx,dst=/scratch")
    requests = cluster.dryrun(list(COMMAND), image=IMAGE, nodes=2, mounts=(fsx,))
    register = requests["registerJobDefinition"]
    container = register["nodeProperties"]["nodeRangeProperties"][0]["container"]
    assert {"name": "fsx", "host": {"sourcePath": "/fsx"}} in container["volumes"]
    assert {"sourceVolume": "fsx", "containerPath": "/scratch", "readOnly": False} in container[
        "mountPoints"
    ]
    bind = parse_mount("type=bind,src=/fsx,dst=/scratch")
    with pytest.raises(UsageError, match="^mount type=bind,src=/fsx,dst=/scratch: EfaBatch"):
        cluster.dryrun(list(COMMAND), image=IMAGE, nodes=2, mounts=(bind,))


# --- local runs: the command line decides -----------------------------------------------------


def _nothing_local(tmp_path: Path) -> dict[str, str]:
    """A local run's places, none of which a refused run may touch: its state and EFS
    stand-in, and an engine that is not there (reaching for it would fail with exit 1)."""
    return {
        "LAUNCHER_LOCAL_STATE": str(tmp_path / "state"),
        "LAUNCHER_LOCAL_EFS": str(tmp_path / "efs"),
        "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock",
    }


def _local_file_run(server, tmp_path: Path, name: str, *flags: str):
    """``launcher run --local -f`` a cloned repository's job file holding mount ``name``."""
    repo = tmp_path / "repo"
    repo.mkdir()
    path = job_file(repo, FILE_MOUNTS[name])
    return launcher(server, *flags, "run", "--local", "-f", str(path), **_nothing_local(tmp_path))


def test_a_local_run_refuses_a_job_files_host_mount(plain, tmp_path):
    """The cloned repository's job file of the issue: ``mounts: [{type: bind, src: /, dst:
    /host}]`` wrote to this machine's / as root."""
    result = _local_file_run(plain, tmp_path, "root")
    refused_once(result, LOCAL_REFUSAL.format(mount=parse_mount(HOST_MOUNTS["root"])))
    assert [p.name for p in tmp_path.iterdir()] == ["repo"]


def test_a_local_run_refuses_a_host_mount_flag_without_the_allowing_flag(plain, tmp_path):
    result = launcher(
        plain, "run", "--local", "--no-workspace", "--image", IMAGE,
        "--mount", HOST_MOUNTS["docker.sock"], "--", *COMMAND, **_nothing_local(tmp_path),
    )  # fmt: skip
    refused_once(result, LOCAL_REFUSAL.format(mount=parse_mount(HOST_MOUNTS["docker.sock"])))
    assert list(tmp_path.iterdir()) == []


def test_a_job_file_cannot_allow_host_mounts_itself(plain, tmp_path):
    path = job_file(tmp_path, FILE_MOUNTS["root"], allow_host_mounts=True)
    result = launcher(plain, "run", "--local", "-f", str(path), **_nothing_local(tmp_path))
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"launcher: error: {path}: allow_host_mounts: not a key")


def test_the_command_line_flag_lets_a_local_job_write_to_a_host_directory(
    plain, docker_engine, registry, busybox_base, tmp_path
):
    """With ``--allow-host-mounts`` the job file's bind mount is made, as Docker makes
    ``-v SRC:DST``: the job writes into the directory and the file is there on the host.
    The flag speaks for this machine, so a stack without privileged jobs does not matter."""
    shared = tmp_path / "shared"
    shared.mkdir()
    path = tmp_path / "job.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            image: {busybox_base}
            workspace: false
            mounts: [{{type: bind, src: {shared}, dst: /shared}}]
            command: echo written by the job > /shared/out
            """
        )
    )
    run = ("run", "--local", "-f", str(path), "--follow")
    env = {
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_REGISTRY": registry.host,
        "LAUNCHER_LOCAL_STATE": str(tmp_path / "state"),
        "LAUNCHER_LOCAL_EFS": str(tmp_path / "efs"),
    }
    refused = launcher(plain, *run, **env)
    assert refused.returncode == 2, refused.stderr
    allowed = launcher(plain, *run, "--allow-host-mounts", **env)
    assert allowed.returncode == 0, allowed.stderr
    assert (shared / "out").read_text() == "written by the job\n"


def test_the_python_api_asks_for_the_same_explicit_word(tmp_path):
    """``Cluster.local(allow_host_mounts=True)`` is the flag's equivalent; a job file's spec
    alone is refused before anything is built (no engine, no AWS call)."""
    from launcher.job import jobfile

    spec = jobfile.load(job_file(tmp_path, FILE_MOUNTS["root"])).spec()
    cluster = Cluster(cluster_info())
    with pytest.raises(UsageError, match="pass --allow-host-mounts"):
        cluster.local(tmp_path / "efs").run(spec=spec)
    allowed = cluster.local(tmp_path / "efs", allow_host_mounts=True).dryrun(spec=spec)
    container = allowed["registerJobDefinition"]["nodeProperties"]["nodeRangeProperties"][0][
        "container"
    ]
    assert {"name": "bind0", "host": {"sourcePath": "/"}} in container["volumes"]
    assert not (tmp_path / "efs").exists()


# --- a stack that runs privileged jobs --------------------------------------------------------


@pytest.mark.parametrize("given", ["flags", "file"])
def test_a_stack_that_runs_privileged_jobs_takes_them_as_before(trusted, tmp_path, given):
    """allow_privileged=true: the job's definition carries the node's socket, its / and its
    disk, beside the launcher's EFS and EFA devices (one node: moto's DescribeJobDefinitions
    leaves a multi-node definition's nodeProperties out)."""
    if given == "flags":
        mounts = [a for m in HOST_MOUNTS.values() for a in ("--mount", m)]
        args = ["--no-workspace", "--image", IMAGE, *mounts, "--", *COMMAND]
    else:
        args = ["-f", str(job_file(tmp_path, *FILE_MOUNTS.values(), nodes=1))]
    result = launcher(trusted, "--stack", TRUSTED, "run", *args)
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip().splitlines()[-1]
    batch = trusted.client("batch")
    (job,) = batch.describe_jobs(jobs=[job_id])["jobs"]
    (definition,) = batch.describe_job_definitions(jobDefinitions=[job["jobDefinition"]])[
        "jobDefinitions"
    ]
    container = definition["containerProperties"]
    hosts = {v["host"]["sourcePath"] for v in container["volumes"] if "host" in v}
    assert hosts == {"/var/run/docker.sock", "/"}
    assert any("efsVolumeConfiguration" in v for v in container["volumes"])
    devices = [d["hostPath"] for d in container["linuxParameters"]["devices"]]
    assert devices == [f"/dev/infiniband/uverbs{i}" for i in range(4)] + ["/dev/nvme0n1"]


@pytest.mark.parametrize("name", sorted(FILE_MOUNTS))
def test_a_local_run_refuses_a_job_files_host_mount_even_where_the_stack_allows_them(
    trusted, tmp_path, name
):
    """The stack's allow_privileged speaks for its nodes, not for this machine."""
    result = _local_file_run(trusted, tmp_path, name, "--stack", TRUSTED)
    refused_once(result, LOCAL_REFUSAL.format(mount=parse_mount(HOST_MOUNTS[name])))
    assert [p.name for p in tmp_path.iterdir()] == ["repo"]


# --- a privileged container, locally: the command line decides too ----------------------------

LOCAL_PRIVILEGED_REFUSAL = (
    "launcher: error: privileged: a local run starts a privileged container (root on this "
    "machine: its devices, its network, its files) only when the command line asks for it; pass "
    "--privileged (allow_privileged=True in the Python API and TorchX), not a job file's "
    "privileged: true"
)


def test_a_job_files_privileged_is_refused_locally_even_where_the_stack_allows_it(
    trusted, tmp_path
):
    """A privileged container gets every device and capability of the machine (Docker's run
    reference, "Runtime privilege and Linux capabilities"), which is root here as a bind of
    / is: a cloned repository's ``privileged: true`` alone is refused before anything is
    built or started, on the stack that runs privileged jobs on its nodes too."""
    repo = tmp_path / "repo"
    repo.mkdir()
    path = job_file(repo, nodes=1, privileged=True)
    result = launcher(
        trusted, "--stack", TRUSTED, "run", "--local", "-f", str(path), **_nothing_local(tmp_path)
    )
    refused_once(result, LOCAL_PRIVILEGED_REFUSAL)
    assert [p.name for p in tmp_path.iterdir()] == ["repo"]


def test_privileged_on_the_command_line_is_the_users_word(trusted, tmp_path):
    """``--privileged`` typed on the command line (or ``allow_privileged=True`` in Python)
    asks for it: the local definition is privileged."""
    path = job_file(tmp_path, nodes=1, privileged=True)
    result = launcher(
        trusted, "--stack", TRUSTED, "run", "--local", "--dryrun", "--privileged",
        "-f", str(path), **_nothing_local(tmp_path),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    requests = json.loads(result.stdout)
    assert requests["registerJobDefinition"]["containerProperties"]["privileged"] is True

    spec = make_spec(["true"], image=IMAGE, privileged=True)
    with pytest.raises(UsageError, match="pass --privileged"):
        Cluster(cluster_info(allow_privileged=True)).local(tmp_path / "efs").dryrun(spec=spec)
    allowed = (
        Cluster(cluster_info(allow_privileged=True))
        .local(tmp_path / "efs", allow_privileged=True)
        .dryrun(spec=spec)
    )
    assert allowed["registerJobDefinition"]["containerProperties"]["privileged"] is True
