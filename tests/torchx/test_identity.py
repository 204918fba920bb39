"""What a TorchX app's job is called, tagged and retried, and what its nodes are told (issue 46,
items 7 and 8), through the real ``torchx`` CLI and ``Runner`` of TorchX 0.7.0 and nightly.

TorchX's ``aws_batch`` (torchx/schedulers/aws_batch_scheduler.py, 0.7.0) named a job
``make_unique(app.name)``, tagged it with torchx.pytorch.org/{version,app-name,user} and
``app.metadata``, and set TORCHX_ROLE_IDX and TORCHX_ROLE_NAME on each role's nodes; its
users' dashboards and trackers read these.
"""

from __future__ import annotations

import json
import re

import pytest

from launcher.job.jobdef import RETRY_ON_ERRORS, RETRY_ON_HOST_LOSS
from launcher.torchx import tags
from tests.support.service_model import assert_valid
from tests.torchx import test_scheduler as base
from tests.torchx.test_scheduler import _env, _request_json, on_one_line, python, run

pytestmark = pytest.mark.torchx

# test_scheduler's fixtures: both TorchX lines, the moto stack, a directory with train.py.
venv, stack, workdir = base.venv, base.stack, base.workdir


def _dryrun(venv, moto_server, registry, workdir, image, *ddp_args, cfg=()):
    result = run(
        venv,
        "torchx", "run", "--dryrun", "-s", "efa_batch", *cfg,
        "dist.ddp", "-j", "2x8", "--script", "train.py", "--image", image, *ddp_args,
        env=_env(moto_server, registry),
        cwd=workdir,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return _request_json(result.stdout)


# --- retries (item 7) --------------------------------------------------------------------------


@on_one_line
def test_max_retries_0_still_retries_a_lost_or_bad_host(
    venv, stack, moto_server, registry, busybox_base, workdir
):
    """dist.ddp's default max_retries=0 is TorchX's "max number of retries before giving up"
    (torchx/specs/api.py Role.max_retries) for the app: a crash ends the job. A lost node, a
    host EC2 reclaimed, or a node whose health check found a bad host is not the app's failure,
    and is retried as ``launcher run`` retries it (3 attempts; AWS Batch RetryStrategy:
    "attempts ... between 1 and 10", evaluateOnExit's first matching entry decides)."""
    requests = _dryrun(venv, moto_server, registry, workdir, busybox_base)
    strategy = requests["registerJobDefinition"]["retryStrategy"]
    assert strategy == {"attempts": 3, "evaluateOnExit": [dict(r) for r in RETRY_ON_HOST_LOSS]}
    assert strategy["evaluateOnExit"][-1] == {"onReason": "*", "action": "EXIT"}


def test_max_retries_2_retries_the_apps_failures_twice(
    venv, stack, moto_server, registry, busybox_base, workdir
):
    """TorchX's local_docker gives max_retries to Docker as restart_policy on-failure
    MaximumRetryCount, kubernetes as Volcano's maxRetry: N retries of a failed app. Batch
    counts attempts, the first included, for every cause at once: 2 retries are 3 attempts,
    and any failure but the prelude's refusal of the image (78) takes one. Five entries, AWS
    Batch's most ("Array of up to 5 objects", RetryStrategy)."""
    requests = _dryrun(venv, moto_server, registry, workdir, busybox_base, "--max_retries", "2")
    register = requests["registerJobDefinition"]
    assert_valid("batch", "RegisterJobDefinition", register)
    assert register["retryStrategy"] == {
        "attempts": 3,
        "evaluateOnExit": [
            {"onStatusReason": "Host EC2*", "action": "RETRY"},
            {"onExitCode": "75", "action": "RETRY"},
            {"onExitCode": "79", "action": "RETRY"},
            {"onExitCode": "78", "action": "EXIT"},
            {"onReason": "*", "action": "RETRY"},
        ],
    }
    assert register["retryStrategy"]["evaluateOnExit"] == [dict(r) for r in RETRY_ON_ERRORS]


@on_one_line
def test_max_retries_over_what_batch_allows_is_one_line(
    venv, stack, moto_server, registry, busybox_base, workdir
):
    """AWS Batch runs a job at most 10 times (RetryStrategy.attempts: 1-10): 9 retries."""
    result = run(
        venv,
        "torchx", "run", "--dryrun", "-s", "efa_batch", "dist.ddp", "-j", "2x8",
        "--script", "train.py", "--image", busybox_base, "--max_retries", "10",
        env=_env(moto_server, registry),
        cwd=workdir,
    )  # fmt: skip
    assert result.returncode != 0
    assert "role train: max_retries 10: AWS Batch runs a job at most 10 times; allowed 0-9" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr


# --- names and tags (item 8) -------------------------------------------------------------------


def test_each_run_has_its_own_name_and_torchxs_tags(
    venv, stack, moto_server, registry, busybox_base, workdir
):
    """Named as TorchX's schedulers name a job (torchx/schedulers/ids.py make_unique: the app's
    name and a random suffix), so two runs of dist.ddp's ``train`` differ in the Batch console
    (SubmitJob jobName: up to 128 letters, digits, - and _), and tagged with aws_batch's keys."""
    opts = ("-cfg", "user=alice")
    first = _dryrun(venv, moto_server, registry, workdir, busybox_base, cfg=opts)
    second = _dryrun(venv, moto_server, registry, workdir, busybox_base, cfg=opts)
    names = [r["submitJob"]["jobName"] for r in (first, second)]
    assert all(re.fullmatch(r"train-[a-z0-9]{6,14}", name) for name in names), names
    assert names[0] != names[1]
    version = python(venv, "import torchx; print(torchx.__version__)").strip()
    submit = first["submitJob"]
    assert_valid("batch", "SubmitJob", submit)
    assert {k: v for k, v in submit["tags"].items() if k.startswith("torchx.")} == {
        tags.VERSION: version,
        tags.APP_NAME: "train",
        tags.USER: "alice",
    }
    assert submit["propagateTags"] is True  # onto the nodes' ECS tasks, as aws_batch's did


TWO_ROLES = """
import json
from torchx import specs
from torchx.runner import get_runner
image = "%(image)s"
app = specs.AppDef("mixed", metadata={"team": "vision", "cost-center": "42"}, roles=[
    specs.Role("coordinator", image=image, entrypoint="sh", args=["-c", "echo c"],
               num_replicas=1, resource=specs.Resource(cpu=4, gpu=0, memMB=8000)),
    specs.Role("reader", image=image, entrypoint="sh", args=["-c", "echo r"], num_replicas=1,
               resource=specs.Resource(cpu=4, gpu=0, memMB=8000),
               mounts=[specs.VolumeMount(src="efs", dst_path="/data", read_only=True)]),
])
with get_runner() as runner:
    info = runner.dryrun(app, "efa_batch", cfg=%(cfg)s, workspace=None)
    print(str(info.request))
"""


def _two_roles(venv, moto_server, registry, image, cfg) -> dict:
    out = python(venv, TWO_ROLES % {"image": image, "cfg": cfg}, _env(moto_server, registry))
    requests: dict = json.loads(out[out.index("{") :])
    return requests


@on_one_line
def test_a_roles_mounts_are_its_own_nodes_and_metadata_are_tags(
    venv, stack, moto_server, registry, busybox_base
):
    """A role's mounts (torchx.specs.Role.mounts) are that role's replicas', as aws_batch gave
    each role's node range its own container (nodeRangeProperties[].container.mountPoints); the
    other role keeps the cluster's EFS where every job has it. app.metadata become tags, as in
    aws_batch's job definition ("tags": {..., **app.metadata})."""
    requests = _two_roles(venv, moto_server, registry, busybox_base, "{}")
    register, submit = requests["registerJobDefinition"], requests["submitJob"]
    assert_valid("batch", "RegisterJobDefinition", register)
    ranges = register["nodeProperties"]["nodeRangeProperties"]
    assert [r["targetNodes"] for r in ranges] == ["0:0", "1:1"]
    coordinator, reader = (r["container"] for r in ranges)
    assert [(m["containerPath"], m["readOnly"]) for m in coordinator["mountPoints"]] == [
        ("/mnt/efs", False)
    ]
    assert [(m["containerPath"], m["readOnly"]) for m in reader["mountPoints"]] == [("/data", True)]
    env = [{e["name"]: e["value"] for e in c["environment"]} for c in (coordinator, reader)]
    assert [e["LAUNCHER_EFS"] for e in env] == ["/mnt/efs", "/data"]
    assert [(e["TORCHX_ROLE_IDX"], e["TORCHX_ROLE_NAME"]) for e in env] == [
        ("0", "coordinator"),
        ("1", "reader"),
    ]
    assert {submit["tags"][k] for k in ("team", "cost-center", tags.APP_NAME)} == {
        "vision",
        "42",
        "mixed",
    }
    assert "torchx:app" not in submit["tags"]


# --- TORCHX_JOB_ID on the nodes (item 8) -------------------------------------------------------

LOCAL_TWO_NODES = """
import json
from torchx import specs
from torchx.runner import get_runner
script = 'echo "node $LAUNCHER_NODE_RANK: $TORCHX_JOB_ID $TORCHX_ROLE_IDX $TORCHX_ROLE_NAME"'
app = specs.AppDef("ident", roles=[
    specs.Role("worker", image="%(image)s", entrypoint="sh", args=["-c", script],
               num_replicas=2, resource=specs.Resource(cpu=1, gpu=0, memMB=1000)),
])
with get_runner() as runner:
    handle = runner.run(app, "efa_batch", cfg={"local": True, "efa": "off", "port": %(port)d},
                        workspace=None)
    final = runner.wait(handle, wait_interval=0.5)
    lines = [l for n in (0, 1) for l in runner.log_lines(handle, "worker", n)]
    print(json.dumps({"state": final.state.name, "lines": lines, "handle": handle}))
"""


@on_one_line
def test_every_node_sees_the_apps_handle_as_torchx_job_id(
    venv, stack, moto_server, docker_engine, busybox_base, tmp_path
):
    """TorchX's Runner sets TORCHX_JOB_ID to make_app_handle(scheduler, session, app_id)
    (torchx/runner/api.py) and trackers use it as the run's identity (torchx/tracker/mlflow.py
    names the run after it): it is the handle ``torchx status`` takes, the job's id at its end,
    on every node, though the id is known only once the job is submitted."""
    from devenv.processes import free_port

    env = {
        **moto_server.env,
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_LOCAL_STATE": str(tmp_path / "state"),
        "LAUNCHER_LOCAL_EFS": str(tmp_path / "efs"),
    }
    code = LOCAL_TWO_NODES % {"image": busybox_base, "port": free_port()}
    out = json.loads(python(venv, code, env).strip().splitlines()[-1])
    assert out["state"] == "SUCCEEDED", out
    handle = out["handle"]
    assert re.fullmatch(r"efa_batch://[^/]+/local-[0-9a-f-]+", handle), handle
    said = sorted(line.strip() for line in out["lines"] if line.strip().startswith("node "))
    assert said == [f"node 0: {handle} 0 worker", f"node 1: {handle} 0 worker"], out["lines"]
    status = run(venv, "torchx", "status", handle, env=env)
    assert status.returncode == 0 and "SUCCEEDED" in status.stdout, status.stderr[-2000:]
