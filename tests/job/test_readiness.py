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


def activity(message: str, status: str = "Failed", ago: float = 65) -> dict:
    return {
        "StatusCode": status,
        "StatusMessage": message,
        "StartTime": datetime.fromtimestamp(NOW - ago, timezone.utc),
    }


@pytest.mark.parametrize(
    ("message", "advice"),
    [
        (
            "VcpuLimitExceeded: You have requested more vCPU capacity than your current vCPU limit "
            "of 0 allows",
            "the account's EC2 vCPU quota is too small",
        ),
        (
            "We currently do not have sufficient p5.48xlarge capacity in the Availability Zone you "
            "requested (us-east-1a).",
            "EC2 has no capacity for this type in the zone now",
        ),
        (
            "Insufficient capacity in the Capacity Reservation cr-0123 "
            "(ReservationCapacityExceeded)",
            "the Capacity Block or reservation is full, not active yet, or ended",
        ),
        (
            "Your requested instance type (p5.48xlarge) is not supported in your requested "
            "Availability Zone (us-east-1e).",
            "the zone does not offer this instance type",
        ),
        (
            "There are not enough free addresses in subnet 'subnet-1' to satisfy the requested "
            "number of instances.",
            "the subnet has no free IPv4 addresses",
        ),
        (
            "The image id '[ami-1]' does not exist (InvalidAMIID.NotFound)",
            "the AMI the compute environment launches is not in this Region",
        ),
        (
            "The specified launch template, with template ID lt-1, does not exist.",
            "EC2 refused the launch template",
        ),
    ],
)
def test_a_failed_launch_is_said_in_the_users_terms(message, advice):
    """DescribeScalingActivities: "If an attempt to launch instances failed, the StatusCode
    value is Failed or Cancelled and the StatusMessage element in the response indicates the
    cause of the failure" (Auto Scaling API reference, API_DescribeScalingActivities.html)."""
    text = readiness.failed_launch([activity(message)], NOW)
    assert text.startswith("latest launch failed 1m05s ago: ") and f"({advice}" in text, text


def test_only_the_newest_activity_counts_and_long_messages_are_cut():
    assert readiness.failed_launch([activity("fine", "Successful"), activity("old")], NOW) is None
    assert readiness.failed_launch([], NOW) is None
    text = readiness.failed_launch([activity("x" * 400, "Cancelled")], NOW)
    assert "x" * 157 + "..." in text and "x" * 158 not in text


def test_instances_count_as_unjoined_only_past_the_grace():
    def up(seconds: float, instance_id: str = "i-1") -> dict:
        return {
            "InstanceId": instance_id,
            "LaunchTime": datetime.fromtimestamp(NOW - seconds, timezone.utc),
        }

    assert readiness.unjoined([up(60)], 0, NOW) == (None, None)  # still booting
    text, oldest = readiness.unjoined([up(700, "i-old"), up(60, "i-new")], 0, NOW)
    assert (
        text.startswith("2 of 2 instances not in the cluster, the oldest up 11m40s")
        and oldest == "i-old"
    )
    text, oldest = readiness.unjoined([up(700), up(700, "i-2")], 1, NOW)
    assert text.startswith("1 of 2") and oldest is None  # which one is not known: no console
    assert readiness.unjoined([up(700)], 1, NOW) == (None, None)
    assert readiness.unjoined([up(700)], None, NOW) == (None, None)


def test_the_console_gives_its_last_line():
    assert readiness.console_tail("boot\n  mount failed  \n\n") == "mount failed"
    assert readiness.console_tail("") is None


def test_a_groups_name_starts_with_its_environments():
    groups = [{"AutoScalingGroupName": n} for n in ("ce-asg-1", "ce-b-asg-2", "other-asg-3")]
    assert readiness.scaling_groups(["ce", "ce-b", "none"], groups) == {
        "ce": "ce-asg-1",
        "ce-b": "ce-b-asg-2",
    }
