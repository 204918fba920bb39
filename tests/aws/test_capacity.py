"""Capacity settings against the AWS APIs: the queue's time limits as a CreateJobQueue request,
and the rules that guard capacity catching the mistakes they are about."""

from __future__ import annotations

import copy

import pytest
from botocore.exceptions import ParamValidationError

from devenv.synth import synthesize
from infra.compute_pool import job_queue_name
from infra.config import ConfigError, load
from launcher.stack.outputs import OutputKey
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


# --- a Capacity Reservation group of Capacity Blocks ------------------------------------------

PROD_BLOCKS = "arn:aws:resource-groups:us-west-2:210987654321:group/b300-blocks"
DEMO_BLOCKS = "arn:aws:resource-groups:us-east-1:123456789012:group/p4d-blocks"
P6_B300_BLOCKS = {
    "env": "prod",
    "instance_type": "p6-b300.48xlarge",
    "capacity_block_id": PROD_BLOCKS,
    "max_nodes": "80",
    "min_nodes": "2",
}


@pytest.mark.parametrize(
    "overrides",
    [
        P6_B300_BLOCKS,
        {"capacity_block_id": DEMO_BLOCKS, "max_nodes": "256", "placement_group": "none"},
    ],
)
def test_a_group_of_capacity_blocks_is_a_capacity_block_target(overrides):
    """Groups take Capacity Blocks: "A group supports all reservation types, including
    On-Demand Capacity Reservations, interruptible Capacity Reservations, and Capacity Blocks
    for ML" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-groups.html). Its nodes
    may span the group's blocks, so more than one block's 64, up to the 256 that "can be
    reserved in Capacity Blocks across all accounts in your AWS Organization"
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html)."""
    config = load(cdk_context(**overrides))
    assert config.capacity_block_id == overrides["capacity_block_id"]
    assert config.capacity_reservation_group_arn is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"capacity_block_id": DEMO_BLOCKS, "max_nodes": "257"},
            "max_nodes: 257 is more than Capacity Blocks hold together; allowed with "
            "capacity_block_id: 1-256",
        ),
        (
            {"capacity_block_id": DEMO_BLOCKS, "capacity_reservation_fallback": "true"},
            "capacity_reservation_fallback: Capacity Blocks never fall back to On-Demand, in a "
            "group or not; use a fallback pool, or leave it false",
        ),
        (
            {"capacity_block_id": DEMO_BLOCKS, "placement_group": "mine"},
            "placement_group: 'mine' with capacity_block_id; a Capacity Block places its "
            "instances itself: use auto or none",
        ),
        (
            {"capacity_block_id": PROD_BLOCKS},
            f"capacity_block_id: {PROD_BLOCKS!r} is in us-west-2 of account 210987654321; the "
            "group must be in the cluster's region us-east-1 and account 123456789012",
        ),
        (
            {"capacity_block_id": "arn:aws:ec2:us-east-1:123456789012:group/ml"},
            "capacity_block_id: 'arn:aws:ec2:us-east-1:123456789012:group/ml' is malformed; "
            "expected arn:aws[-PARTITION]:resource-groups:REGION:ACCOUNT:group/NAME",
        ),
        (
            {"capacity_block_id": "blocks"},
            "capacity_block_id: 'blocks' is malformed; expected cr- followed by 8 or 17 hex "
            "digits (the Capacity Block's Capacity Reservation id, or the ARN of a Capacity "
            "Reservation group of Capacity Blocks)",
        ),
        (
            {"capacity_block_id": DEMO_BLOCKS, "instance_type": "g5.48xlarge"},
            "capacity_block_id: EC2 offers no Capacity Blocks for g5.48xlarge; instance_type "
            "must be one of: p4d.24xlarge, p4de.24xlarge, p5.48xlarge, p5e.48xlarge, "
            "p5en.48xlarge, p6-b200.48xlarge, p6-b300.48xlarge",
        ),
        (
            {"capacity_block_id": "cr-01234567", "capacity_reservation_group_arn": DEMO_BLOCKS},
            "capacity_block_id/capacity_reservation_group_arn: give at most one; a launch "
            "targets one Capacity Reservation, one Capacity Block or one Capacity Reservation "
            "group; a group of Capacity Blocks is capacity_block_id=GROUP-ARN",
        ),
    ],
)
def test_a_group_of_capacity_blocks_is_held_to_what_ec2_allows_it(overrides, message):
    """Launching into a group's Capacity Blocks: "If no matching capacity is available, the
    instances fail to launch" (no On-Demand fallback) and "You can't specify a placement group
    when launching into Capacity Blocks in a Capacity Reservation Resource Group"
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-groups-launch.html); "The total
    number of instances that can be reserved in Capacity Blocks across all accounts in your AWS
    Organization can't exceed 256 instances on a particular date"
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html). A launch
    still names one target (a group ARN or a reservation id, "The ARN of the Capacity
    Reservation resource group in which to run the instance", EC2 API,
    CapacityReservationTarget), in the cluster's region and account as any group."""
    with pytest.raises(ConfigError) as caught:
        load(cdk_context(**overrides))
    assert str(caught.value) == message


@pytest.fixture(scope="module")
def synth_p6_b300_blocks(tmp_path_factory):
    return synthesize(cdk_context(**P6_B300_BLOCKS), tmp_path_factory.mktemp("cdk-b300"))


def _launch_template_data(synth) -> dict:
    (lt,) = [
        r for r in synth.template()["Resources"].values() if r["Type"] == "AWS::EC2::LaunchTemplate"
    ]
    return lt["Properties"]["LaunchTemplateData"]


def test_p6_b300_nodes_use_cards_1_to_16_for_efa(synth_p6_b300_blocks):
    """ "P6-B300 instances have a total network bandwidth capacity of up to 6400 Gbps for EFA
    traffic ... They have 8 GPUs and 17 network cards, where the primary network card supports
    only an ENA network interface"; the guide's layout: "For the primary network interface
    (network card index 0, device index 0), use an ENA network interface. For the remaining
    network cards (network card indexes 1-16, device index 0), use EFA-only network interfaces"
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html, EFA
    configuration for P6-B300 instances, whose example has "InterfaceType=interface" on card
    0). The primary "EFA with ENA" of the other types would ask card 0 for an EFA device it
    does not have."""
    interfaces = _launch_template_data(synth_p6_b300_blocks)["NetworkInterfaces"]
    assert [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in interfaces] == [
        (0, 0, "interface"),
        *[(card, 0, "efa-only") for card in range(1, 17)],
    ]
    assert all(i["DeleteOnTermination"] is True for i in interfaces)
    # Jobs get one EFA device per EFA interface, 16, beside the 8 GPUs.
    outputs = synth_p6_b300_blocks.template()["Outputs"]
    assert outputs[OutputKey.EFA_INTERFACES]["Value"] == "16"
    assert outputs[OutputKey.GPUS_PER_NODE]["Value"] == "8"


def test_a_group_of_capacity_blocks_is_launched_into_on_their_market(synth_p6_b300_blocks):
    """ "To launch instances into Capacity Blocks in a group, specify the group ARN and select
    the Capacity Blocks purchasing option", as the guide's example does with
    "--instance-market-options MarketType=capacity-block" and
    "CapacityReservationTarget={CapacityReservationResourceGroupArn=...}"
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-groups-launch.html): no preference,
    nothing to fall back to, and no placement group ("You can't specify a placement group when
    launching into Capacity Blocks in a Capacity Reservation Resource Group")."""
    data = _launch_template_data(synth_p6_b300_blocks)
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": PROD_BLOCKS}
    }
    resources = synth_p6_b300_blocks.template()["Resources"].values()
    assert not [r for r in resources if r["Type"] == "AWS::EC2::PlacementGroup"]


def test_every_stack_rule_holds_for_p6_b300_in_a_group_of_blocks(synth_p6_b300_blocks):
    deployment = Deployment(synth_p6_b300_blocks.templates(), synth_p6_b300_blocks.config)
    failures = {r.name: r.check(deployment) for r in RULES if r.kind == "stack"}
    assert {k: v for k, v in failures.items() if v} == {}


def test_the_rules_catch_a_p6_b300_or_block_group_launched_wrong(synth_p6_b300_blocks):
    layout = compute_rules.launch_template_has_one_efa_device_per_card_and_room_for_the_task
    launch = compute_rules.nodes_launch_into_the_configured_capacity

    def efa_on_card_0(type_, props):
        if type_ == "AWS::EC2::LaunchTemplate":
            props["LaunchTemplateData"]["NetworkInterfaces"][0]["InterfaceType"] = "efa"

    assert layout(_broken(synth_p6_b300_blocks, efa_on_card_0)) == [
        "card 0: device 0 efa; expected device 0 interface"
    ]

    def seventeen_efa_cards(type_, props):
        if type_ == "AWS::EC2::LaunchTemplate":
            interfaces = props["LaunchTemplateData"]["NetworkInterfaces"]
            interfaces.append({**interfaces[-1], "NetworkCardIndex": 17})

    assert layout(_broken(synth_p6_b300_blocks, seventeen_efa_cards))

    def on_demand_market(type_, props):
        if type_ == "AWS::EC2::LaunchTemplate":
            props["LaunchTemplateData"].pop("InstanceMarketOptions")

    assert launch(_broken(synth_p6_b300_blocks, on_demand_market)) == [
        "InstanceMarketOptions None; a Capacity Block needs capacity-block"
    ]

    def block_id_target(type_, props):
        if type_ == "AWS::EC2::LaunchTemplate":
            spec = props["LaunchTemplateData"]["CapacityReservationSpecification"]
            spec["CapacityReservationTarget"] = {"CapacityReservationId": "cr-01234567"}

    assert launch(_broken(synth_p6_b300_blocks, block_id_target))


# The states of botocore's ec2 CapacityReservationState in which a block holds capacity now or
# may later: "active - The capacity is available for use", "pending", "scheduled",
# "payment-pending", "assessing", and "delayed" (EC2 "is unable to deliver ... by the requested
# start date", not never). Every other one is an ended window (launcher.job.capacity.ENDED_STATES).
LIVE_STATES = {"active", "pending", "scheduled", "payment-pending", "assessing", "delayed"}


def test_every_capacity_reservation_state_is_live_or_ended():
    """botocore's ec2 model, CapacityReservation.State: "cancelling - ... Capacity has been
    released but charges continue", "unsupported - ... will not be delivered", and
    "unavailable" (in the enum, not described): a block in any of them gets no checkpoint
    signal and no timeout check against its end (launcher.job.capacity.Window.ended)."""
    import botocore.session

    from launcher.job.capacity import ENDED_STATES, Window

    model = botocore.session.get_session().get_service_model("ec2")
    states = set(model.shape_for("CapacityReservationState").enum)
    assert sorted(states - LIVE_STATES) == sorted(ENDED_STATES)
    for state in ("cancelling", "unavailable"):
        assert Window("cr-0123456789abcdef0", 0.0, 4e9, state).ended(1.0), state
