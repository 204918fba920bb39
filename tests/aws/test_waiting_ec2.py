"""A RUNNABLE job's waiting line and `launcher status` read the EC2 side, on the emulated default
stack: the pool's latest failed launch (its Auto Scaling group's activity history, where
AWS's troubleshooting guide sends users: job_stuck_in_runnable.html), instances that started
and never joined the ECS cluster, with the last line of one's console. The emulator plays
Batch's Auto Scaling group, EC2's refusals and the instances (devenv.moto_gaps)."""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from devenv import moto_gaps
from devenv.emulator import ACCOUNT, REGION, session
from launcher.job.waiting import Watch
from tests.support import cli

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/x@sha256:" + "a" * 64
QUOTA_MESSAGE = (
    "You have requested more vCPU capacity than your current vCPU limit of 0 allows for the "
    "instance bucket that the specified instance type belongs to. Please visit "
    "http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit. "
    "Launching EC2 instance failed."
)


@pytest.fixture(scope="module")
def cluster(moto_server, synth_default):
    moto_server.reset()
    outputs = moto_server.deploy(synth_default.outdir, synth_default.stack_names)["EfaBatch"]
    pools = json.loads(outputs["Pools"])
    return moto_server, pools[0]["compute_environment_name"]


def launcher(server, *args: str):
    return cli.launcher(*args, env={**os.environ, **server.env})


@pytest.fixture
def waiting(cluster):
    """A two-node job RUNNABLE for two minutes, its pool's group made by "Batch"."""
    server, environment = cluster
    done = launcher(server, "run", "--no-workspace", "--image", IMAGE, "--nodes", "2", "--", "x")
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[-1]
    moto_gaps.submitted_ago(ACCOUNT, REGION, job_id, 120)
    yield server, environment, job_id
    moto_gaps.finish_job(ACCOUNT, REGION, job_id, success=False)


def status(server, job_id: str) -> dict:
    result = launcher(server, "status", job_id, "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_launch_ec2_refused_is_named_with_what_to_do(waiting):
    server, environment, job_id = waiting
    group = moto_gaps.scaling_group(session(), server.url, environment)
    moto_gaps.failed_launch(group, QUOTA_MESSAGE, time.time() - 65)
    found = status(server, job_id)["ec2"]
    assert re.match(r"latest launch failed 1m\d\ds ago: You have requested more", found["launch"])
    assert found["launch"].endswith(
        "(the account's EC2 vCPU quota is too small: `launcher check --preflight` names the "
        "quota and the request that raises it)"
    )
    lines = launcher(server, "status", job_id).stdout.splitlines()
    assert any(line.startswith("  launches: latest launch failed") for line in lines)


def test_instances_that_never_joined_are_counted_and_one_console_read(waiting):
    server, environment, job_id = waiting
    group = moto_gaps.scaling_group(session(), server.url, environment, instances=2)
    ec2 = server.client("ec2")
    found = ec2.describe_instances(
        Filters=[{"Name": "tag:aws:autoscaling:groupName", "Values": [group]}]
    )
    ids = [i["InstanceId"] for r in found["Reservations"] for i in r["Instances"]]
    assert len(ids) == 2
    for instance_id in ids:
        moto_gaps.aged(ACCOUNT, REGION, instance_id, 900)
        moto_gaps.console_says(
            instance_id,
            "[   42.1] cloud-init[1201]: mount.lustre: mount failed: Connection timed out\n",
        )
    ec2_side = status(server, job_id)["ec2"]
    assert re.match(
        r"2 of 2 instances not in the cluster, the oldest up 15m\d\ds: their ECS agent never "
        "registered",
        ec2_side["instances"],
    )
    assert ec2_side["console"] == (
        "[   42.1] cloud-init[1201]: mount.lustre: mount failed: Connection timed out"
    )


def test_the_following_line_reads_one_fact_a_call(waiting, monkeypatch):
    """Each update of the line makes one call (as before); the EC2 facts join the rotation."""
    from launcher.aws.batch import BatchBackend, QueueProbe
    from launcher.aws.client import Aws

    server, environment, job_id = waiting
    group = moto_gaps.scaling_group(session(), server.url, environment)
    moto_gaps.failed_launch(
        group,
        "We currently do not have sufficient p4d.24xlarge capacity "
        "in the Availability Zone you requested (us-east-1a).",
        time.time(),
    )
    for key, value in server.env.items():
        monkeypatch.setenv(key, value)
    aws = Aws(region=REGION)
    job = BatchBackend(aws).describe(job_id)
    now = [time.monotonic()]
    events: list = []
    watch = Watch(QueueProbe(aws, lambda fn: fn()), events.append, clock=lambda: now[0])
    calls = []
    for _ in range(8):
        before = aws.calls
        watch.observe(job)
        calls.append(aws.calls - before)
        now[0] += 30
    # Snapshot; the queue and its environments; the Auto Scaling groups (once); then one each.
    assert calls == [1, 2, 1, 1, 1, 1, 1, 1]
    assert "EC2 has no capacity for this type in the zone now" in events[-1].text
