"""The efa_batch TorchX scheduler, driven by the real ``torchx`` CLI and ``Runner``.

Two venvs, one per TorchX line: TorchX 0.7.0 (entry points) and torchx-nightly (plugin
registry); both against the moto stack, the local registry and (for ``local=True``) the Docker
engine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import zlib

import pytest

from devenv import moto_gaps
from devenv.emulator import ACCOUNT, REGION
from tests.conftest import ROOT
from tests.support import tiers
from tests.support.processes import required_or_skip
from tests.support.service_model import assert_valid

pytestmark = pytest.mark.torchx

VENVS = {"torchx-0.7.0": ROOT / ".venv-torchx", "torchx-nightly": ROOT / ".venv-torchx-nightly"}


@pytest.fixture(params=sorted(VENVS))
def venv(request):
    tiers.require("torchx")
    path = VENVS[request.param]
    if not (path / "bin" / "torchx").exists():
        required_or_skip(f"{path.name} is not installed (make deps)")
    return path


def on_one_line(test):
    """Run a test on one TorchX line only: for cases whose behaviour is the launcher's, not
    the line's (both lines call the same scheduler methods with the same AppDef). The line is
    picked by the test's name, so each gets about half of them; every capability keeps a test
    on both lines (the ones without this mark), and the suite stays within its time."""
    line = sorted(VENVS)[zlib.crc32(test.__name__.encode()) % 2]
    return pytest.mark.parametrize("venv", [line], indirect=True)(test)


@pytest.fixture(scope="module")
def stack(moto_server, synth_default):
    moto_server.reset()
    return moto_server.deploy(synth_default.outdir, synth_default.stack_names)["EfaBatch"]


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "train.py").write_text("print('training')\n")
    return tmp_path


def run(venv, *args, env=None, cwd=None, timeout=180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        env={**os.environ, **(env or {})},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def python(venv, code: str, env=None) -> str:
    result = run(venv, "python", "-c", code, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _env(moto_server, registry) -> dict:
    return {**moto_server.env, "LAUNCHER_REGISTRY": registry.host}


DDP = ["dist.ddp", "-j", "2x8", "--script", "train.py"]


def _request_json(stdout: str) -> dict:
    start = stdout.index('{\n  "registerJobDefinition"')
    return json.loads(stdout[start : stdout.rindex("}") + 1])


def test_dryrun_is_the_launchers_document_for_a_2_node_efa_job(
    venv, stack, moto_server, registry, busybox_base, workdir
):
    registry.requests()
    result = run(
        venv,
        "torchx",
        "run",
        "--dryrun",
        "-s",
        "efa_batch",
        *DDP,
        "--image",
        busybox_base,
        env=_env(moto_server, registry),
        cwd=workdir,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    requests = _request_json(result.stdout)
    assert_valid("batch", "RegisterJobDefinition", requests["registerJobDefinition"])
    assert_valid("batch", "SubmitJob", requests["submitJob"])
    props = requests["registerJobDefinition"]["nodeProperties"]
    assert props["numNodes"] == 2
    (node_range,) = props["nodeRangeProperties"]
    container = node_range["container"]
    assert {"type": "GPU", "value": "8"} in container["resourceRequirements"]
    assert len(container["linuxParameters"]["devices"]) == 4  # p4d: 4 EFA devices
    env = {e["name"]: e["value"] for e in container["environment"]}
    assert env["NCCL_SOCKET_IFNAME"] == "^lo,docker,veth,ecs"
    assert env["LAUNCHER_GROUP"] == env["TORCHX_ROLE_NAME"] == "train"
    command = container["command"]
    assert command[4:6] == ["bash", "-c"]  # dist.ddp's own shell expands the macros
    assert "--rdzv_endpoint ${LAUNCHER_MAIN_ADDR:=localhost}:29500" in command[6]
    # The workspace was patched (digest computed), nothing pushed at dry run.
    repo = stack["RepositoryUri"].split("/", 1)[1]
    assert container["image"].startswith(f"{registry.host}/{repo}@sha256:")
    assert not [r for r in registry.requests() if r.method in ("POST", "PUT", "PATCH")]


def test_run_status_log_list_and_cancel(venv, stack, moto_server, registry, busybox_base, workdir):
    env = _env(moto_server, registry)
    ran = run(
        venv,
        "torchx",
        "run",
        "-s",
        "efa_batch",
        *DDP,
        "--image",
        busybox_base,
        env=env,
        cwd=workdir,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    handle = re.search(r"efa_batch://\S+/[0-9a-f-]{36}", ran.stdout + ran.stderr).group(0)
    job_id = handle.rsplit("/", 1)[1]
    status = run(venv, "torchx", "status", handle, env=env)
    assert status.returncode == 0 and "PENDING" in status.stdout, status.stderr[-2000:]

    moto_gaps.run_job(
        ACCOUNT, REGION, job_id, success=True, node_logs={0: ["rank0 up"], 1: ["rank1 up", "done"]}
    )
    status = run(venv, "torchx", "status", handle, env=env)
    assert "SUCCEEDED" in status.stdout
    log = run(venv, "torchx", "log", f"{handle}/train/1", env=env)
    assert log.returncode == 0, log.stderr[-2000:]
    assert "rank1 up" in log.stdout and "done" in log.stdout and "rank0 up" not in log.stdout
    listed = run(venv, "torchx", "list", "-s", "efa_batch", env=env)
    assert job_id in listed.stdout, listed.stderr[-2000:]

    second = run(
        venv,
        "torchx",
        "run",
        "-s",
        "efa_batch",
        *DDP,
        "--image",
        busybox_base,
        env=env,
        cwd=workdir,
    )
    handle = re.search(r"efa_batch://\S+/[0-9a-f-]{36}", second.stdout + second.stderr).group(0)
    cancel = run(venv, "torchx", "cancel", handle, env=env)
    assert cancel.returncode == 0, cancel.stderr[-2000:]
    assert "CANCELLED" in run(venv, "torchx", "status", handle, env=env).stdout


@on_one_line
def test_log_of_every_replica_reads_the_job_once_for_all_of_them(
    venv, stack, moto_server, monkeypatch
):
    """`torchx log -t APP` follows each replica on its own thread; in one process they share
    one tail of the job, so each poll is one FilterLogEvents for every replica."""
    from moto.logs.models import LogsBackend

    calls = []
    original = LogsBackend.filter_log_events

    def counted(self, *args, **kwargs):
        calls.append(args[1] if len(args) > 1 else kwargs.get("log_stream_names"))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LogsBackend, "filter_log_events", counted)
    image = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/base@sha256:" + "d" * 64
    env = moto_server.env
    ran = run(
        venv,
        "launcher",
        "run",
        "--no-workspace",
        "--image",
        image,
        "--nodes",
        "2",
        "--",
        "true",
        env=env,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    job_id = ran.stdout.strip().splitlines()[-1]
    node_logs = {0: ["rank0 up", "rank0 done"], 1: ["rank1 up", "rank1 done"]}
    moto_gaps.run_job(ACCOUNT, REGION, job_id, success=True, node_logs=node_logs)
    calls.clear()
    log = run(venv, "torchx", "log", "-t", f"efa_batch://torchx/{job_id}", env=env)
    assert log.returncode == 0, log.stderr[-2000:]
    for node, lines in node_logs.items():
        mine = [line for line in log.stdout.splitlines() if f"/{node} " in line]
        assert [line.rsplit(" ", 2)[-2:] for line in mine] == [x.split() for x in lines]
    # Both replicas join before the first read (while the job's state is read): one read for
    # both, then the three drain polls, each over both streams. A replica joining after the
    # first read would add two (its catch-up, and a poll of the other). Alone, each replica
    # would make four.
    assert len(calls) < 2 * (1 + 3)
    assert all(len(streams) == 2 for streams in calls[-3:])


@on_one_line
def test_container_settings_and_secrets_are_run_options(
    venv, stack, moto_server, registry, busybox_base, workdir
):
    """TorchX's cfg string cannot carry '=' in a value, so the mappings use its own KEY:VALUE
    form (runopts.cfg_from_str, Dict[str, str]); a secret outside the stack's job_secrets is
    refused before anything is pushed."""
    base = ["torchx", "run", "--dryrun", "-s", "efa_batch"]
    settings = "ulimits=nproc:4096:8192,tmpfs=/scratch:1g"
    ok = run(
        venv,
        *base,
        "-cfg",
        settings,
        *DDP,
        "--image",
        busybox_base,
        env=_env(moto_server, registry),
        cwd=workdir,
    )
    assert ok.returncode == 0, ok.stderr[-3000:]
    container = _request_json(ok.stdout)["registerJobDefinition"]["nodeProperties"][
        "nodeRangeProperties"
    ][0]["container"]
    assert {"name": "nproc", "softLimit": 4096, "hardLimit": 8192} in container["ulimits"]
    assert container["linuxParameters"]["tmpfs"] == [{"containerPath": "/scratch", "size": 1024}]

    registry.requests()
    refused = run(
        venv,
        *base,
        "-cfg",
        "secrets=WANDB_API_KEY:team/wandb",
        *DDP,
        "--image",
        busybox_base,
        env=_env(moto_server, registry),
        cwd=workdir,
    )
    assert refused.returncode != 0
    assert "-cfg secrets=WANDB_API_KEY:team/wandb: EfaBatch lets jobs read only" in refused.stderr
    assert not [r for r in registry.requests() if r.method in ("POST", "PUT", "PATCH")]


@on_one_line
def test_a_resource_for_another_instance_type_is_refused(
    venv, stack, moto_server, registry, busybox_base, workdir
):
    registry.requests()
    result = run(
        venv,
        "torchx",
        "run",
        "--dryrun",
        "-s",
        "efa_batch",
        "dist.ddp",
        "-j",
        "2x8",
        "-h",
        "aws_p5.48xlarge",
        "--script",
        "train.py",
        "--image",
        busybox_base,
        env=_env(moto_server, registry),
        cwd=workdir,
    )
    assert result.returncode != 0
    assert (
        "role train: resource is for p5.48xlarge; EfaBatch runs p4d.24xlarge nodes" in result.stderr
    )


def _one_line_error(result: subprocess.CompletedProcess) -> str:
    """TorchX's own form for a component that cannot run: exit 1, no traceback, and the
    reason on one line after its "Failed to run component" header."""
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.splitlines()
    header = next(i for i, line in enumerate(lines) if "Failed to run component" in line)
    return lines[header + 1].strip()


@on_one_line
def test_an_unreachable_aws_is_one_line_not_a_traceback(venv, workdir):
    env = {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",  # nothing listens on the discard port
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_MAX_ATTEMPTS": "1",
    }
    result = run(venv, "torchx", "run", "--dryrun", "-s", "efa_batch", *DDP, env=env, cwd=workdir)
    assert _one_line_error(result) == (
        "nothing answers at http://127.0.0.1:9, the AWS endpoint (AWS_ENDPOINT_URL): "
        "start what serves it, or unset AWS_ENDPOINT_URL to reach AWS itself"
    )


@on_one_line
def test_a_refused_request_is_one_line_not_a_traceback(
    venv, stack, moto_server, registry, busybox_base, workdir
):
    args = ["dist.ddp", "-j", "1x1", "-h", "aws_g5.xlarge", "--script", "train.py"]
    result = run(
        venv,
        "torchx",
        "run",
        "-s",
        "efa_batch",
        *args,
        "--image",
        busybox_base,
        env=_env(moto_server, registry),
        cwd=workdir,
    )
    line = _one_line_error(result)
    assert line.startswith("role train: resource is for g5.xlarge; EfaBatch runs p4d.24xlarge")


RUNNER = """
import json, sys
from torchx.runner import get_runner
from torchx.specs import AppState
with get_runner() as runner:
    handle = runner.run_component(
        "utils.sh", ["echo", "hello from the local backend"],
        scheduler="efa_batch", cfg={"local": True, "efa": "off", "port": %(port)d},
        workspace=None,
    )
    final = runner.wait(handle, wait_interval=0.5)
    lines = list(runner.log_lines(handle, "sh", 0))
    print(json.dumps({"state": final.state.name, "lines": lines, "handle": handle}))
"""


def test_the_runner_runs_a_job_on_the_local_backend(
    venv, stack, moto_server, docker_engine, busybox_base, tmp_path
):
    from devenv.processes import free_port

    env = {
        **moto_server.env,
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_LOCAL_STATE": str(tmp_path / "state"),
        "LAUNCHER_LOCAL_EFS": str(tmp_path / "efs"),
    }
    code = RUNNER % {"port": free_port()}
    code = code.replace('"utils.sh", [', f'"utils.sh", ["--image", "{busybox_base}", ')
    out = json.loads(python(venv, code, env).strip().splitlines()[-1])
    assert out["state"] == "SUCCEEDED"
    assert out["handle"].startswith("efa_batch://") and "/local-" in out["handle"]
    assert any("hello from the local backend" in line for line in out["lines"]), out


HETEROGENEOUS = """
import json
from torchx import specs
from torchx.runner import get_runner
image = "%(image)s"
app = specs.AppDef("mixed", roles=[
    specs.Role("coordinator", image=image, entrypoint="sh", args=["-c", "echo c"],
               num_replicas=1, resource=specs.Resource(cpu=4, gpu=0, memMB=8000)),
    specs.Role("trainer", image=image, entrypoint="sh", args=["-c", "echo t"], num_replicas=1,
               resource=specs.Resource(cpu=96, gpu=8, memMB=1000), max_retries=2,
               env={"STAGE": "train"}),
])
with get_runner() as runner:
    info = runner.dryrun(app, "efa_batch", cfg={}, workspace=None)
    print(str(info.request))
"""


@on_one_line
def test_roles_become_node_ranges_with_their_own_command_gpus_and_env(
    venv, stack, moto_server, registry, busybox_base
):
    out = python(venv, HETEROGENEOUS % {"image": busybox_base}, _env(moto_server, registry))
    register = json.loads(out[out.index("{") :])["registerJobDefinition"]
    assert_valid("batch", "RegisterJobDefinition", register)
    ranges = register["nodeProperties"]["nodeRangeProperties"]
    assert [r["targetNodes"] for r in ranges] == ["0:0", "1:1"]
    coordinator, trainer = (r["container"] for r in ranges)
    assert coordinator["command"][4:] == ["sh", "-c", "echo c"]
    assert {"type": "GPU", "value": "8"} in trainer["resourceRequirements"]
    assert {"type": "GPU", "value": "8"} in coordinator["resourceRequirements"]  # 0: the node's
    assert {"name": "STAGE", "value": "train"} in trainer["environment"]
    assert {"name": "LAUNCHER_GROUP", "value": "coordinator"} in coordinator["environment"]
    assert register["retryStrategy"]["attempts"] == 3


ONE_REPLICA = """
import json
from torchx import specs
from torchx.runner import get_runner
app = specs.AppDef("prep", roles=[
    specs.Role("prep", image="%(image)s", entrypoint="sh", args=["-c", "echo p"], num_replicas=1,
               resource=specs.Resource(cpu=4, gpu=0, memMB=8000))
])
with get_runner() as runner:
    info = runner.dryrun(app, "efa_batch", cfg={"after": ["%(after)s"]}, workspace=None)
    print(str(info.request))
"""


@on_one_line
def test_one_replica_is_a_single_node_job_and_after_is_a_run_option(
    venv, stack, moto_server, registry, busybox_base
):
    after = "0b5e4c1e-5f7a-4a57-9d2b-1c2d3e4f5a6b"
    code = ONE_REPLICA % {"image": busybox_base, "after": f"efa_batch://torchx/{after}"}
    out = python(venv, code, _env(moto_server, registry))
    requests = json.loads(out[out.index("{") :])
    register, submit = requests["registerJobDefinition"], requests["submitJob"]
    assert register["type"] == "container" and "nodeProperties" not in register
    assert register["containerProperties"]["command"][4:] == ["sh", "-c", "echo p"]
    assert submit["dependsOn"] == [{"jobId": after}]
    assert_valid("batch", "RegisterJobDefinition", register)
    assert_valid("batch", "SubmitJob", submit)


# --- host mounts in a local run (issue 43, item 2) ---------------------------------------------

HOST_MOUNT = """
import json
from torchx import specs
from torchx.runner import get_runner
app = specs.AppDef("peek", roles=[
    specs.Role("peek", image="%(image)s", entrypoint="ls", args=["/host"], num_replicas=1,
               resource=specs.Resource(cpu=4, gpu=0, memMB=8000),
               mounts=[specs.BindMount(src_path="/", dst_path="/host")])
])
with get_runner() as runner:
    try:
        info = runner.dryrun(app, "efa_batch", cfg=%(cfg)s, workspace=None)
    except Exception as exc:
        print(json.dumps({"refused": str(exc)}))
    else:
        print(json.dumps({"request": json.loads(str(info.request))}))
"""


@on_one_line
def test_a_local_app_mounts_this_machines_paths_only_with_allow_host_mounts(
    venv, stack, moto_server, registry, busybox_base
):
    """A role's BindMount of / is root on this machine in a local run: the run option
    allow_host_mounts is the CLI's --allow-host-mounts (the stack's allow_privileged speaks for
    its nodes only)."""

    def dryrun(cfg: dict) -> dict:
        code = HOST_MOUNT % {"image": busybox_base, "cfg": repr(cfg)}
        return json.loads(python(venv, code, _env(moto_server, registry)).splitlines()[-1])

    refused = dryrun({"local": True})["refused"]
    assert refused.startswith("mount type=bind,src=/,dst=/host: a local run mounts this machine")
    request = dryrun({"local": True, "allow_host_mounts": True})["request"]
    volumes = request["registerJobDefinition"]["containerProperties"]["volumes"]
    assert {"name": "bind0", "host": {"sourcePath": "/"}} in volumes


@on_one_line
@pytest.mark.parametrize("option", ["allow_host_mounts", "privileged"])
def test_a_torchxconfig_file_cannot_make_a_local_app_root(
    venv, stack, moto_server, registry, busybox_base, workdir, option
):
    """``torchx run`` fills the run options it was not given from the working directory's
    .torchxconfig (torchx.runner.config: "The CLI only picks up .torchxconfig files from the
    current-working-directory"), so a cloned repository's file could otherwise grant its own
    component's BindMount of / (dist.ddp --mounts), or a privileged container."""
    (workdir / ".torchxconfig").write_text(f"[efa_batch]\nlocal = True\n{option} = True\n")
    result = run(
        venv,
        "torchx", "run", "--dryrun", "-s", "efa_batch", "dist.ddp", "-j", "1x1",
        "--script", "train.py", "--image", busybox_base, "--mounts", "type=bind,src=/,dst=/host",
        env={**_env(moto_server, registry), "HOME": str(workdir)},
        cwd=workdir,
    )  # fmt: skip
    assert _one_line_error(result) == (
        f"{workdir}/.torchxconfig: [efa_batch] {option}: a config file cannot make a local app "
        f"root on this machine; give -cfg {option}=True on the command line instead"
    )
