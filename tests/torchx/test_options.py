"""What TorchX ``aws_batch``'s run options become with ``efa_batch``, with the real ``torchx``
CLI of both venvs against the four-pool stack in moto (tests/conftest.py ``POOLS``).

TorchX 0.7.0 drops an option its scheduler does not declare: ``runopts.cfg_from_str`` ignores
an unknown ``-cfg`` key ("Unknown keys are ignored and not returned in the resulting map",
torchx/specs/api.py) and ``torchx.runner.config.load`` skips an unknown ``.torchxconfig`` key
with a warning. aws_batch's options are 0.7.0's torchx/schedulers/aws_batch_scheduler.py
``_run_opts`` (queue, user, privileged, share_id, priority, job_role_arn, execution_role_arn)
and torchx/workspace/docker_workspace.py ``workspace_opts`` (image_repo, quiet); each gets an
answer here: kept, mapped (queue -> pool) or refused in one line.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from devenv.emulator import ACCOUNT, REGION
from tests.torchx.test_scheduler import VENVS, on_one_line, python, run

pytestmark = pytest.mark.torchx

IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/base@sha256:" + "a" * 64
AWS_BATCH_OPTIONS = (
    "queue",
    "user",
    "privileged",
    "share_id",
    "priority",
    "job_role_arn",
    "execution_role_arn",
    "image_repo",
    "quiet",
)


@pytest.fixture(params=sorted(VENVS))
def venv(request):
    from tests.support import tiers
    from tests.support.processes import required_or_skip

    tiers.require("torchx")
    path = VENVS[request.param]
    if not (path / "bin" / "torchx").exists():
        required_or_skip(f"{path.name} is not installed (make deps)")
    return path


@pytest.fixture(scope="module")
def stack(moto_server, synth_pools):
    moto_server.reset()
    moto_server.deploy(synth_pools.outdir, synth_pools.stack_names)
    return synth_pools.config.stack_name


def torchx(venv, moto_server, workdir, *args, cfg="", config=None, dryrun=True):
    """``torchx run -s efa_batch`` of utils.sh in ``workdir`` (its own HOME, so only its
    ``.torchxconfig`` counts), with ``config`` as that file's [efa_batch] section."""
    if config is not None:
        (workdir / ".torchxconfig").write_text("[efa_batch]\n" + config)
    return run(
        venv,
        "torchx", "run", *(["--dryrun"] if dryrun else []), "--workspace", "",
        "-s", "efa_batch", *(["-cfg", cfg] if cfg else []),
        "utils.sh", "--image", IMAGE, *args, "echo", "hi",
        env={**moto_server.env, "HOME": str(workdir)},
        cwd=workdir,
    )  # fmt: skip


def request(result) -> dict:
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    return json.loads(out[out.index('{\n  "registerJobDefinition"') : out.rindex("}") + 1])


def one_line(result) -> str:
    """TorchX's form for a component that cannot run: exit 1, no traceback, the reason on the
    line after "Failed to run component"."""
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.splitlines()
    header = next(i for i, line in enumerate(lines) if "Failed to run component" in line)
    return lines[header + 1].strip()


def submitted(moto_server) -> int:
    batch = moto_server.client("batch")
    return len(batch.describe_job_definitions()["jobDefinitions"]) + sum(
        len(batch.list_jobs(jobQueue=q["jobQueueArn"], jobStatus="SUBMITTED")["jobSummaryList"])
        for q in batch.describe_job_queues()["jobQueues"]
    )


def test_runopts_lists_every_aws_batch_option_with_what_it_became(venv):
    result = run(venv, "torchx", "runopts", "efa_batch")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    for option in AWS_BATCH_OPTIONS:
        assert f"\n    {option} " in out or f"\n    {option}=" in out or option in out, option
    assert "aws_batch's queue: a queue of the stack (name or ARN) runs in the pool" in " ".join(
        out.split()
    )
    assert "aws_batch's job role: refused" in " ".join(out.split())


@on_one_line
@pytest.mark.parametrize("given", ["cfg", "file"])
@pytest.mark.parametrize("by", ["name", "arn"])
def test_queue_runs_in_the_pool_whose_queue_it_is(venv, stack, moto_server, tmp_path, given, by):
    queue = f"{stack}-debug-fairshare"
    if by == "arn":
        queue = f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/{queue}"
    options = {"stack": stack, "share_id": "vision", "queue": queue}
    if given == "cfg":
        result = torchx(
            venv, moto_server, tmp_path, cfg=",".join(f"{k}={v}" for k, v in options.items())
        )
    else:
        config = "".join(f"{k} = {v}\n" for k, v in options.items())
        result = torchx(venv, moto_server, tmp_path, config=config)
    submit = request(result)["submitJob"]
    assert submit["jobQueue"].endswith(f"/{stack}-debug-fairshare")


@on_one_line
@pytest.mark.parametrize("given", ["cfg", "file"])
def test_another_queue_is_one_line_naming_the_pools_and_nothing_is_submitted(
    venv, stack, moto_server, tmp_path, given
):
    before = submitted(moto_server)
    if given == "cfg":
        result = torchx(
            venv, moto_server, tmp_path, cfg=f"stack={stack},share_id=vision,queue=old-queue",
            dryrun=False,
        )  # fmt: skip
        where = "-cfg queue"
    else:
        config = f"stack = {stack}\nshare_id = vision\nqueue = old-queue\n"
        result = torchx(venv, moto_server, tmp_path, config=config, dryrun=False)
        where = f"{tmp_path}/.torchxconfig: [efa_batch] queue"
    pools = ", ".join(
        f"{p} (queue {stack}-{q}-fairshare)"
        for p, q in (
            ("train", "jobs"),
            ("cpu", "cpu"),
            ("debug", "debug"),
            ("ondemand", "ondemand"),
        )
    )
    assert one_line(result) == (
        f"{where}: 'old-queue' is not a queue of stack {stack}; give -cfg pool=NAME, one of its "
        f"pools: {pools}"
    )
    assert submitted(moto_server) == before


@on_one_line
@pytest.mark.parametrize("given", ["cfg", "file"])
@pytest.mark.parametrize("option", ["job_role_arn", "execution_role_arn"])
def test_a_role_of_its_own_is_refused_naming_what_replaces_it(
    venv, stack, moto_server, tmp_path, given, option
):
    arn = f"arn:aws:iam::{ACCOUNT}:role/my-old-role"
    if given == "cfg":
        result = torchx(venv, moto_server, tmp_path, cfg=f"stack={stack},{option}={arn}")
        where = f"-cfg {option}"
    else:
        result = torchx(venv, moto_server, tmp_path, config=f"stack = {stack}\n{option} = {arn}\n")
        where = f"{tmp_path}/.torchxconfig: [efa_batch] {option}"
    line = one_line(result)
    assert line.startswith(f"{where}: refused; "), line
    if option == "job_role_arn":
        assert "jobs run as the stack's job role (arn:aws:iam::" in line
        assert line.endswith(
            "to give jobs other AWS permissions, ask the platform team to widen it with the "
            "stack settings data_buckets, job_secrets or job_role_policies"
        )
    else:
        assert "ECS pulls the image and writes the logs as the stack's execution role" in line


@on_one_line
def test_kept_options_are_taken_and_priority_is_fair_shares(venv, stack, moto_server, tmp_path):
    """user, privileged=False, quiet, share_id and priority from an aws_batch section: accepted
    (nightly would refuse an undeclared -cfg key), priority sent with the share id."""
    config = (
        f"stack = {stack}\nuser = alice\nprivileged = False\nquiet = True\n"
        "share_id = vision\npriority = 5\n"
    )
    submit = request(torchx(venv, moto_server, tmp_path, config=config))["submitJob"]
    assert submit["shareIdentifier"] == "vision"
    assert submit["schedulingPriorityOverride"] == 5


@on_one_line
@pytest.mark.parametrize(
    ("args", "cfg", "line"),
    [
        (
            ["--num_replicas", "3", "-h", "aws_g5.xlarge"],
            "share_id=vision",
            "num_replicas 3: pool debug of {stack} runs at most 2 g5.xlarge nodes",
        ),
        (
            ["--num_replicas", "2"],
            "share_id=vision,pool=cpu",
            "num_replicas 2: pool cpu of {stack} runs Spot Instances, where AWS Batch runs no "
            "multi-node job; use -cfg pool=train or debug or ondemand, or num_replicas 1",
        ),
        (
            [],
            "priority=5",
            "-cfg share_id: the fair-share policy of {stack} weighs the teams vision, nlp, "
            "eval*; name yours",
        ),
        ([], "share_id=vision,priority=10000", "-cfg priority=10000: allowed 0-9999"),
    ],
)
def test_errors_name_torchx_options_not_launcher_flags(
    venv, stack, moto_server, tmp_path, args, cfg, line
):
    result = torchx(venv, moto_server, tmp_path, *args, cfg=f"stack={stack},{cfg}")
    assert one_line(result) == line.format(stack=stack)
    assert "--" not in one_line(result)


MIGRATED = """
import dataclasses, json
from launcher.errors import UsageError
from launcher.stack.cluster import ClusterInfo
from launcher.torchx.options import migrated
info = ClusterInfo(**json.loads(%(info)r))  # the same values; the pools as dicts
out = {}
for name, cfg in {
    "by_name": {"queue": "EfaBatch-cpu"},
    "by_arn": {"queue": info.pools[3].queue_arn},
    "same_pool": {"queue": "EfaBatch-cpu", "pool": "cpu"},
    "other_pool": {"queue": "EfaBatch-cpu", "pool": "debug"},
    "unknown": {"queue": "nope"},
    "own_role": {"job_role_arn": info.job_role_arn, "execution_role_arn": info.execution_role_arn},
    "other_role": {"execution_role_arn": "arn:aws:iam::1:role/x"},
    "kept": {"user": "alice", "share_id": "vision", "priority": 5, "quiet": True},
}.items():
    try:
        out[name] = migrated(cfg, info)
    except UsageError as exc:
        out[name] = str(exc)
print(json.dumps(out))
"""


@on_one_line
def test_migrated_maps_a_queue_to_its_pool_and_refuses_what_has_no_place(venv, tmp_path):
    """The pure answer (launcher.torchx.options.migrated), on the issue's four pools."""
    from tests.conftest import ROOT
    from tests.job.test_pool_choice import four_pools

    code = MIGRATED % {"info": json.dumps(dataclasses.asdict(four_pools()))}
    out = json.loads(python(venv, code, env={"HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}))
    assert out["by_name"] == {"queue": "EfaBatch-cpu", "pool": "cpu"}
    assert out["by_arn"]["pool"] == out["same_pool"]["pool"] == "cpu"
    assert out["other_pool"] == (
        "-cfg queue: 'EfaBatch-cpu' is the queue of pool cpu, but -cfg pool=debug; give pool alone"
    )
    assert out["unknown"].startswith("-cfg queue: 'nope' is not a queue of stack ")
    assert out["unknown"].endswith(
        "its pools: train (queue EfaBatch-train), ondemand (queue EfaBatch-ondemand), "
        "debug (queue EfaBatch-debug), cpu (queue EfaBatch-cpu)"
    )
    assert isinstance(out["own_role"], dict)  # the stack's own roles: nothing to refuse
    assert out["other_role"].startswith("-cfg execution_role_arn: refused; ECS pulls the image")
    assert out["kept"] == {"user": "alice", "share_id": "vision", "priority": 5, "quiet": True}
