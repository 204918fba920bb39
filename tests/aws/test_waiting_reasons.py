"""Every reason a job would wait, on the emulated default stack (p4d.24xlarge in us-east-1a,
two nodes): each is played by the emulator in turn (devenv.moto_gaps, or the real API where
one exists), and both the preflight (before anything is submitted) and the waiting job's EC2
side (what `launcher status` and the waiting line show) name it, with what to do. A Capacity
Block that starts tomorrow is tests/aws/test_preflight.py's (the pools stack has one)."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from devenv import moto_gaps
from devenv.emulator import ACCOUNT, REGION, session
from launcher.api import Cluster
from launcher.aws.client import Aws
from launcher.job.jobspec import JobSpec
from launcher.job.waiting import Facts, Watch, summary
from tests.support import cli

P_QUOTA = "L-417A185B"
QUOTA = (
    "You have requested more vCPU capacity than your current vCPU limit of 0 allows for the "
    "instance bucket that the specified instance type belongs to. Please visit "
    "http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit. "
    "Launching EC2 instance failed."
)
CAPACITY = (
    "We currently do not have sufficient p4d.24xlarge capacity in the Availability Zone you "
    "requested (us-east-1a). Our system will be working on provisioning additional capacity. "
    "Launching EC2 instance failed."
)
ADDRESSES = (
    "There are not enough free addresses in subnet 'subnet-1' to satisfy the requested number "
    "of instances. Launching EC2 instance failed. (InsufficientFreeAddressesInSubnet)"
)
TEMPLATE = (
    "The specified launch template, with template ID lt-0123, has an invalid network interface "
    "configuration (InvalidLaunchTemplate.Malformed). Launching EC2 instance failed."
)
AMI = "The image id '[ami-0a2023ec50000001]' does not exist (InvalidAMIID.NotFound)"
CONSOLE = "[   61.2] cloud-init[1187]: mount.lustre: mount fs-0123@tcp:/abc at /fsx failed"


@dataclass(frozen=True)
class World:
    """The emulated account with the default stack deployed in it."""

    url: str
    environment: str  # the default pool's compute environment
    subnet: str


@pytest.fixture(scope="module")
def world(moto_server, synth_default, tmp_path_factory):
    moto_server.reset()
    outputs = moto_server.deploy(synth_default.outdir, synth_default.stack_names)["EfaBatch"]
    (pool,) = json.loads(outputs["Pools"])
    batch = moto_server.client("batch")
    (environment,) = batch.describe_compute_environments(
        computeEnvironments=[pool["compute_environment_name"]]
    )["computeEnvironments"]
    (subnet,) = environment["computeResources"]["subnets"]
    return World(moto_server.url, environment["computeEnvironmentName"], subnet)


@pytest.fixture(scope="module")
def cluster(world, moto_server):
    """One API session for the module (botocore loads each service's model once a session)."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in moto_server.env.items():
            patch.setenv(key, value)
        patch.delenv("LAUNCHER_STACK", raising=False)
        yield Cluster.from_stack(aws=Aws(region=REGION))


@pytest.fixture(autouse=True)
def calm(world):
    yield
    moto_gaps.forget_activities()
    moto_gaps.scaling_group(session(), world.url, world.environment, instances=0)


def drain(world: World) -> Callable[[], None]:
    """Another team's prefix reservations take all of the subnet but its first 16 addresses,
    where the stack's own interfaces are (real CreateSubnetCidrReservation calls); the undo."""
    ec2 = session().client("ec2", endpoint_url=world.url)
    (found,) = ec2.describe_subnets(SubnetIds=[world.subnet])["Subnets"]
    cidr = ipaddress.ip_network(found["CidrBlock"])
    kept = next(cidr.subnets(new_prefix=28))
    ids = [
        ec2.create_subnet_cidr_reservation(
            SubnetId=world.subnet, Cidr=str(block), ReservationType="prefix"
        )["SubnetCidrReservation"]["SubnetCidrReservationId"]
        for block in cidr.address_exclude(kept)
    ]
    return lambda: [ec2.delete_subnet_cidr_reservation(SubnetCidrReservationId=i) for i in ids]


def never_joined(world: World) -> Callable[[], None]:
    """Two instances up 15 minutes that never registered, their consoles ending in a failed
    mount; the undo."""
    group = moto_gaps.scaling_group(session(), world.url, world.environment, instances=2)
    ec2 = session().client("ec2", endpoint_url=world.url)
    filters = [{"Name": "tag:aws:autoscaling:groupName", "Values": [group]}]
    found = ec2.describe_instances(Filters=filters)["Reservations"]
    for instance in (i for r in found for i in r["Instances"]):
        moto_gaps.aged(ACCOUNT, REGION, instance["InstanceId"], 900)
        moto_gaps.console_says(instance["InstanceId"], f"booting\n{CONSOLE}\n")
    return lambda: None


def launches(message: str) -> Callable[[World], Callable[[], None]]:
    def play(world: World) -> Callable[[], None]:
        group = moto_gaps.scaling_group(session(), world.url, world.environment)
        moto_gaps.failed_launch(group, message, time.time() - 30)
        return lambda: None

    return play


def both(*plays: Callable[[World], Callable[[], None]]) -> Callable[[World], Callable[[], None]]:
    def play(world: World) -> Callable[[], None]:
        undos = [p(world) for p in plays]
        return lambda: [u() for u in undos]

    return play


def quota(world: World) -> Callable[[], None]:
    moto_gaps.ec2_quota(P_QUOTA, 0)
    return lambda: moto_gaps.ec2_quota(P_QUOTA, None)


def zone(world: World) -> Callable[[], None]:
    moto_gaps.withdraw_offering(REGION, "p4d.24xlarge", "us-east-1a")
    return lambda: moto_gaps.withdraw_offering(REGION, "p4d.24xlarge", "us-east-1a", False)


def invalid(world: World) -> Callable[[], None]:
    reason = "CLIENT_ERROR - The launch template lt-0123 has an invalid network interface"
    moto_gaps.environment_invalid(world.environment, reason)
    return lambda: moto_gaps.environment_invalid(world.environment, None)


def no_ami(world: World) -> Callable[[], None]:
    moto_gaps.without_al2023(REGION)
    return lambda: moto_gaps.without_al2023(REGION, False)


# (the reason, what plays it, the preflight's row and its words, the waiting job's words)
REASONS = [
    (
        "a P quota of 0",
        both(quota, launches(QUOTA)),
        "quota",
        "Running On-Demand P instances (L-417A185B) is 0 vCPUs; max_nodes 2 x p4d.24xlarge = "
        "192 vCPUs, so no node can start: aws service-quotas request-service-quota-increase "
        "--service-code ec2 --quota-code L-417A185B --desired-value 192",
        "the account's EC2 vCPU quota is too small",
    ),
    (
        "no p4d in the zone",
        both(zone, launches(CAPACITY)),
        "zone",
        "p4d.24xlarge is not offered in us-east-1a: offered in us-east-1b, us-east-1c, "
        "us-east-1d; deploy the stack in one of those (availability_zone)",
        "EC2 has no capacity for this type in the zone now",
    ),
    (
        "a subnet without addresses",
        both(drain, launches(ADDRESSES)),
        "addresses",
        "free IPv4 addresses; max_nodes 2 nodes x 2 = 4 needed: free addresses in it, or "
        "deploy with a larger subnet (subnet_id) or a smaller max_nodes",
        "the subnet has no free IPv4 addresses for the nodes' interfaces",
    ),
    (
        "a launch template EC2 refuses",
        both(invalid, launches(TEMPLATE)),
        "environment",
        "is INVALID: CLIENT_ERROR - The launch template lt-0123 has an invalid network "
        "interface; fix what it names and deploy",
        "EC2 refused the launch template: fix the stack and deploy",
    ),
    (
        "instances that never join",
        never_joined,
        "nodes",
        "2 of 2 instances not in the cluster, the oldest up 15m",
        f"its console's last line: {CONSOLE}",
    ),
    (
        "a Region without the AMI",
        both(no_ami, launches(AMI)),
        "image",
        "no ECS_AL2023_NVIDIA AMI in us-east-1 (/aws/service/ecs/optimized-ami/amazon-linux-2023/"
        "gpu/recommended/image_id not found)",
        "the AMI the compute environment launches is not in this Region",
    ),
]


def test_a_healthy_stack_passes_the_preflight(cluster):
    report = cluster.preflight()
    assert report.passed, report.table()


@pytest.mark.parametrize(
    ("reason", "play", "row", "said", "waiting"), REASONS, ids=[r[0] for r in REASONS]
)
def test_each_reason_is_named_before_submitting_and_while_waiting(
    world, cluster, reason, play, row, said, waiting
):
    undo = play(world)
    try:
        report = cluster.preflight()
        rows = {r.check: r for r in report.cluster}
        assert not report.passed, report.table()
        assert rows[f"default: {row}"].status == "FAIL", report.table()
        assert said in rows[f"default: {row}"].detail, report.table()

        job = cluster.run(spec=JobSpec(name="w", command=("x",), image=IMAGE, nodes=2))
        moto_gaps.submitted_ago(ACCOUNT, REGION, job.job_id, 120)
        info = job.status()
        facts = job.ec2_side(info)
        assert isinstance(facts, Facts)
        line = summary(info, facts)
        assert waiting in line, line
        moto_gaps.finish_job(ACCOUNT, REGION, job.job_id, success=False)
    finally:
        undo()


@pytest.fixture
def waiting(moto_server):
    """A two-node job RUNNABLE for two minutes, submitted with the CLI."""
    done = launcher(
        moto_server, "run", "--no-workspace", "--image", IMAGE, "--nodes", "2", "--", "x"
    )
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.split()[-1]
    moto_gaps.submitted_ago(ACCOUNT, REGION, job_id, 120)
    yield job_id
    moto_gaps.finish_job(ACCOUNT, REGION, job_id, success=False)


def launcher(server, *args: str):
    return cli.launcher(*args, env={**os.environ, **server.env})


def status(server, job_id: str) -> dict:
    result = launcher(server, "status", job_id, "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


QUOTA_MESSAGE = QUOTA


def test_status_shows_the_launch_ec2_refused(moto_server, world, waiting):
    server, environment, job_id = moto_server, world.environment, waiting
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


def test_the_following_line_reads_one_fact_a_call(moto_server, world, waiting, monkeypatch):
    """Each update of the line makes one call (as before); the EC2 facts join the rotation."""
    from launcher.aws.batch import BatchBackend, QueueProbe

    server, environment, job_id = moto_server, world.environment, waiting
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


IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/x@sha256:" + "a" * 64


class Refusing:
    """An identity that may not read Auto Scaling (the Batch and ECS reads pass through)."""

    def __init__(self, aws: Aws) -> None:
        self.aws = aws
        self.refused = 0

    def __getattr__(self, name: str):
        return getattr(self.aws, name)

    def scaling_groups(self, filters):
        from launcher.errors import RemoteError

        self.refused += 1
        raise RemoteError("AWS DescribeAutoScalingGroups failed: AccessDenied: not authorized")


def test_a_read_it_may_not_make_is_asked_once_and_the_line_goes_on(
    moto_server, world, waiting, monkeypatch
):
    from launcher.aws.batch import BatchBackend, QueueProbe

    for key, value in moto_server.env.items():
        monkeypatch.setenv(key, value)
    aws = Aws(region=REGION)
    refusing = Refusing(aws)
    job = BatchBackend(aws).describe(waiting)
    now = [time.monotonic()]
    events: list = []
    watch = Watch(QueueProbe(refusing, lambda fn: fn()), events.append, clock=lambda: now[0])
    for _ in range(8):
        watch.observe(job)
        now[0] += 30
    assert refusing.refused == 1
    assert len(events) == 8 and "in the queue" in events[-1].text
