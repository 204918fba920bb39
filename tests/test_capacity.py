"""Capacity settings against the AWS APIs: the queue's time limits as a CreateJobQueue request,
and the rules that guard capacity catching the mistakes they are about."""

from __future__ import annotations

import copy

import pytest
from botocore.exceptions import ParamValidationError

from devenv.synth import synthesize
from infra.cluster import job_queue_name
from tests.conftest import cdk_context
from tests.rules import compute_rules
from tests.rules.deployment import Deployment
from tests.rules.registry import RULES
from tests.support.service_model import assert_valid

COMPUTE_ENVIRONMENT_ARN = "arn:aws:batch:us-east-1:123456789012:compute-environment/efa"


def _lower_camel(value):
    """CloudFormation's PascalCase property names as the API's lowerCamel members."""
    if isinstance(value, dict):
        return {k[0].lower() + k[1:]: _lower_camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_lower_camel(v) for v in value]
    return value


def _queue(synth) -> dict:
    (queue,) = [
        r["Properties"]
        for r in synth.template()["Resources"].values()
        if r["Type"] == "AWS::Batch::JobQueue"
        and r["Properties"]["JobQueueName"] == job_queue_name(synth.config)
    ]
    return queue


def _create_job_queue(queue: dict) -> dict:
    """The CreateJobQueue request the queue's CloudFormation properties stand for."""
    return {
        "jobQueueName": queue["JobQueueName"],
        "state": queue["State"],
        "priority": queue["Priority"],
        "computeEnvironmentOrder": [
            {"order": o["Order"], "computeEnvironment": COMPUTE_ENVIRONMENT_ARN}
            for o in queue["ComputeEnvironmentOrder"]
        ],
        "jobStateTimeLimitActions": _lower_camel(queue["JobStateTimeLimitActions"]),
    }


@pytest.mark.cdk
@pytest.mark.parametrize("fixture", ["synth_default", "synth_capacity_block"])
def test_time_limits_are_a_valid_create_job_queue_request(request, fixture):
    request_params = _create_job_queue(_queue(request.getfixturevalue(fixture)))
    actions = request_params["jobStateTimeLimitActions"]
    assert actions and all(
        set(a) == {"state", "maxTimeSeconds", "reason", "action"} for a in actions
    )
    assert_valid("batch", "CreateJobQueue", request_params)


def test_the_request_check_refuses_cloudformation_names_and_wrong_types(synth_default):
    request_params = _create_job_queue(_queue(synth_default))
    actions = request_params["jobStateTimeLimitActions"]
    with pytest.raises(ParamValidationError, match="MaxTimeSeconds"):
        assert_valid(
            "batch",
            "CreateJobQueue",
            {**request_params, "jobStateTimeLimitActions": [{**actions[0], "MaxTimeSeconds": 1}]},
        )
    with pytest.raises(ParamValidationError, match="maxTimeSeconds"):
        assert_valid(
            "batch",
            "CreateJobQueue",
            {**request_params, "jobStateTimeLimitActions": [{**actions[0], "maxTimeSeconds": "1"}]},
        )


# --- every stack rule holds for the other capacity settings ----------------------------------

OTHER_SETTINGS = {
    "odcr": {"capacity_reservation_id": "cr-0123456789abcdef0"},
    "reservation-group-warm": {
        "capacity_reservation_group_arn": "arn:aws:resource-groups:us-east-1:123456789012:"
        "group/ml-reservations",
        "min_nodes": "1",
    },
    "reservation-group-with-fallback-in-its-own-placement-group": {
        "capacity_reservation_group_arn": "arn:aws:resource-groups:us-east-1:123456789012:"
        "group/ml-reservations",
        "capacity_reservation_fallback": "true",
        "placement_group": "ml-reservations-cpg",
    },
    "odcr-without-placement-group": {
        "capacity_reservation_id": "cr-0123456789abcdef0",
        "placement_group": "none",
    },
    "p4de-block-no-time-limits": {
        "capacity_block_id": "cr-01234567",
        "instance_type": "p4de.24xlarge",
        "capacity_wait_minutes": "0",
        "misconfigured_wait_minutes": "0",
    },
}


@pytest.mark.cdk
@pytest.mark.parametrize("name", sorted(OTHER_SETTINGS))
def test_every_stack_rule_holds(name, tmp_path):
    synth = synthesize(cdk_context(**OTHER_SETTINGS[name]), tmp_path)
    deployment = Deployment(synth.templates(), synth.config)
    failures = {r.name: r.check(deployment) for r in RULES if r.kind == "stack"}
    assert {k: v for k, v in failures.items() if v} == {}


# --- the capacity rules catch what they are about --------------------------------------------


def _broken(synth, edit) -> Deployment:
    templates = copy.deepcopy(synth.templates())
    for t in templates.values():
        for res in t["Resources"].values():
            edit(res["Type"], res.get("Properties", {}))
    return Deployment(templates, synth.config)


def _time_limit_edit(**change):
    def edit(type_, props):
        if type_ == "AWS::Batch::JobQueue" and "JobStateTimeLimitActions" in props:
            props["JobStateTimeLimitActions"][0].update(change)

    return edit


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"Action": "TERMINATE"}, "an EC2 queue can only CANCEL"),
        ({"State": "SUBMITTED"}, "only RUNNABLE is supported"),
        ({"MaxTimeSeconds": 60}, "MaxTimeSeconds 60 outside 600-86400"),
        ({"MaxTimeSeconds": 86401}, "outside 600-86400"),
        ({"Reason": "MISCONFIGURATION:JOB_QUEUE_BLOCKED"}, "not a reason Batch acts on"),
    ],
)
def test_time_limit_rule_catches_what_batch_refuses(synth_default, change, problem):
    rule = compute_rules.queue_cancels_jobs_that_wait_at_its_head_too_long
    assert rule(Deployment(synth_default.templates(), synth_default.config)) == []
    problems = rule(_broken(synth_default, _time_limit_edit(**change)))
    assert any(problem in p for p in problems), problems


def test_time_limit_rule_catches_a_missing_action(synth_default):
    def drop(type_, props):
        if type_ == "AWS::Batch::JobQueue":
            props.pop("JobStateTimeLimitActions", None)

    problems = compute_rules.queue_cancels_jobs_that_wait_at_its_head_too_long(
        _broken(synth_default, drop)
    )
    assert any("the configuration asks for" in p for p in problems)


def test_capacity_rules_catch_a_block_launched_wrong(synth_capacity_block):
    ok = Deployment(synth_capacity_block.templates(), synth_capacity_block.config)
    launch = compute_rules.nodes_launch_into_the_configured_capacity
    placement = compute_rules.compute_environment_runs_multi_node_jobs_in_one_placement_group
    assert launch(ok) == [] and placement(ok) == []

    def on_demand_market(type_, props):
        if type_ == "AWS::EC2::LaunchTemplate":
            props["LaunchTemplateData"].pop("InstanceMarketOptions")

    assert launch(_broken(synth_capacity_block, on_demand_market))

    def spot(type_, props):
        if type_ == "AWS::EC2::LaunchTemplate":
            props["LaunchTemplateData"]["InstanceMarketOptions"] = {"MarketType": "spot"}

    assert launch(_broken(synth_capacity_block, spot))

    def open_preference_and_target(type_, props):
        if type_ == "AWS::EC2::LaunchTemplate":
            spec = props["LaunchTemplateData"]["CapacityReservationSpecification"]
            spec["CapacityReservationPreference"] = "open"

    assert "a preference other than capacity-reservations-only beside a target" in launch(
        _broken(synth_capacity_block, open_preference_and_target)
    )

    def placement_group(type_, props):
        if type_ == "AWS::Batch::ComputeEnvironment":
            props["ComputeResources"]["PlacementGroup"] = "efa"

    assert placement(_broken(synth_capacity_block, placement_group))

    def cold(type_, props):
        if type_ == "AWS::Batch::ComputeEnvironment":
            props["ComputeResources"]["MinvCpus"] = 0

    assert any("min_nodes" in p for p in placement(_broken(synth_capacity_block, cold)))


@pytest.mark.cdk
def test_a_reservation_group_launches_into_reservations_only_unless_it_may_fall_back(tmp_path):
    """A full group would start On-Demand nodes, outside the reservation and billed apart
    (EC2 user guide, create-cr-group): the launch template asks for reservations only."""
    group = "arn:aws:resource-groups:us-east-1:123456789012:group/ml"

    def spec_of(**settings):
        synth = synthesize(cdk_context(capacity_reservation_group_arn=group, **settings), tmp_path)
        (lt,) = [
            r
            for r in synth.template()["Resources"].values()
            if r["Type"] == "AWS::EC2::LaunchTemplate"
        ]
        return lt["Properties"]["LaunchTemplateData"]["CapacityReservationSpecification"]

    target = {"CapacityReservationTarget": {"CapacityReservationResourceGroupArn": group}}
    assert spec_of() == {**target, "CapacityReservationPreference": "capacity-reservations-only"}
    assert spec_of(capacity_reservation_fallback="true") == target


@pytest.mark.cdk
def test_an_odcr_placement_group_is_named_not_made(tmp_path):
    synth = synthesize(
        cdk_context(capacity_reservation_id="cr-0123456789abcdef0", placement_group="odcr-pg"),
        tmp_path,
    )
    resources = synth.template()["Resources"].values()
    assert not [r for r in resources if r["Type"] == "AWS::EC2::PlacementGroup"]
    (ce,) = [
        r
        for r in resources
        if r["Type"] == "AWS::Batch::ComputeEnvironment"
        and r["Properties"]["ComputeResources"]["Type"] == "EC2"
    ]
    assert ce["Properties"]["ComputeResources"]["PlacementGroup"] == "odcr-pg"


def test_capacity_rule_catches_a_market_without_a_block(synth_default):
    def block_market(type_, props):
        if type_ == "AWS::EC2::LaunchTemplate":
            props["LaunchTemplateData"]["InstanceMarketOptions"] = {"MarketType": "capacity-block"}

    problems = compute_rules.nodes_launch_into_the_configured_capacity(
        _broken(synth_default, block_market)
    )
    assert problems == [
        "InstanceMarketOptions {'MarketType': 'capacity-block'} without a Capacity Block"
    ]
