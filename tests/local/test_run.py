"""`launcher run --local`: the AWS job definition on the local Docker engine, node by node."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from devenv.clusters import cluster_info
from launcher import local
from launcher.api import make_spec
from launcher.errors import UsageError
from launcher.job import jobdef
from launcher.job.info import CANCEL_REASON
from launcher.job.jobspec import JobSpec, Mount
from tests.conftest import ROOT
from tests.support import cli
from tests.support.local_jobs import one_node_requests
from tests.support.processes import rendezvous_port
from tests.support.terminal import under_a_terminal

RENDEZVOUS = (ROOT / "demo" / "workspace" / "rendezvous.sh").read_text()


def spec(**kwargs) -> JobSpec:
    values = {"name": "demo", "command": ("sh", "-c", "echo hi"), "image": "img", "nodes": 2}
    return JobSpec(**(values | kwargs))


def test_node_containers_reproduce_the_batch_environment(tmp_path):
    requests = jobdef.build(spec(mounts=(Mount("bind", "/data", "/srv"),)), cluster_info())
    container = requests.register["nodeProperties"]["nodeRangeProperties"][0]["container"]
    main, worker = (
        local.node_container(
            container,
            job_id="local-x",
            job_name="demo",
            queue="q",
            node=n,
            nodes=2,
            efs_dir=str(tmp_path),
            infiniband=False,
            gpus=False,
        )
        for n in (0, 1)
    )
    # The job's own network: node 0's namespace, loopback only, which the worker joins.
    assert (main["network_mode"], worker["network_mode"]) == ("none", "container:efa-batch-x-1-0")
    assert main["cap_drop"] == worker["cap_drop"] == ["NET_RAW"]
    assert main["security_opt"] == ["no-new-privileges"]
    assert main["environment"]["NCCL_SOCKET_IFNAME"] == "lo"  # the only interface there
    assert main["environment"]["AWS_BATCH_JOB_NODE_INDEX"] == "0"
    assert main["environment"]["AWS_BATCH_JOB_NUM_NODES"] == "2"
    assert main["environment"]["AWS_BATCH_JOB_MAIN_NODE_INDEX"] == "0"
    assert "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS" not in main["environment"]
    assert worker["environment"]["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"] == "127.0.0.1"
    assert main["command"] == container["command"]  # the same rendezvous prelude
    assert {u.name: (u.soft, u.hard) for u in main["ulimits"]}["memlock"] == (-1, -1)
    assert main["shm_size"] == f"{container['linuxParameters']['sharedMemorySize']}m"
    assert main["devices"] == []  # no /dev/infiniband here: EFA devices dropped
    assert main["volumes"] == {
        str(tmp_path): {"bind": "/mnt/efs", "mode": "rw"},
        "/srv": {"bind": "/data", "mode": "rw"},
    }
    with_efa = local.node_container(
        container,
        job_id="local-x",
        job_name="demo",
        queue="q",
        node=0,
        nodes=2,
        efs_dir="/e",
        infiniband=True,
        gpus=True,
    )
    assert with_efa["devices"][0] == "/dev/infiniband/uverbs0:/dev/infiniband/uverbs0:rwm"
    assert with_efa["device_requests"][0].count == 8


@pytest.fixture(scope="module")
def stack(moto_server, synth_default):
    moto_server.reset()
    return moto_server.deploy(synth_default.outdir, synth_default.stack_names)["EfaBatch"]


@pytest.fixture
def env(moto_server, docker_engine, registry, tmp_path, monkeypatch):
    # The library calls below (LocalBackend, its Store) read these from the environment.
    monkeypatch.setenv("DOCKER_HOST", docker_engine.host)
    monkeypatch.setenv("LAUNCHER_LOCAL_STATE", str(tmp_path / "state"))
    return {
        **os.environ,
        **moto_server.env,
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_REGISTRY": registry.host,
        "LAUNCHER_LOCAL_STATE": str(tmp_path / "state"),
        "LAUNCHER_LOCAL_EFS": str(tmp_path / "efs"),
    }


def launcher(env, *args, timeout=180) -> subprocess.CompletedProcess:
    return cli.launcher(*args, env=env, timeout=timeout)


def no_job_containers(docker_engine) -> bool:
    client = docker_engine.client()
    return client.containers.list(all=True, filters={"label": local.LABEL}) == []


@pytest.fixture(scope="module")
def eval_base(docker_engine, registry) -> str:
    """A base whose ENTRYPOINT re-parses the command with eval, as AWS's PyTorch DLCs do."""
    from tests.support.entrypoint_bases import push_entrypoint_base

    return push_entrypoint_base(docker_engine.client(), f"{registry.host}/dlc-like", "dlc-eval")


@pytest.mark.parametrize("base", ["busybox_base", "eval_base"])
def test_two_nodes_rendezvous_over_tcp_with_the_launcher_variables(
    stack, env, base, docker_engine, tmp_path, request
):
    busybox_base = request.getfixturevalue(base)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "rendezvous.sh").write_text(RENDEZVOUS)
    (ws / "rendezvous.sh").chmod(0o755)
    port = str(rendezvous_port())
    result = launcher(
        env,
        "run",
        "--local",
        "--follow",
        "--nodes",
        "2",
        "--image",
        busybox_base,
        "--workspace",
        str(ws),
        "--port",
        port,
        "--",
        "/workspace/rendezvous.sh",
    )
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip().splitlines()[-1]
    assert job_id.startswith("local-")
    err = result.stderr
    assert f"[node 0] rank 0 of 2: main at 127.0.0.1:{port}" in err
    assert f"[node 1] rank 1 of 2: main at 127.0.0.1:{port}" in err
    assert "[node 0] rank 0 received: hello from rank 1" in err
    # One line for the devices this machine lacks (EFA, and GPUs when the job asks for them).
    assert err.count("no EFA") == 1 and "expected for a local run" in err
    assert (tmp_path / "efs" / "rendezvous").read_text() == "rendezvous complete\n"
    assert "SUCCEEDED" in launcher(env, "status", job_id).stdout
    assert "rank 1 of 2: main at" in launcher(env, "logs", job_id, "--node", "1").stdout
    listed = json.loads(launcher(env, "list", "--local", "--all", "-o", "json").stdout)
    assert [j["job_id"] for j in listed] == [job_id]
    # The pool it was given (none named: the stack's default), and the image status shows.
    default_pool = json.loads(launcher(env, "outputs", "-o", "json").stdout)["pool_name"]
    status = json.loads(launcher(env, "status", job_id, "-o", "json").stdout)
    assert (listed[0]["pool"], listed[0]["image"]) == (default_pool, status["image"])
    assert "@sha256:" in status["image"]  # the workspace image the job ran
    table = launcher(env, "list", "--local", "--all").stdout.splitlines()
    assert table[1].split()[:3] == [job_id, "rendezvous", default_pool]
    assert no_job_containers(docker_engine)


def _start(env, command: str, busybox_base, **spec_kwargs) -> str:
    """Start through the library, with a definition the CLI would build (timeout aside)."""
    requests = jobdef.build(
        spec(
            command=("sh", "-c", command),
            image=busybox_base,
            rendezvous_port=rendezvous_port(),
            **spec_kwargs,
        ),
        cluster_info(),
    )
    return local.LocalBackend("q", env["LAUNCHER_LOCAL_EFS"]).schedule(requests)


def test_main_node_failure_fails_the_job_and_stops_the_workers(env, busybox_base, docker_engine):
    job_id = _start(
        env, 'if [ "$AWS_BATCH_JOB_NODE_INDEX" = 0 ]; then exit 3; fi; sleep 600', busybox_base
    )
    job = local.LocalBackend().wait(job_id, timeout=60)
    assert (job.state, job.reason) == ("FAILED", local.EXIT_REASON)
    assert job.exit_code == 3
    assert no_job_containers(docker_engine)


def test_killed_main_node_fails_the_job(env, busybox_base, docker_engine):
    job_id = _start(env, "sleep 600", busybox_base)
    client = docker_engine.client()
    main = client.containers.get(local.Store().load(job_id).containers[0])
    main.kill()
    job = local.LocalBackend().wait(job_id, timeout=60)
    assert job.state == "FAILED" and job.exit_code == 137
    assert no_job_containers(docker_engine)


def test_timeout_stops_every_node(env, busybox_base, docker_engine):
    requests = jobdef.build(
        spec(command=("sleep", "600"), image=busybox_base, rendezvous_port=rendezvous_port()),
        cluster_info(),
    )
    requests.register["timeout"] = {"attemptDurationSeconds": 2}  # the CLI's floor is 60 s
    start = time.time()
    job_id = local.LocalBackend("q", env["LAUNCHER_LOCAL_EFS"]).schedule(requests)
    job = local.LocalBackend().wait(job_id, timeout=60)
    assert (job.state, job.reason) == ("FAILED", local.TIMEOUT_REASON)
    assert time.time() - start < 30
    assert no_job_containers(docker_engine)


def test_cancel_during_the_run(env, busybox_base, docker_engine):
    job_id = _start(env, "echo started; sleep 600", busybox_base)
    time.sleep(1)
    result = launcher(env, "cancel", job_id)
    assert result.returncode == 0, result.stderr
    job = local.LocalBackend().wait(job_id, timeout=60)
    assert (job.state, job.reason) == ("FAILED", "cancelled with launcher cancel")
    assert "started" in launcher(env, "logs", job_id).stdout
    assert launcher(env, "cancel", job_id).returncode == 2
    assert no_job_containers(docker_engine)


def test_a_cancel_gives_the_workers_sigterm_and_its_grace(env, busybox_base, docker_engine):
    """On Batch a stopped job's containers get SIGTERM, then SIGKILL after the stop timeout
    (ECS StopTask), so a worker can checkpoint. Locally the workers share the main node's
    process ids (containers.node_name): were the main node stopped first, the kernel would
    kill them outright, so they are stopped first."""
    efs = Path(env["LAUNCHER_LOCAL_EFS"])
    job_id = _start(
        env,
        'if [ "$AWS_BATCH_JOB_NODE_INDEX" != 0 ]; then '
        "trap 'echo checkpoint > /mnt/efs/worker-term; exit 0' TERM; fi; "
        "echo started; sleep 600 & wait",
        busybox_base,
    )
    deadline = time.time() + 30
    while "started" not in launcher(env, "logs", job_id, "--node", "1").stdout:
        assert time.time() < deadline, "the worker did not start"
        time.sleep(0.5)
    assert launcher(env, "cancel", job_id).returncode == 0
    local.LocalBackend().wait(job_id, timeout=60)
    assert [p.read_text() for p in efs.rglob("worker-term")] == ["checkpoint\n"]
    assert no_job_containers(docker_engine)


def run_true_locally(env, image: str, port: str, *extra: str) -> subprocess.CompletedProcess:
    return launcher(
        env,
        "run",
        "--local",
        "--no-workspace",
        "--image",
        image,
        "--port",
        port,
        *extra,
        "--",
        "true",
    )


def test_port_in_use_is_a_clear_error(stack, env, busybox_base, docker_engine):
    """On this machine's network (--local-network host) the rendezvous port is the machine's;
    in the job's own network (the default) a port busy here is no conflict."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        own = run_true_locally(env, busybox_base, port, "--nodes", "2", "--follow")
        assert own.returncode == 0, own.stderr
        # A gang's main node needs the port; a one-node job has no rendezvous to offer.
        result = run_true_locally(
            env, busybox_base, port, "--nodes", "2", "--local-network", "host"
        )
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert f"127.0.0.1:{port} is in use" in line
    assert no_job_containers(docker_engine)


def test_no_docker_daemon_says_how_to_start_one(stack, env, busybox_base, tmp_path):
    env = {**env, "DOCKER_HOST": f"unix://{tmp_path}/absent.sock"}
    result = run_true_locally(env, busybox_base, str(rendezvous_port()))
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert "no Docker daemon at unix://" in line and "start one" in line


def test_cancel_asks_the_supervisor_and_only_it_writes_the_outcome(env, busybox_base):
    """One writer: cancel signals the supervisor (bug: both wrote the state file)."""
    job_id = _start(env, "sleep 600", busybox_base)
    backend = local.LocalBackend()
    before = backend.cancel(job_id)
    assert before.state == "RUNNING"
    job = local.LocalBackend().wait(job_id, timeout=30)
    assert (job.state, job.reason, job.cancelled) == ("FAILED", CANCEL_REASON, True)


def test_cancel_after_the_supervisor_died_ends_the_job(env, busybox_base, docker_engine):
    """The cancel ends what the dead supervisor would have: the nodes, and the attempt's
    runtime directory (its start gate here; a job's secrets where it has them)."""
    job_id = _start(env, "sleep 600", busybox_base)
    record = local.Store().load(job_id)
    os.kill(record.writer.pid, 9)
    time.sleep(0.5)
    local.LocalBackend().cancel(job_id)
    job = local.LocalBackend().wait(job_id, timeout=5)
    assert (job.state, job.reason) == ("FAILED", local.LOST_REASON)
    assert no_job_containers(docker_engine)
    assert record.runtime_dir is not None and not os.path.exists(record.runtime_dir)


def test_a_docker_failure_is_a_system_failure_exit_1(stack, env, docker_engine):
    """An image nobody can pull is Docker failing, not bad input (bug: exit 2)."""
    image = f"127.0.0.1:{rendezvous_port()}/absent/image:1"
    result = run_true_locally(env, image, str(rendezvous_port()))
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.strip().splitlines()[-1:]
    assert line.startswith("launcher: error: Docker: could not pull 127.0.0.1:")
    assert no_job_containers(docker_engine)


def test_logs_since_applies_to_local_jobs(env, busybox_base):
    """--since reads the containers' timestamps (bug: ignored for local jobs)."""
    job_id = _start(env, "echo early; sleep 3; echo late", busybox_base)
    local.LocalBackend().wait(job_id, timeout=60)
    recent = launcher(env, "logs", job_id, "--node", "0", "--since", "2s").stdout
    everything = launcher(env, "logs", job_id, "--node", "0").stdout
    assert "late" in recent and "early" not in recent
    assert "early" in everything and "late" in everything


def test_a_jobs_escape_sequences_are_shown_not_obeyed_on_a_terminal(env, busybox_base):
    """The review's attack: a job prints a clipboard write (ESC ] 52), a window title
    (ESC ] 0) and a line that erases itself to print a forged ``launcher: job SUCCEEDED``.
    ``launcher logs`` in a real terminal shows them as text (no ESC, no carriage return from
    the job reaches it); piped, and with ``--raw``, the bytes are the job's."""
    hostile = (
        r"printf '\033]52;c;cm0gLXJmIH4K\007\033]0;owned\007half\r\033[2Klauncher: job SUCCEEDED\n'"
    )
    job_id = _start(env, hostile, busybox_base, nodes=1)
    local.LocalBackend().wait(job_id, timeout=60)
    terminal_env = {**env, "TERM": "xterm", "NO_COLOR": "1"}
    seen = under_a_terminal([*cli.LAUNCHER, "logs", job_id], terminal_env, columns=200)
    line = next(x for x in seen.split("\r\n") if "SUCCEEDED" in x)
    assert line == (
        "[node 0] \\x1b]52;c;cm0gLXJmIH4K\\x07\\x1b]0;owned\\x07half\\r\\x1b[2K"
        "launcher: job SUCCEEDED"
    )
    assert "\x1b" not in seen and "\x07" not in seen
    raw = under_a_terminal([*cli.LAUNCHER, "logs", "--raw", job_id], terminal_env, columns=200)
    assert "\x1b]52;c;cm0gLXJmIH4K\x07" in raw
    piped = subprocess.run(
        [*cli.LAUNCHER, "logs", job_id], env=env, capture_output=True, timeout=60, check=True
    ).stdout  # bytes: text mode would read the carriage return as a line end
    assert b"\x1b]0;owned\x07half\r\x1b[2Klauncher: job SUCCEEDED\n" in piped


def test_following_goes_on_into_each_retry(env, busybox_base):
    """A node lost in attempt 1 (exit 75, retried) and 2: a follower started with the job sees
    every attempt's lines in order and ends with the job, as the AWS follower does (bug: it
    read attempt 1 only and ended there)."""
    command = 'echo "attempt $AWS_BATCH_JOB_ATTEMPT"; [ "$AWS_BATCH_JOB_ATTEMPT" -ge 3 ] || exit 75'
    job_id = _start(env, command, busybox_base, nodes=1, attempts=3)
    followed = [
        line.message
        for line in local.LocalBackend().log_iter(job_id, follow=True, poll=0.05)
        if line.message.startswith("attempt")
    ]
    assert followed == ["attempt 1", "attempt 2", "attempt 3"]
    assert local.LocalBackend().wait(job_id, timeout=60).state == "SUCCEEDED"
    # Without --follow, the latest attempt alone; --attempt picks another.
    assert [x.message for x in local.LocalBackend().log_iter(job_id)][-1] == "attempt 3"
    assert "attempt 1" in [x.message for x in local.LocalBackend().log_iter(job_id, attempt=1)]


def test_a_relative_efs_stand_in_is_the_directory_not_a_docker_volume(
    stack, env, busybox_base, tmp_path
):
    """Docker reads a relative bind source as a volume's name: the files must land in the
    directory the user named, relative to where the launcher ran."""
    (tmp_path / "here").mkdir()
    result = cli.launcher(
        "run",
        "--local",
        "--no-workspace",
        "--image",
        busybox_base,
        "--local-efs",
        "shared",
        "--follow",
        "--",
        "sh",
        "-c",
        'echo written > "$LAUNCHER_EFS/proof"',
        env=env,
        cwd=tmp_path / "here",
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "here" / "shared" / "proof").read_text() == "written\n"
    assert f"EFS at {tmp_path / 'here' / 'shared'}" in result.stderr


def test_logs_into_a_reader_that_leaves_early_end_quietly(env, busybox_base):
    """``launcher logs JOB | head -1``: the reader's exit is SIGPIPE's 141 and no traceback."""
    job_id = _start(env, "seq 1 20000", busybox_base, nodes=1)
    local.LocalBackend().wait(job_id, timeout=60)
    piped = subprocess.run(
        [
            "bash",
            "-c",
            f'{shlex.join(cli.LAUNCHER)} logs {job_id} | head -1; echo "${{PIPESTATUS[0]}}"',
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert piped.stdout.splitlines()[1:] == ["141"] and piped.stderr == ""


@pytest.mark.parametrize("compression", [None, "gzip", "zstd"])
def test_a_workspace_image_either_way_runs_here_or_is_refused_before_any_upload(
    stack, env, busybox_base, docker_engine, registry, tmp_path, compression
):
    """The local engine pulls the image: by default the layer is what it reads (gzip before
    Docker 23.0), and a compression it cannot read is refused in one line, nothing pushed."""
    from launcher.image import pullers
    from launcher.image.compress import Compression

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hello.txt").write_text(f"compressed with {compression}\n")
    flags = ("--compression", compression) if compression else ()
    registry.requests()
    result = launcher(
        env,
        "run",
        "--local",
        "--follow",
        "--nodes",
        "1",
        "--image",
        busybox_base,
        "--workspace",
        str(ws),
        *flags,
        "--",
        "cat",
        "/workspace/hello.txt",
    )
    engine = pullers.docker_engine(docker_engine.client().version()["Version"])
    if compression is None or Compression(compression) in engine.reads:
        assert result.returncode == 0, result.stderr
        assert f"[node 0] compressed with {compression}" in result.stderr
        return
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert f"--compression zstd: {engine.name} cannot read zstd layers" in line
    assert not [r for r in registry.requests() if r.method in ("POST", "PATCH", "PUT")]


def test_a_secret_a_tmpfs_and_a_ulimit_on_the_local_engine(env, busybox_base, tmp_path):
    """The local backend reads a job's secrets from the file $LAUNCHER_LOCAL_SECRETS names (keyed
    by the reference, a JSON value's key picked by NAME#KEY), hands them to the containers'
    environment at start as the ECS agent does, and keeps them out of the job's record and the
    launcher's own output."""
    value = "s3cret-" + os.urandom(6).hex()
    secrets = tmp_path / "secrets.json"
    secrets.write_text(json.dumps({"team/wandb": {"key": value}, "ssm:/team/hf": "hf-token"}))
    script = (
        'echo "sha=$(printf %s "$WANDB_API_KEY" | sha256sum)"; echo hf=$HF_TOKEN; '
        "grep -q ' /scratch tmpfs ' /proc/mounts && echo tmpfs-ok; "
        "grep 'Max processes' /proc/self/limits"
    )
    requests = one_node_requests(
        script,
        busybox_base,
        secrets={"WANDB_API_KEY": "team/wandb#key", "HF_TOKEN": "ssm:/team/hf"},
        tmpfs={"/scratch": "64m"},
        ulimits={"nproc": "4096:8192"},
    )
    backend = local.LocalBackend("q", env["LAUNCHER_LOCAL_EFS"], secrets_file=secrets)
    job_id = backend.schedule(requests)
    info = local.LocalBackend().wait(job_id, timeout=60)
    assert info.state == "SUCCEEDED", info
    lines = [line.message for line in local.LocalBackend().log_iter(job_id, node=0)]
    digest = hashlib.sha256(value.encode()).hexdigest()
    assert f"sha={digest}  -" in lines and "hf=hf-token" in lines and "tmpfs-ok" in lines
    assert any(line.split()[2:5] == ["4096", "8192", "processes"] for line in lines), lines
    state = tmp_path / "state"
    assert not [p for p in state.rglob("*") if p.is_file() and value in p.read_text()]

    secrets.write_text(json.dumps({"team/other": "x"}))
    with pytest.raises(UsageError, match="has no entry 'ssm:team/hf'|has no entry 'team/wandb'"):
        backend.schedule(requests)  # refused before any container starts


def test_two_nodes_share_the_fsx_stand_in(env, busybox_base, tmp_path, docker_engine):
    """Node 0 writes on FSx, node 1 reads it: the local backend maps the nodes' /fsx mount
    (the job definition's fsx host volume) to one directory, as it does EFS."""
    # The main node waits for the worker's answer: a job ends with its main node, on Batch as
    # here, so a worker that has not started by then never does.
    script = (
        'if [ "$AWS_BATCH_JOB_NODE_INDEX" = 0 ]; then echo written-by-main > "$LAUNCHER_FSX/hi";'
        ' for i in $(seq 100); do [ -f "$LAUNCHER_FSX/ack" ] && break; sleep 0.1; done;'
        ' else for i in $(seq 100); do [ -f "$LAUNCHER_FSX/hi" ] && break; sleep 0.1; done;'
        ' echo "read $(cat "$LAUNCHER_FSX/hi")"; touch "$LAUNCHER_FSX/ack"; fi'
    )
    job = make_spec(
        ["sh", "-c", script],
        image=busybox_base,
        nodes=2,
        efa="off",
        rendezvous_port=rendezvous_port(),
    )
    with_fsx = cluster_info(efa=False, fsx_file_system_id="fs-0123456789abcdef0")
    requests = jobdef.build(job, with_fsx)
    fsx = tmp_path / "fsx"
    job_id = local.LocalBackend("q", env["LAUNCHER_LOCAL_EFS"], fsx_dir=str(fsx)).schedule(requests)
    info = local.LocalBackend().wait(job_id, timeout=60)
    assert info.state == "SUCCEEDED", info
    assert (fsx / "hi").read_text() == "written-by-main\n"
    assert "read written-by-main" in [
        m.message for m in local.LocalBackend().log_iter(job_id, node=1)
    ]
    assert no_job_containers(docker_engine)


# --- what a local job reaches on this machine ------------------------------------------------
#
# A local job runs the user's chosen image, as root, on the user's own machine: beside the
# user's traffic (a registry push with its Authorization header) and loopback services
# (credential helpers, notebooks, databases). Its nodes get a network of their own.


def _one_node(paths, command: str, image: str, network: str | None = None, **spec_kwargs):
    requests = one_node_requests(command, image, **spec_kwargs)
    backend = local.LocalBackend("q", paths["LAUNCHER_LOCAL_EFS"], network=network)
    job_id = backend.schedule(requests)
    info = local.LocalBackend().wait(job_id, timeout=60)
    return info, [line.message for line in local.LocalBackend().log_iter(job_id, node=0)]


def test_bridge_on_an_engine_without_one_is_refused_not_loopback_in_silence(
    stack, env, busybox_base, docker_engine
):
    """--local-network bridge asks for a way out. An engine started with --bridge=none (the
    tests' own) gave the container loopback only and said nothing; now the run fails, saying
    why. On an engine with its bridge, the job has an interface besides lo."""
    result = launcher(
        env,
        "run",
        "--local",
        "--local-network",
        "bridge",
        "--no-workspace",
        "--image",
        busybox_base,
        "--follow",
        "--",
        "sh",
        "-c",
        "ls /sys/class/net",
    )
    if docker_engine.client().networks.list(names=["bridge"]):
        assert result.returncode == 0 and "eth0" in result.stderr, result.stderr
    else:
        assert result.returncode == 1
        assert result.stderr.splitlines()[-1] == (
            "launcher: error: Docker: this engine has no default bridge network "
            "(dockerd --bridge=none), so --local-network bridge cannot reach out; use none, "
            "or host"
        )
    assert no_job_containers(docker_engine)


def test_a_local_job_reaches_no_loopback_service_of_this_machine(env, busybox_base):
    """A server on this machine's 127.0.0.1 (where a notebook or a credential helper listens)
    is out of reach of a local job by default, and within reach of one run with
    --local-network host, which says what it is."""
    connections = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]

        def serve() -> None:  # answer and hang up, as a service would for a stranger
            with contextlib.suppress(OSError):
                while True:
                    connection, _ = server.accept()
                    connections.append(connection.close())

        threading.Thread(target=serve, daemon=True).start()
        command = f"nc -w 2 127.0.0.1 {port} </dev/null && echo reached || echo unreachable"
        for network, outcome in ((None, "unreachable"), ("host", "reached")):
            info, lines = _one_node(env, command, busybox_base, network)
            assert info.state == "SUCCEEDED", info
            assert outcome in lines, (network, lines)
    assert len(connections) == 1  # the host-network run's, and only it


def test_a_local_job_has_loopback_only_and_no_raw_sockets(env, busybox_base):
    """What a packet sniffer needs: an interface carrying the machine's traffic and a raw
    socket (CAP_NET_RAW, which Docker grants by default). A local job has neither: its network
    is loopback alone, and every node runs without NET_RAW and with no-new-privileges."""
    import sys

    from devenv.host_python import host_python_mounts

    probe = (
        "import os, socket\n"
        "print('interfaces', ' '.join(sorted(os.listdir('/sys/class/net'))))\n"
        "try:\n"
        "    socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(3))\n"
        "    print('raw socket opened')\n"
        "except PermissionError:\n"
        "    print('raw sockets refused')\n"
        "print('NoNewPrivs', open('/proc/self/status').read().split('NoNewPrivs:')[1].split()[0])\n"
    )
    command = f"{sys.executable} -c {shlex.quote(probe)}"
    info, lines = _one_node(env, command, busybox_base, mounts=host_python_mounts())
    assert info.state == "SUCCEEDED", (info, lines)
    assert {"interfaces lo", "raw sockets refused", "NoNewPrivs 1"} <= set(lines), lines


def test_local_secrets_stay_out_of_the_container_configuration(
    env, busybox_base, tmp_path, docker_engine
):
    """`docker inspect` shows a container's environment to anyone who may use the engine; a
    local job's secrets reach the command through a file on a tmpfs of the user's (0700
    directory) that the prelude reads, and the file goes when the attempt ends."""
    value = "s3cret-" + os.urandom(6).hex()
    secrets = tmp_path / "secrets.json"
    secrets.write_text(json.dumps({"team/wandb": value}))
    requests = one_node_requests(
        'printf %s "$WANDB_API_KEY" | sha256sum; env | grep -c LAUNCHER_SECRETS; sleep 30',
        busybox_base,
        secrets={"WANDB_API_KEY": "team/wandb"},
    )
    backend = local.LocalBackend("q", env["LAUNCHER_LOCAL_EFS"], secrets_file=secrets)
    job_id = backend.schedule(requests)
    record = local.Store().load(job_id)
    container = docker_engine.client().containers.get(record.containers[0])
    assert value not in json.dumps(container.attrs)
    (delivered,) = [m["Source"] for m in container.attrs["Mounts"] if "secrets" in m["Destination"]]
    assert os.stat(os.path.dirname(delivered)).st_mode & 0o777 == 0o700
    assert value in Path(delivered).read_text()
    local.LocalBackend().cancel(job_id)
    local.LocalBackend().wait(job_id, timeout=60)
    lines = [line.message for line in local.LocalBackend().log_iter(job_id, node=0)]
    assert f"{hashlib.sha256(value.encode()).hexdigest()}  -" in lines
    assert "0" in lines  # the variable naming the file is unset before the command runs
    assert not os.path.exists(delivered)


def test_what_the_launcher_writes_is_the_users_alone(env, busybox_base, tmp_path):
    """Job records hold --env values, node logs the job's output, the cache every workspace
    file's sha256: directories 0700 and files 0600, whatever the umask."""
    from launcher import cache

    old = os.umask(0o022)
    try:
        info, _ = _one_node(env, "echo hello", busybox_base, env={"TOKEN": "t0ken"})
        cache.write_atomically(cache.directory() / "workspaces" / "probe.index", b"x")
    finally:
        os.umask(old)
    assert info.state == "SUCCEEDED"
    for root in (tmp_path / "state", cache.directory()):
        found = [root, *root.rglob("*")]
        assert len(found) > 1
        modes = {p: p.stat().st_mode & 0o777 for p in found}
        assert {p: m for p, m in modes.items() if p.is_dir() and m != 0o700} == {}
        assert {p: m for p, m in modes.items() if p.is_file() and m != 0o600} == {}


def test_every_node_runs_even_when_the_main_node_ends_at_once(env, busybox_base):
    """Workers join the main node's network, which exists only while the main node runs: the
    prelude holds every node's command until the backend has started them all (the start
    gate), so a main node that ends at once still had its workers beside it."""
    job_id = _start(env, 'echo "node $AWS_BATCH_JOB_NODE_INDEX ran"', busybox_base, nodes=3)
    assert local.LocalBackend().wait(job_id, timeout=60).state == "SUCCEEDED"
    for node in range(3):
        lines = [m.message for m in local.LocalBackend().log_iter(job_id, node=node)]
        assert f"node {node} ran" in lines, (node, lines)
