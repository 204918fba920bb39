"""The preflight's rules (launcher.job.readiness): each reason a pool's nodes would not start,
said in one line with what to do, from what AWS answered."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from launcher.job import readiness
from launcher.job.readiness import Finding, PoolNeed

P5 = PoolNeed(
    "default", "p5.48xlarge", 192, 4, False, 2, ("subnet-1",), image_type="ECS_AL2023_NVIDIA"
)
NOW = datetime(2026, 11, 29, 12, tzinfo=timezone.utc).timestamp()


def at(hours: float) -> datetime:
    return datetime.fromtimestamp(NOW + hours * 3600, timezone.utc)


@pytest.mark.parametrize(
    ("instance_type", "spot", "code"),
    [
        ("p5.48xlarge", False, "L-417A185B"),
        ("p4d.24xlarge", False, "L-417A185B"),
        ("p6-b200.48xlarge", False, "L-417A185B"),
        ("g5.xlarge", False, "L-DB2E81BA"),
        ("c5n.18xlarge", False, "L-1216C47A"),
        ("c7i.4xlarge", True, "L-34B43A08"),
        ("trn1n.32xlarge", False, "L-2C3B7624"),
        ("g6e.12xlarge", True, "L-3819A6DF"),
    ],
)
def test_each_family_draws_on_its_own_quota(instance_type, spot, code):
    """EC2 user guide, ec2-on-demand-instances.html: On-Demand limits are per family bucket,
    counted in vCPUs; Spot has its own (using-spot-limits.html)."""
    assert readiness.quota_of(instance_type, spot)[0] == code


def test_a_new_accounts_zero_quota_is_named_with_the_request_that_raises_it():
    """A new account's Running On-Demand P instances quota is 0: no node of the pool starts, and
    the job waits in RUNNABLE with nothing in its status reason."""
    finding = readiness.quota_finding(P5, 0)
    assert not finding.ok
    assert finding.line() == (
        "default: quota: WAITS: Running On-Demand P instances (L-417A185B) is 0 vCPUs; "
        "max_nodes 4 x p5.48xlarge = 768 vCPUs, so no node can start: aws service-quotas "
        "request-service-quota-increase --service-code ec2 --quota-code L-417A185B "
        "--desired-value 768"
    )
    assert "at most 2 nodes" in readiness.quota_finding(P5, 400).text
    assert readiness.quota_finding(P5, 768).ok


def test_pools_on_one_quota_are_told_they_take_turns():
    other = PoolNeed("ondemand", "p5.48xlarge", 192, 2, False, 2)
    finding = readiness.quota_finding(P5, 1000, [other])
    assert finding.ok and "(with ondemand: 1152, so their jobs take turns)" in finding.text


def test_a_zone_without_the_type_names_the_zones_that_have_it():
    finding = readiness.zone_finding(P5, {"subnet-1": "us-east-1f"}, {"us-east-1a", "us-east-1b"})
    assert not finding.ok
    assert finding.text == (
        "p5.48xlarge is not offered in us-east-1f: offered in us-east-1a, us-east-1b; deploy the "
        "stack in one of those (availability_zone)"
    )
    assert readiness.zone_finding(P5, {"subnet-1": "us-east-1a"}, {"us-east-1a"}).ok


def test_a_subnet_short_of_addresses_counts_each_nodes_interfaces():
    finding = readiness.addresses_finding(P5, 7)
    assert not finding.ok
    assert "has 7 free IPv4 addresses; max_nodes 4 nodes x 2 = 8 needed" in finding.text
    assert readiness.addresses_finding(P5, 8).ok


@pytest.mark.parametrize(
    ("state", "start", "end", "fallback", "ok", "words"),
    [
        ("active", -1, 20, None, True, "Capacity Block cr-1 active until 2026-11-30 08:00 UTC"),
        (
            "scheduled",
            5,
            29,
            None,
            False,
            "starts at 2026-11-29 17:00 UTC (in 5h00m): jobs wait until then",
        ),
        ("scheduled", 5, 29, "ondemand", True, "meanwhile jobs run on pool ondemand"),
        ("expired", -30, -6, None, False, "expired at 2026-11-29 06:00 UTC"),
        ("active", -30, -1, None, False, "ended at"),
    ],
)
def test_a_block_not_started_or_ended_is_said_with_its_times(
    state, start, end, fallback, ok, words
):
    need = PoolNeed(
        "train",
        "p5.48xlarge",
        192,
        4,
        False,
        2,
        reservation_id="cr-1",
        block=True,
        fallback=fallback,
    )
    found = {
        "CapacityReservationId": "cr-1",
        "State": state,
        "StartDate": at(start),
        "EndDate": at(end),
        "TotalInstanceCount": 4,
    }
    finding = readiness.reservation_finding(need, found, NOW)
    assert finding.ok is ok and words in finding.text, finding.text


def test_a_block_smaller_than_max_nodes_says_the_largest_job_that_fits():
    need = PoolNeed("train", "p5.48xlarge", 192, 4, False, 2, reservation_id="cr-1", block=True)
    found = {
        "CapacityReservationId": "cr-1",
        "State": "active",
        "StartDate": at(-1),
        "EndDate": at(9),
        "TotalInstanceCount": 2,
    }
    finding = readiness.reservation_finding(need, found, NOW)
    assert not finding.ok and "submit at most 2 --nodes" in finding.text


def test_an_invalid_or_disabled_environment_gives_batchs_reason():
    invalid = {
        "computeEnvironmentName": "ce",
        "state": "ENABLED",
        "status": "INVALID",
        "statusReason": "CLIENT_ERROR - The launch template was not found",
    }
    finding = readiness.environment_finding(P5, invalid)
    assert not finding.ok and "INVALID: CLIENT_ERROR - The launch template was not found" in (
        finding.text
    )
    disabled = {**invalid, "state": "DISABLED", "status": "VALID"}
    assert "--state ENABLED" in readiness.environment_finding(P5, disabled).text
    assert readiness.environment_finding(P5, {**invalid, "status": "VALID"}).ok


def test_a_region_without_the_ami_names_the_parameter():
    finding = readiness.image_finding(P5, "eu-south-2", exists=False)
    assert not finding.ok
    assert "/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/recommended/image_id" in (
        finding.text
    )


def test_what_could_not_be_read_is_said_but_never_fails():
    skipped = Finding("default", "quota", None, "this AWS identity may not call x")
    assert readiness.passed([skipped]) and skipped.line().startswith("default: quota: skipped:")
    assert not readiness.passed([skipped, readiness.quota_finding(P5, 0)])
