"""Configuration validation as the person deploying meets it: every refusal word for word (the
key, the value, what is allowed), both ends of every range loading, and values from ``-c``
strings and cdk.json types alike (the mutants ``make mutation`` found alive in
infra/config.py)."""

from __future__ import annotations

import json

import pytest

from infra.config import ConfigError, load, refuse_unknown_settings
from tests.conftest import IMPORTED_VPC, cdk_context, secret_arn

BLOCK = "cr-0123456789abcdef0"
GROUP = "arn:aws:resource-groups:us-east-1:123456789012:group/ml-reservations"
FAIR = {"fair_share": "true"}
SPOT_WHY = (
    "a Spot pool runs single-node jobs only: multi-node parallel jobs aren't supported on Spot "
    "Instances (Batch API, ComputeResource.type; Batch user guide, mnp-ce.html)"
)
NAT = {"nat_gateway": "true"}


def refusal(**overrides) -> str:
    with pytest.raises(ConfigError) as info:
        load(cdk_context(**overrides))
    return str(info.value)


def pools(**settings) -> str:
    return json.dumps(settings)


def weights(**teams) -> str:
    return json.dumps(teams)


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        ({"account": "12345"}, "account: '12345' is malformed; expected 12 digits"),
        (
            {"region": "useast1"},
            "region: 'useast1' is malformed; expected a region name such as us-east-1",
        ),
        (
            {"availability_zone": "us-east-1"},
            "availability_zone: 'us-east-1' is malformed; expected a zone such as us-east-1a",
        ),
        (
            {"stack_name": "9lives"},
            "stack_name: '9lives' is malformed; expected letters, digits and hyphens",
        ),
        (
            {**IMPORTED_VPC, "vpc_id": "vpc-x"},
            "vpc_id: 'vpc-x' is malformed; expected vpc- followed by 8 or 17 hex digits",
        ),
        (
            {**IMPORTED_VPC, "subnet_id": "subnet-x"},
            "subnet_id: 'subnet-x' is malformed; expected subnet- followed by 8 or 17 hex digits",
        ),
        (
            {**IMPORTED_VPC, "default_security_group_id": "sg-x"},
            "default_security_group_id: 'sg-x' is malformed; expected sg- followed by 8 or 17 "
            "hex digits (the VPC's group named 'default')",
        ),
        (
            {"extra_pull_repository_arns": "arn:aws:ecr:us-east-1:123456789012:repo/x"},
            "extra_pull_repository_arns: 'arn:aws:ecr:us-east-1:123456789012:repo/x' is "
            "malformed; expected ECR repository ARNs (arn:aws:ecr:REGION:ACCOUNT:repository/"
            "NAME), comma-separated",
        ),
        (
            {"update_timeout_minutes": "0"},
            "update_timeout_minutes: 0; allowed: 1-7200 (AWS Batch "
            "UpdatePolicy.jobExecutionTimeoutMinutes)",
        ),
        (
            {"update_timeout_minutes": "7201"},
            "update_timeout_minutes: 7201; allowed: 1-7200 (AWS Batch "
            "UpdatePolicy.jobExecutionTimeoutMinutes)",
        ),
        (
            {"copy_max_vcpus": "0"},
            "copy_max_vcpus: 0; allowed: >= 1 (a copy job takes 1 vCPU; the account's Fargate "
            "vCPU quota caps what runs at once)",
        ),
        (
            {"registry_secrets": json.dumps({"docker.io": secret_arn("x")}), **NAT},
            "registry_secrets: 'docker.io': name Docker Hub registry-1.docker.io, the host "
            "images are pulled from",
        ),
        (
            {"registry_secrets": json.dumps({"Bad_Host": secret_arn("x")}), **NAT},
            "registry_secrets: 'Bad_Host' is malformed; expected registry hosts (HOST[:PORT]) "
            "as keys",
        ),
        (
            {"registry_secrets": json.dumps({"nvcr.io": "arn:x"}), **NAT},
            "registry_secrets: 'arn:x' is malformed; expected complete Secrets Manager secret "
            "ARNs (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME-XXXXXX) as values",
        ),
        (
            {"registry_secrets": json.dumps({"nvcr.io": secret_arn("x")})},
            "registry_secrets: copy jobs reach registries outside AWS only through a NAT "
            "gateway; set nat_gateway=true (or import a VPC with a route out), or leave "
            "registry_secrets empty",
        ),
        (
            {"tags": json.dumps({f"k{i}": "v" for i in range(41)})},
            "tags: 41 tags; allowed: at most 40",
        ),
        (
            {"share_decay_seconds": "604801", **FAIR},
            "share_decay_seconds: 604801; allowed: 0-604800 (AWS Batch "
            "FairsharePolicy.shareDecaySeconds; 0 is the 600 s minimum)",
        ),
        (
            {"compute_reservation": "100", **FAIR},
            "compute_reservation: 100; allowed: 0-99 (AWS Batch "
            "FairsharePolicy.computeReservation, a percentage)",
        ),
        (
            {"share_weights": json.dumps({f"t{i}": 1 for i in range(501)}), **FAIR},
            "share_weights: 501 share identifiers; a queue has at most 500 "
            "(CreateJobQueue.schedulingPolicyArn)",
        ),
        (
            {"share_weights": weights(**{"bad-team": 1}), **FAIR},
            "share_weights: 'bad-team' is malformed; expected share identifiers of 1-255 "
            "letters and digits, optionally ending in * (a prefix), as keys",
        ),
        (
            {"share_weights": weights(team=0), **FAIR},
            "share_weights: team=0.0; allowed weights: 0.0001-999.9999 (AWS Batch "
            "ShareAttributes.weightFactor; lower gets more)",
        ),
        (
            {"share_weights": weights(**{"team*": 1, "team2": 1}), **FAIR},
            "share_weights: team2 overlaps team*; the identifiers of a fair-share policy can't "
            "overlap (ShareAttributes.shareIdentifier)",
        ),
        (
            {"share_weights": weights(team=1)},
            "share_weights: a fair-share setting; set fair_share=true (or leave it out)",
        ),
        (
            {"placement_group": "has space"},
            "placement_group: 'has space' is malformed; expected auto, none, or an existing "
            "cluster placement group's name (1-255 characters)",
        ),
        (
            {"capacity_reservation_id": BLOCK, "capacity_block_id": BLOCK},
            "capacity_reservation_id/capacity_block_id: give at most one; a launch targets one "
            "Capacity Reservation, one Capacity Block or one Capacity Reservation group",
        ),
        (
            {"capacity_block_id": BLOCK, "capacity_reservation_group_arn": GROUP},
            "capacity_block_id/capacity_reservation_group_arn: give at most one; a launch "
            "targets one Capacity Reservation, one Capacity Block or one Capacity Reservation "
            "group; a group of Capacity Blocks is capacity_block_id=GROUP-ARN",
        ),
        (
            {"capacity_reservation_id": "cr-x"},
            "capacity_reservation_id: 'cr-x' is malformed; expected cr- followed by 8 or 17 hex "
            "digits (the Capacity Reservation's id)",
        ),
        (
            {"capacity_reservation_fallback": "true"},
            "capacity_reservation_fallback: only a Capacity Reservation group falls back to "
            "On-Demand; a targeted reservation's launch fails when it is full (EC2 user guide); "
            "set capacity_reservation_group_arn, or leave it false",
        ),
        (
            {"pools": pools(spot={"instance_type": "c5n.18xlarge", "spot": True, "efa": True})},
            f"pools.spot.efa: true with spot; {SPOT_WHY}, and EFA serves those",
        ),
        (
            {
                "pools": pools(
                    spot={
                        "instance_type": "c5n.18xlarge",
                        "spot": True,
                        "capacity_reservation_id": BLOCK,
                    }
                )
            },
            "pools.spot.capacity_reservation_id: with spot; Spot Instances do not launch into "
            "Capacity Reservations or Capacity Blocks",
        ),
        (
            {
                "pools": pools(
                    spot={"instance_type": "c5n.18xlarge", "spot": True, "placement_group": "pg1"}
                )
            },
            f"pools.spot.placement_group: 'pg1' with spot; {SPOT_WHY}, and a cluster placement "
            "group serves those: use auto or none",
        ),
        (
            {"pools": pools(Bad={"instance_type": "c5n.18xlarge"})},
            "pools: 'Bad' is malformed; expected pool names of 1-24 lower-case letters, digits "
            "and hyphens, starting with a letter",
        ),
        (
            {"default_pool": "Bad"},
            "default_pool: 'Bad' is malformed; expected pool names of 1-24 lower-case letters, "
            "digits and hyphens, starting with a letter",
        ),
        (
            {"fallback": "nope", "pools": pools(b={"instance_type": "p4d.24xlarge"})},
            "fallback: 'nope' is not another pool; allowed: b",
        ),
        (
            {
                "pools": pools(
                    a={"instance_type": "p4d.24xlarge"},
                    b={"instance_type": "p4d.24xlarge", "fallback": "zz"},
                )
            },
            "pools.b.fallback: 'zz' is not another pool; allowed: default, a",
        ),
        (
            {"fallback": "b", "pools": pools(b={"instance_type": "p5.48xlarge"})},
            "fallback: pool b has p5.48xlarge, not p4d.24xlarge; a queue's multi-node jobs are "
            "sized for one instance type (Batch: all node groups use the same instance type)",
        ),
        (
            {"fallback": "b", "pools": pools(b={"instance_type": "p4d.24xlarge", "efa": False})},
            "fallback: pool b has EFA off, this pool on; a job's devices must exist on both",
        ),
        (
            {
                "efa": "false",
                "pools": pools(a={"instance_type": "p4d.24xlarge", "fallback": "default"}),
            },
            "pools.a.fallback: pool default has EFA off, this pool on; a job's devices must "
            "exist on both",
        ),
        (
            {
                "fallback": "b",
                "pools": pools(
                    b={"instance_type": "p4d.24xlarge", "fallback": "c"},
                    c={"instance_type": "p4d.24xlarge"},
                ),
            },
            "fallback: pool b has a fallback of its own; one step only (a queue takes at most "
            "three compute environments, CreateJobQueue)",
        ),
        (
            {
                "efa": "false",
                "fallback": "b",
                "pools": pools(b={"instance_type": "p4d.24xlarge", "spot": True, "efa": False}),
            },
            "fallback: pool b is Spot, and multi-node parallel jobs aren't supported on Spot "
            "Instances (Batch API, ComputeResource.type)",
        ),
        ({"max_nodes": "0"}, "max_nodes: 0 is below one instance; allowed: >= 1"),
    ],
)
def test_a_refusal_is_one_whole_line(overrides, line):
    """``cdk synth`` stops with this line: the key, the value and what is allowed, all of it
    (a guard against a refusal that names the wrong key or loses its advice)."""
    assert refusal(**overrides) == line


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        ({"efa": "maybe"}, "efa: 'maybe' is not a boolean; allowed: true, false"),
        ({"max_nodes": "1.5"}, "max_nodes: '1.5' is not an integer"),
        ({"max_nodes": 1.5}, "max_nodes: 1.5 is not an integer"),  # cdk.json's number
        (
            {"data_buckets": ["bucket-a", 1]},
            "data_buckets: expected a list of strings (or one comma-separated string)",
        ),
        (
            {"data_buckets": {"bucket-a": "ro"}},
            "data_buckets: expected a list of strings (or one comma-separated string)",
        ),
        ({"tags": "{bad"}, "tags: '{bad' is not a JSON object"),
        ({"tags": json.dumps(["a"])}, "tags: expected an object of strings, got ['a']"),
        ({"fsx_lustre": "{bad"}, "fsx_lustre: '{bad' is not a JSON object"),
        ({"fsx_lustre": "[1]"}, "fsx_lustre: expected a JSON object, got [1]"),
        (
            {"pools": pools(b={"instance_type": "p4d.24xlarge", "max_nodes": "x"})},
            "pools.b.max_nodes: 'x' is not an integer",
        ),
        ({"instance_type": {"a": 1}}, "instance_type: expected a string, got {'a': 1}"),
        (
            {"share_weights": weights(team="x"), **FAIR},
            "share_weights.team: 'x' is not a number",
        ),
        (
            {"share_weights": weights(team=True), **FAIR},
            "share_weights.team: True is not a number",
        ),
    ],
)
def test_a_value_of_the_wrong_type_is_one_whole_line(overrides, line):
    """``-c`` gives strings and cdk.json gives JSON types: either, when wrong, names the key
    and what it is not."""
    assert refusal(**overrides) == line


@pytest.mark.parametrize(
    ("text", "value"), [("true", True), ("1", True), ("yes", True), ("YES", True), ("0", False)]
)
def test_booleans_on_the_command_line(text, value):
    assert load(cdk_context(nat_gateway=text)).nat_gateway is value
    assert load(cdk_context(fair_share="no", nat_gateway=text)).fair_share is False


@pytest.mark.parametrize(
    "overrides",
    [
        {"update_timeout_minutes": "1"},
        {"update_timeout_minutes": "7200"},
        {"copy_max_vcpus": "1"},
        {"max_nodes": "1"},
        {"tags": json.dumps({f"k{i}": "v" for i in range(40)})},
        {"tags": json.dumps({"k": "v" * 256})},
        {"share_decay_seconds": "0", **FAIR},
        {"share_decay_seconds": "604800", **FAIR},
        {"compute_reservation": "99", **FAIR},
        {"share_weights": weights(a=0.0001, b=999.9999), **FAIR},
        {"share_weights": json.dumps({f"t{i}": 1 for i in range(500)}), **FAIR},
        {
            "pools": pools(
                spot={"instance_type": "c5n.18xlarge", "spot": True, "placement_group": "none"}
            )
        },
    ],
)
def test_both_ends_of_every_range_load(overrides):
    """What AWS takes, the stack takes: an end of a range refused is a cluster that cannot be
    configured as the user needs."""
    load(cdk_context(**overrides))


def test_a_tag_value_of_257_characters_is_refused():
    """AWS takes tag values of up to 256 characters: one more fails the deploy."""
    assert refusal(tags=json.dumps({"k": "v" * 257})) == (
        f"tags: 'k'='{'v' * 257}'; allowed: keys of 1-128 letters, digits, spaces and "
        "_.:/=+-@ (not aws:*, not efa-batch:cluster), values of at most 256 characters"
    )


def test_a_bad_fallback_of_a_later_pool_is_found_after_pools_without_one():
    """The default pool names no fallback; pool b's is checked all the same."""
    line = refusal(
        pools=pools(
            a={"instance_type": "p4d.24xlarge"},
            b={"instance_type": "p4d.24xlarge", "fallback": "a", "efa": False},
        )
    )
    assert (
        line == "pools.b.fallback: pool a has EFA on, this pool off; a job's devices must "
        "exist on both"
    )


def test_each_pools_view_has_its_own_fallback_and_no_pools():
    """What each pool's compute environment and queue are built from (infra/cluster.py)."""
    config = load(
        cdk_context(
            fallback="b",
            pools=pools(
                b={"instance_type": "p4d.24xlarge"},
                c={"instance_type": "p4d.24xlarge", "fallback": "b", "max_nodes": 3},
            ),
        )
    )
    views = {p.name: config.for_pool(p) for p in config.pool_list}
    assert {n: (v.fallback, dict(v.pools), v.max_nodes) for n, v in views.items()} == {
        "default": ("b", {}, 2),
        "b": (None, {}, 4),
        "c": ("b", {}, 3),
    }


def test_the_efa_refusal_names_the_types_that_have_it():
    line = refusal(instance_type="c7i.large")
    assert line.startswith(
        "instance_type: c7i.large has no EFA; set efa=false or use one of: c5n.18xlarge, "
        "c7i.48xlarge, "
    )


def without_zone(**overrides) -> dict:
    context = cdk_context(**overrides)
    demo = dict(context["environments"]["demo"])
    del demo["availability_zone"]
    return {**context, "environments": {**context["environments"], "demo": demo}}


@pytest.mark.parametrize("zones", ["us-east-1b", ["us-east-1b"]])
def test_the_zone_may_come_from_availability_zones(zones):
    """``-c availability_zones=us-east-1b`` (a string) or cdk.json's one-zone list."""
    assert load(without_zone(availability_zones=zones)).availability_zone == "us-east-1b"


def test_loading_refusals_are_one_whole_line():
    assert refusal(availability_zones=["us-east-1a", "us-east-1b"]) == (
        "availability_zones: ['us-east-1a', 'us-east-1b']; an EFA cluster lives in exactly one "
        "zone (EFA traffic cannot cross zones)"
    )
    context = cdk_context()
    context["environments"]["demo"] = {
        k: v for k, v in context["environments"]["demo"].items() if k != "account"
    }
    with pytest.raises(ConfigError) as info:
        load(context)
    assert str(info.value) == "account: missing in environment 'demo'"
    context = cdk_context()
    context["environments"]["demo"] = {**context["environments"]["demo"], "bogus": 1}
    with pytest.raises(ConfigError) as info:
        load(context)
    assert str(info.value).startswith(
        "bogus: unknown key in environment 'demo'; allowed: account, allow_privileged, "
        "availability_zone, base_image_days, "
    )


def test_a_context_key_shaped_like_a_setting_must_be_one():
    """``-c max_node=8`` would be dropped without a word and the cluster deployed with the
    default: it is refused with the setting meant; CDK's own keys pass."""
    refuse_unknown_settings(
        [
            "@aws-cdk/core:newStyleStackSynthesis",
            "env",
            "availability_zones",
            "max_nodes",
            "aws:cdk:enable-path-metadata",
        ]
    )
    with pytest.raises(ConfigError) as info:
        refuse_unknown_settings(["max_nodes", "max_node"])
    assert str(info.value) == "max_node: not a setting; did you mean max_nodes?"
    with pytest.raises(ConfigError) as info:
        refuse_unknown_settings(["zzzzqqq"])
    assert str(info.value).startswith(
        "zzzzqqq: not a setting; allowed: account, allow_privileged, availability_zone, "
        "availability_zones, "
    )
