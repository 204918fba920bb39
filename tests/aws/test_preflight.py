"""`launcher check --preflight` against the emulated four-pool stack (conftest's POOLS: "train"
in a p5 Capacity Block with "ondemand" p5 behind it, "debug" g5, "cpu" c7i Spot), each reason
a job would wait played by the emulator in turn (devenv.moto_gaps): the line names it, with
what to do, and the exit status is 1; a healthy stack passes with 0."""

from __future__ import annotations

import json
import os
import time

import pytest

from devenv import moto_gaps
from devenv.emulator import deploy, session
from tests.support import cli

BLOCK = "cr-0123456789abcdef0"
ACCOUNT, REGION = "123456789012", "us-west-2"


@pytest.fixture(scope="module")
def stack(moto_server, synth_pools):
    """Deployed where prod deploys (us-west-2b), as `cdk deploy` would."""
    moto_server.reset()
    return deploy(moto_server.url, synth_pools.outdir, synth_pools.stack_names, region=REGION)[
        "EfaBatch"
    ]


@pytest.fixture
def healthy(stack):
    """The block active for a day; every quota raised; the Region publishes the AMI."""
    now = time.time()
    moto_gaps.capacity_block(BLOCK, now - 3600, now + 86400)
    yield stack
    for code in ("L-417A185B", "L-DB2E81BA", "L-34B43A08"):
        moto_gaps.ec2_quota(code, None)
    moto_gaps.without_al2023(REGION, False)


def preflight(moto_server, *args: str):
    env = {**os.environ, **moto_server.env, "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION}
    return cli.launcher("check", "--preflight", *args, env=env)


def rows(result) -> dict[str, str]:
    """check -o json's rows: 'POOL: CHECK' -> its status and detail."""
    report = json.loads(result.stdout)
    return {r["check"]: f"{r['status']}: {r['detail']}" for r in report["cluster"]}


def test_a_healthy_stack_passes_every_pool(moto_server, healthy):
    result = preflight(moto_server)
    assert result.returncode == 0, result.stdout + result.stderr
    table = result.stdout
    for pool in ("train", "ondemand", "debug", "cpu"):
        assert f"{pool}: environment" in table and f"{pool}: quota" in table
    assert "PASS: the cluster is ready" in table
    found = rows(preflight(moto_server, "-o", "json"))
    assert found["train: reservation"].startswith(f"pass: Capacity Block {BLOCK} active until")
    assert found["debug: zone"] == "pass: g5.xlarge offered in us-west-2b"
    # c7i Spot draws on the Standard Spot quota, the g5 pool on G and VT.
    assert "(L-34B43A08)" in found["cpu: quota"] and "(L-DB2E81BA)" in found["debug: quota"]


def test_a_zero_p_quota_names_the_quota_and_the_request(moto_server, healthy):
    moto_gaps.ec2_quota("L-417A185B", 0)
    result = preflight(moto_server, "--pool", "ondemand", "-o", "json")
    assert result.returncode == 1
    assert rows(result)["ondemand: quota"] == (
        "FAIL: Running On-Demand P instances (L-417A185B) is 0 vCPUs; max_nodes 4 x "
        "p5.48xlarge = 768 vCPUs, so no node can start: aws service-quotas "
        "request-service-quota-increase --service-code ec2 --quota-code L-417A185B "
        "--desired-value 768"
    )


def test_a_block_that_starts_tomorrow_is_said_with_its_start(moto_server, healthy):
    tomorrow = time.time() + 86400
    moto_gaps.capacity_block(BLOCK, tomorrow, tomorrow + 86400, state="scheduled")
    found = rows(preflight(moto_server, "--pool", "train", "-o", "json"))
    # The queue runs the pool's jobs on its fallback meanwhile: nothing waits.
    assert "starts at " in found["train: reservation"]
    assert found["train: reservation"].endswith("meanwhile jobs run on pool ondemand")

    # A job of the block's pool meanwhile: its status names the launch EC2 refused there.
    env = {**os.environ, **moto_server.env, "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION}
    image = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/x@sha256:" + "a" * 64
    run = cli.launcher(
        "run",
        "--pool",
        "train",
        "--share-id",
        "vision",
        "--no-workspace",
        "--image",
        image,
        "--nodes",
        "2",
        "--",
        "x",
        env=env,
    )
    assert run.returncode == 0, run.stderr
    job_id = run.stdout.split()[-1]
    environment = next(p for p in json.loads(healthy["Pools"]) if p["name"] == "train")
    group = moto_gaps.scaling_group(
        session(REGION), moto_server.url, environment["compute_environment_name"]
    )
    moto_gaps.failed_launch(
        group,
        "The requested Capacity Reservation cr-0123456789abcdef0 is not active yet "
        "(InsufficientCapacityReservation). Launching EC2 instance failed.",
        time.time() - 30,
    )
    moto_gaps.submitted_ago(ACCOUNT, REGION, job_id, 120)
    try:
        shown = cli.launcher("status", job_id, env=env)
        assert "  capacity: Capacity Block cr-0123456789abcdef0: starts in " in shown.stdout
        assert "(the Capacity Block or reservation is full, not active yet, or ended: " in (
            shown.stdout
        ), shown.stdout
    finally:
        moto_gaps.forget_activities()
        moto_gaps.finish_job(ACCOUNT, REGION, job_id, success=False)


def test_a_region_without_the_ami(moto_server, healthy):
    moto_gaps.without_al2023(REGION)
    result = preflight(moto_server, "--pool", "debug", "-o", "json")
    assert result.returncode == 1
    assert rows(result)["debug: image"].startswith("FAIL: no ECS_AL2023_NVIDIA AMI in us-west-2")
