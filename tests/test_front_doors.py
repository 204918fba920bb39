"""Choosing a pool in every front door, against the four-pool stack deployed into moto: the
`launcher` CLI (run, list, outputs, check's refusals) and the efa_batch TorchX scheduler.

The stack (tests/conftest.py ``POOLS``): train (p5.48xlarge in a Capacity Block, the default)
with ondemand (p5.48xlarge) behind it, debug (g5.xlarge, 2 nodes), cpu (c7i.4xlarge, Spot);
fair share weighing the teams vision, nlp and eval*.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from devenv.emulator import ACCOUNT, REGION
from tests.support.service_model import assert_valid

LAUNCHER = shutil.which("launcher") or os.path.join(os.path.dirname(os.sys.executable), "launcher")
IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/base@sha256:" + "a" * 64


@pytest.fixture(scope="module")
def stack(moto_server, synth_pools):
    moto_server.reset()
    name = synth_pools.config.stack_name
    moto_server.deploy(synth_pools.outdir, synth_pools.stack_names)
    return name


def launcher(server, stack: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **server.env, "LAUNCHER_STACK": stack}
    return subprocess.run(
        [LAUNCHER, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def jobs_in_account(server) -> int:
    batch = server.client("batch")
    return sum(
        len(
            batch.list_jobs(
                jobQueue=q["jobQueueArn"],
                filters=[{"name": "AFTER_CREATED_AT", "values": ["0"]}],
            )["jobSummaryList"]
        )
        for q in batch.describe_job_queues()["jobQueues"]
    ) + len(batch.describe_job_definitions()["jobDefinitions"])


def run(server, stack: str, *args: str) -> subprocess.CompletedProcess:
    return launcher(
        server, stack, "run", "--no-workspace", "--image", IMAGE, *args, "--", "python", "prep.py"
    )


def test_outputs_shows_the_pools_as_a_table(moto_server, stack):
    out = ok(launcher(moto_server, stack, "outputs"))
    *table, footnote, more = out.splitlines()[-7:]
    assert footnote == "* the default pool: jobs go there unless they name one (--pool)"
    assert more == "every value (ARNs, ids): launcher outputs --all"
    rows = {line.split()[0]: line.split() for line in table}
    assert rows["POOL"][:3] == ["POOL", "QUEUE", "INSTANCE"]
    assert rows["train"][1:5] == ["*", f"{stack}-jobs-fairshare", "p5.48xlarge", "16"]
    assert rows["train"][-1] == "ondemand"  # its fallback
    assert rows["cpu"][2:4] == ["c7i.4xlarge", "32"] and "yes:" in rows["cpu"]
    assert rows["debug"][2:5] == ["g5.xlarge", "2", "1"]
    assert "pools" not in [line.split()[0] for line in out.splitlines() if line.strip()][:-7]


def test_run_pool_sends_the_job_to_that_pools_queue(moto_server, stack):
    out = ok(run(moto_server, stack, "--pool", "cpu", "--share-id", "vision", "--dryrun"))
    requests = json.loads(out)
    submit, register = requests["submitJob"], requests["registerJobDefinition"]
    assert submit["jobQueue"].endswith(f"/{stack}-cpu-fairshare")
    assert register["type"] == "container"
    resources = register["containerProperties"]["resourceRequirements"]
    assert {r["type"] for r in resources} == {"VCPU", "MEMORY"}  # no GPU, no EFA on c7i
    assert_valid("batch", "SubmitJob", submit)
    assert_valid("batch", "RegisterJobDefinition", register)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("--pool", "gpu"),
            "stack {stack} has no pool 'gpu'; its pools: train, cpu, debug, ondemand",
        ),
        (
            ("--pool", "cpu", "--nodes", "2", "--share-id", "nlp"),
            "--nodes 2: pool cpu of {stack} runs Spot Instances, where AWS Batch runs no "
            "multi-node job; use --pool train or debug or ondemand, or --nodes 1 (--array N "
            "for many single nodes)",
        ),
        (
            ("--pool", "debug", "--nodes", "3", "--share-id", "nlp"),
            "--nodes 3: pool debug of {stack} runs at most 2 g5.xlarge nodes",
        ),
        (
            ("--pool", "debug", "--gpus-per-node", "4", "--share-id", "nlp"),
            "--gpus-per-node 4: g5.xlarge has 1 GPUs",
        ),
        (
            ("--share-id", "vison"),
            "--share-id vison: the fair-share policy of {stack} weighs vision, nlp, eval* (a "
            "trailing * is a prefix); use one of them or ask for a weight",
        ),
        (
            (),
            "--share-id: the fair-share policy of {stack} weighs the teams vision, nlp, eval*; "
            "name yours",
        ),
    ],
)
def test_what_a_pool_cannot_run_exits_2_in_one_line_and_submits_nothing(
    moto_server, stack, args, line
):
    before = jobs_in_account(moto_server)
    result = run(moto_server, stack, *args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == "launcher: error: " + line.format(stack=stack)
    assert jobs_in_account(moto_server) == before


def test_check_refuses_a_pool_it_cannot_prove_before_running_anything(moto_server, stack):
    before = jobs_in_account(moto_server)
    result = launcher(moto_server, stack, "check", "--pool", "cpu", "--nodes", "2")
    assert result.returncode == 2
    assert "--nodes 2: pool cpu of" in result.stderr and "Spot Instances" in result.stderr
    unknown = launcher(moto_server, stack, "check", "--pool", "nope")
    assert unknown.returncode == 2 and "has no pool 'nope'" in unknown.stderr
    assert jobs_in_account(moto_server) == before


def test_list_reads_one_pools_queue_or_every_pool(moto_server, stack):
    prep = ok(run(moto_server, stack, "--pool", "cpu", "--array", "3", "--share-id", "eval7"))
    prep = prep.strip().splitlines()[-1]
    train = ok(
        run(
            moto_server,
            stack,
            "--pool",
            "debug",
            "--nodes",
            "2",
            "--share-id",
            "nlp",
            "--after",
            prep,
        )
    )
    train = train.strip().splitlines()[-1]
    in_cpu = ok(launcher(moto_server, stack, "list", "--pool", "cpu"))
    assert prep in in_cpu and train not in in_cpu
    in_default = ok(launcher(moto_server, stack, "list"))
    assert prep not in in_default and train not in in_default
    every = ok(launcher(moto_server, stack, "list", "--all-pools"))
    pools = {line.split()[0]: line.split()[2] for line in every.splitlines()}
    assert (pools[prep], pools[train]) == ("cpu", "debug")
    # ListJobs names no image: -o json gives each job's, from its definition (moto's
    # DescribeJobDefinitions leaves out a multi-node definition's nodeProperties, so the
    # one-node array's is the one seen here).
    listed = json.loads(ok(launcher(moto_server, stack, "list", "--all-pools", "-o", "json")))
    assert {j["job_id"]: j["image"] for j in listed}[prep] == IMAGE
    both = launcher(moto_server, stack, "list", "--pool", "cpu", "--all-pools")
    assert both.returncode == 2 and "--pool and --all-pools: give one" in both.stderr


# --- TorchX -----------------------------------------------------------------------------------

DRYRUN = """
import json
from torchx import specs
from torchx.runner import get_runner
role = specs.Role(
    "train", image="%(image)s", entrypoint="sh", args=["-c", "echo p"],
    num_replicas=%(replicas)d, resource=%(resource)s,
)
with get_runner() as runner:
    try:
        info = runner.dryrun(specs.AppDef("app", roles=[role]), "efa_batch", cfg=%(cfg)s,
                             workspace=None)
        print(str(info.request))
    except Exception as exc:
        print("ERROR", exc)
"""


@pytest.mark.torchx
@pytest.mark.parametrize(
    ("replicas", "resource", "cfg", "queue"),
    [
        (2, 'specs.named_resources["aws_g5.xlarge"]', {}, "debug"),  # -h aws_g5.xlarge
        (2, 'specs.named_resources["aws_p5.48xlarge"]', {}, "jobs"),  # train, not its fallback
        (1, "specs.Resource(cpu=8, gpu=0, memMB=16000)", {"pool": "cpu"}, "cpu"),
        (2, "specs.Resource(cpu=8, gpu=0, memMB=16000)", {}, "jobs"),  # the default pool
        (2, "specs.NULL_RESOURCE", {}, "jobs"),  # a role that names no resource
    ],
)
def test_torchx_chooses_the_pool_by_option_or_by_named_resource(
    moto_server, stack, replicas, resource, cfg, queue
):
    from tests.torchx.test_scheduler import VENVS, python

    venv = VENVS["torchx-0.7.0"]
    if not (venv / "bin" / "torchx").exists():
        from tests.support.processes import required_or_skip

        required_or_skip(f"{venv.name} is not installed (make deps)")
    code = DRYRUN % {
        "image": IMAGE,
        "replicas": replicas,
        "resource": resource,
        "cfg": repr({"stack": stack, "share_id": "vision", **cfg}),
    }
    out = python(venv, code, moto_server.env)
    assert not out.startswith("ERROR"), out
    submit = json.loads(out[out.index("{") :])["submitJob"]
    assert submit["jobQueue"].endswith(f"/{stack}-{queue}-fairshare")


@pytest.mark.torchx
def test_torchx_refuses_a_pool_or_type_the_stack_lacks(moto_server, stack):
    from tests.torchx.test_scheduler import VENVS, python

    venv = VENVS["torchx-0.7.0"]
    if not (venv / "bin" / "torchx").exists():
        from tests.support.processes import required_or_skip

        required_or_skip(f"{venv.name} is not installed (make deps)")
    code = DRYRUN % {
        "image": IMAGE,
        "replicas": 2,
        "resource": 'specs.named_resources["aws_p4d.24xlarge"]',
        "cfg": repr({"stack": stack, "share_id": "vision"}),
    }
    out = python(venv, code, moto_server.env)
    assert out.startswith(
        f"ERROR role train: resource is for p4d.24xlarge; no pool of {stack} runs it (its pools: "
        "train p5.48xlarge, cpu c7i.4xlarge, debug g5.xlarge, ondemand p5.48xlarge)"
    ), out
    code = DRYRUN % {
        "image": IMAGE,
        "replicas": 1,
        "resource": "specs.Resource(cpu=1, gpu=0, memMB=1000)",
        "cfg": repr({"stack": stack, "share_id": "vision", "pool": "nope"}),
    }
    assert f"ERROR stack {stack} has no pool 'nope'" in python(venv, code, moto_server.env)
