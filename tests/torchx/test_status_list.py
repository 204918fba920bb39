"""What ``torchx status``, ``torchx describe`` and ``torchx list`` show of efa_batch apps, with
the real ``torchx`` CLI of both TorchX lines (fixture ``venv``), against the four-pool stack in
moto (tests/conftest.py ``POOLS``: train, the default, ondemand, debug, cpu) and, for
``local=True``, the Docker engine.

TorchX prints a replica's ``structured_error_msg`` through ``AppStatus._format_replica_status``
(torchx/specs/api.py, 0.7.0 and nightly): JSON in torchelastic's error-file form becomes
``*ROLE[0]:STATE (exitcode: N)`` and an ``error_msg:`` line; anything else was printed verbatim
and ran replicas together. ``torchx list`` prints ``ListAppResponse`` rows (torchx/cli/
cmd_list.py: APP HANDLE and APP STATUS; nightly adds APP NAME, ``ListAppResponse.name``).
"""

from __future__ import annotations

import re

import pytest

from devenv.emulator import ACCOUNT, REGION
from tests.torchx import test_scheduler as base
from tests.torchx.test_scheduler import on_one_line

pytestmark = pytest.mark.torchx

venv = base.venv  # the fixture, over both TorchX lines
run = base.run
HANDLE = re.compile(r"efa_batch://\S+/(\S+)")


@pytest.fixture(scope="module")
def pools(moto_server, synth_pools):
    moto_server.reset()
    moto_server.deploy(synth_pools.outdir, synth_pools.stack_names)
    return synth_pools.config.stack_name


@pytest.fixture
def env(moto_server, registry, docker_engine, pools, tmp_path):
    return {
        **moto_server.env,
        "LAUNCHER_REGISTRY": registry.host,
        "LAUNCHER_STACK": pools,
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_LOCAL_STATE": str(tmp_path / "state"),
        "LAUNCHER_LOCAL_EFS": str(tmp_path / "efs"),
    }


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "train.py").write_text("print('training')\n")
    return tmp_path / "ws"


def submit(venv, env, workdir, image, *command, cfg="pool=cpu,share_id=vision", wait=False):
    """``torchx run`` of ``utils.sh COMMAND``; its handle and its app id. With ``wait``, the
    run waits for the app and exits 1 unless it succeeded (torchx/cli/cmd_run.py)."""
    args = ["-s", "efa_batch", "-cfg", cfg, "utils.sh", "--image", image, *command]
    ran = run(venv, "torchx", "run", *(["--wait"] if wait else []), *args, env=env, cwd=workdir)
    assert ran.returncode == 0 or wait, ran.stderr[-3000:]
    found = HANDLE.search(ran.stdout + ran.stderr)
    assert found, ran.stdout + ran.stderr
    return found.group(0), found.group(1)


def status(venv, env, handle) -> str:
    result = run(venv, "torchx", "status", handle, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def listed(venv, env) -> dict[str, list[str]]:
    """``torchx list -s efa_batch``'s rows, by app id: each row's words after the handle."""
    result = run(venv, "torchx", "list", "-s", "efa_batch", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {}
    for line in result.stdout.splitlines():
        found = HANDLE.match(line)
        if found:
            rows[found.group(1)] = line.split()[1:]
    return rows


def test_a_failed_local_job_says_its_exit_code_once_and_list_agrees(
    venv, env, busybox_base, workdir
):
    """A failed replica: ``*sh[0]:FAILED (exitcode: 3)`` and its reason on one error_msg line
    (torchelastic's error-file JSON, read by both lines' ``_format_replica_status``); the app's
    Msg is the job's outcome, as ``launcher status`` says it (``FAILED (exit code 3)``)."""
    from devenv.processes import free_port

    cfg = f"local=True,efa=off,port={free_port()},pool=cpu,share_id=vision"
    handle, app_id = submit(
        venv, env, workdir, busybox_base, "sh", "-c", "exit 3", cfg=cfg, wait=True
    )
    assert app_id.startswith("local-")
    out = status(venv, env, handle)
    assert "State: FAILED" in out
    assert re.search(r"^ \*sh\[0\]:FAILED \(exitcode: 3\)$", out, re.M), out
    assert out.count("exit code 3") == 2, out  # the replica's error_msg, and the app's Msg
    assert re.search(r"^ +error_msg: exit code 3$", out, re.M), out
    assert re.search(r"^    Msg: exit code 3$", out, re.M), out
    assert "Essential container" not in out
    launcher = run(venv, "launcher", "status", app_id, env=env)
    assert "FAILED (exit code 3)" in launcher.stdout, launcher.stderr
    # torchx list: the local job is there, FAILED like its status.
    assert listed(venv, env)[app_id][-1] == "FAILED"


@on_one_line
def test_a_cancelled_job_is_cancelled_in_status_and_list(venv, env, busybox_base, workdir):
    """Batch says FAILED for a job its TerminateJob ended; TorchX's CANCELLED is what the user
    asked for, in ``status`` (each replica once, the cancel as its reason) and in ``list``."""
    handle, app_id = submit(venv, env, workdir, busybox_base, "sleep", "600")
    cancel = run(venv, "torchx", "cancel", handle, env=env)
    assert cancel.returncode == 0, cancel.stderr[-2000:]
    out = status(venv, env, handle)
    assert "State: CANCELLED" in out
    assert re.search(r"^ \*sh\[0\]:CANCELLED \(exitcode: <N/A>\)$", out, re.M), out
    assert out.count("cancelled with launcher cancel") == 2, out  # error_msg and Msg, once each
    assert listed(venv, env)[app_id][-1] == "CANCELLED"


DESCRIBE = """
import json
from torchx.runner import get_runner
with get_runner() as runner:
    app = runner.describe("%(handle)s")
    role, = app.roles
    print(json.dumps({"name": role.name, "image": role.image, "entrypoint": role.entrypoint,
                      "args": role.args, "env": role.env, "replicas": role.num_replicas,
                      "resource": [role.resource.cpu, role.resource.gpu, role.resource.memMB]}))
"""


@on_one_line
@pytest.mark.parametrize("replicas", [1, 2])  # a container job (cpu), a multi-node job (debug)
def test_describe_returns_the_role_as_submitted(
    venv, env, busybox_base, workdir, moto_server, replicas
):
    """What aws_batch's describe returned (0.7.0 aws_batch_scheduler.py ``describe``): the
    container's image, command (here without the launcher's node prelude), variables and
    resources (``resource_from_resource_requirements``: VCPU, GPU, MEMORY)."""
    cfg = "pool=cpu,share_id=vision" if replicas == 1 else "pool=debug,share_id=vision,efa=off"
    handle, app_id = submit(
        venv, env, workdir, busybox_base, "--num_replicas", str(replicas), "echo", "hi", cfg=cfg
    )
    out = base.python(venv, DESCRIBE % {"handle": handle}, env)
    role = base.json.loads(out.splitlines()[-1])
    assert role["name"] == "sh" and role["replicas"] == replicas
    assert role["entrypoint"] == "sh" and role["args"] == ["-c", "echo hi"]
    assert role["env"]["TORCHX_ROLE_NAME"] == "sh" and role["env"]["LOGLEVEL"] == "WARNING"
    assert not [k for k in role["env"] if k.startswith("LAUNCHER_")]  # the prelude's
    assert role["env"]["TORCHX_JOB_ID"] == handle  # what the nodes saw, not the stand-in
    (job,) = moto_server.client("batch").describe_jobs(jobs=[app_id])["jobs"]
    container = (
        job["container"]
        if replicas == 1
        else job["nodeProperties"]["nodeRangeProperties"][0]["container"]
    )
    assert role["image"] == container["image"] and role["image"]
    requirements = {r["type"]: int(r["value"]) for r in container["resourceRequirements"]}
    resource = [requirements["VCPU"], requirements.get("GPU", 0), requirements["MEMORY"]]
    assert role["resource"] == resource
    assert role["resource"][0] > 0 and role["resource"][2] > 0
    shown = run(venv, "torchx", "describe", handle, env=env)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "'entrypoint': 'sh'" in shown.stdout and "'args': ['-c', 'echo hi']" in shown.stdout
    assert "<MISSING>" not in shown.stdout


def test_list_shows_every_pools_apps_and_no_other_jobs(
    venv, env, busybox_base, workdir, moto_server, pools
):
    """An app in the cpu pool (named by -cfg) and one in the debug pool (named by the
    directory's .torchxconfig) are both listed, whatever pool the list's own config names
    (0.7.0 passes none); a job sent with ``launcher run`` (no TorchX tags) is not. Nightly's
    APP NAME column is the AppDef's name."""
    in_cpu, cpu_id = submit(venv, env, workdir, busybox_base, "echo", "cpu")
    (workdir / ".torchxconfig").write_text("[efa_batch]\npool = debug\nshare_id = vision\n")
    in_debug, debug_id = submit(venv, env, workdir, busybox_base, "echo", "debug", cfg="efa=off")
    queues = {
        j["jobId"]: j["jobQueue"]
        for j in moto_server.client("batch").describe_jobs(jobs=[cpu_id, debug_id])["jobs"]
    }
    assert queues[cpu_id].endswith(f"/{pools}-cpu-fairshare"), queues
    assert queues[debug_id].endswith(f"/{pools}-debug-fairshare"), queues
    image = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/base@sha256:" + "a" * 64
    plain = run(
        venv, "launcher", "run", "--no-workspace", "--image", image, "--pool", "cpu",
        "--share-id", "vision", "--", "true", env=env,
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr[-2000:]
    plain_id = plain.stdout.split()[-1]
    rows = listed(venv, env)
    assert cpu_id in rows and debug_id in rows, rows
    assert plain_id not in rows
    assert rows[cpu_id][-1] == rows[debug_id][-1] == "PENDING"
    if venv.name == ".venv-torchx-nightly":
        assert rows[cpu_id][0] == rows[debug_id][0] == "sh"  # APP NAME


CALLS = """
import json
from launcher.torchx.scheduler import create_scheduler
scheduler = create_scheduler("torchx")
apps = scheduler.list()
aws = next(iter(scheduler._clusters.values())).aws
print(json.dumps({"apps": [a.app_id for a in apps], "calls": aws.calls}))
"""


@on_one_line
def test_list_costs_a_listjobs_and_a_describejobs_per_100_jobs_of_each_pool(
    venv, env, moto_server, pools, monkeypatch
):
    """Batch's ListJobs gives no tags (JobSummary), DescribeJobs does, for up to 100 jobs a
    call: ``torchx list`` costs one DescribeStacks, one ListJobs per page of 100 jobs of each
    pool's queue, and one DescribeJobs per 100 of them, however many jobs are TorchX's."""
    from launcher.api import Cluster

    for name, value in moto_server.env.items():
        monkeypatch.setenv(name, value)
    queues = {p.name: p.queue_arn for p in Cluster.from_stack(pools).info.pools}
    batch = moto_server.client("batch")
    definition = batch.register_job_definition(
        jobDefinitionName="plain",
        type="container",
        containerProperties={"image": "busybox", "command": ["true"], "vcpus": 1, "memory": 64},
    )["jobDefinitionArn"]
    cpu = queues["cpu"]
    for i in range(150):  # 120 TorchX apps, 30 other jobs, in one pool
        tagged = {"torchx.pytorch.org/version": "0.7.0"} if i < 120 else {}
        batch.submit_job(
            jobName=f"j{i}", jobQueue=cpu, jobDefinition=definition, shareIdentifier="vision",
            tags=tagged,
        )  # fmt: skip
    out = base.python(venv, CALLS, env)
    found = base.json.loads(out.splitlines()[-1])
    listing = batch.get_paginator("list_jobs")
    every = [{"name": "AFTER_CREATED_AT", "values": ["0"]}]
    counts = [
        sum(len(p["jobSummaryList"]) for p in listing.paginate(jobQueue=arn, filters=every))
        for arn in queues.values()
    ]
    pages = sum(max(1, -(-n // 100)) for n in counts)
    described = sum(-(-n // 100) for n in counts)
    assert found["calls"] == 1 + pages + described, (found["calls"], counts)
    assert len(found["apps"]) >= 120
