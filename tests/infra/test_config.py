"""The cluster-wide configuration (infra/config.py, and how infra/config_values.py reads a
value from ``-c`` strings and cdk.json types alike): bad configuration fails before any construct
exists, with one line naming the key, the value and what is allowed; both ends of every range
load. The environments and their overrides, the zone, the network, capacity, the copy jobs'
registries, tags, image retention and root volumes, and the keys a context may hold.
The pools' settings and fair share are in test_pool_config.py, what jobs may reach (buckets,
policies, secrets, FSx for Lustre) in test_data_config.py. The whole-line refusals and the ends
of the ranges were added where mutation testing (``make mutation``) found changes to the checks
that no test noticed."""

from __future__ import annotations

import json

import pytest

from infra.config import ConfigError, load, refuse_unknown_settings
from tests.conftest import IMPORTED_VPC, cdk_context, secret_arn
from tests.support.config_refusal import refusal

BLOCK = "cr-0123456789abcdef0"
GROUP = "arn:aws:resource-groups:us-east-1:123456789012:group/ml-reservations"


# --- loading: environments, overrides, values from -c and cdk.json --------------------------------


def test_default_environment_loads():
    config = load(cdk_context())
    assert config.env_name == "demo"
    assert config.instance_type == "p4d.24xlarge"
    assert config.efa_interfaces == 4


def test_command_line_overrides_win_over_the_environment():
    config = load(cdk_context(env="prod", max_nodes="3", fair_share="false"))
    assert (config.instance_type, config.max_nodes, config.fair_share) == ("p5.48xlarge", 3, False)


def test_values_are_coerced_from_the_field_annotations():
    """``-c key=value`` gives strings; each is read as its field's type, lists split on commas."""
    arns = ",".join(f"arn:aws:ecr:us-east-1:111122223333:repository/{n}" for n in "ab")
    config = load(cdk_context(extra_pull_repository_arns=arns, tags='{"team": "ml"}', efa="no"))
    assert config.extra_pull_repository_arns == tuple(arns.split(","))
    assert config.tags == {"team": "ml"}
    assert config.efa is False
    listed = load(cdk_context(extra_pull_repository_arns=arns.split(",")))
    assert listed.extra_pull_repository_arns == config.extra_pull_repository_arns


@pytest.mark.parametrize(
    ("text", "value"), [("true", True), ("1", True), ("yes", True), ("YES", True), ("0", False)]
)
def test_booleans_on_the_command_line(text, value):
    assert load(cdk_context(nat_gateway=text)).nat_gateway is value
    assert load(cdk_context(fair_share="no", nat_gateway=text)).fair_share is False


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
            {"pools": json.dumps({"b": {"instance_type": "p4d.24xlarge", "max_nodes": "x"}})},
            "pools.b.max_nodes: 'x' is not an integer",
        ),
        ({"instance_type": {"a": 1}}, "instance_type: expected a string, got {'a': 1}"),
        (
            {"share_weights": json.dumps({"team": "x"}), "fair_share": "true"},
            "share_weights.team: 'x' is not a number",
        ),
        (
            {"share_weights": json.dumps({"team": True}), "fair_share": "true"},
            "share_weights.team: True is not a number",
        ),
    ],
)
def test_a_value_of_the_wrong_type_is_one_whole_line(overrides, line):
    """``-c`` gives strings and cdk.json gives JSON types: either, when wrong, names the key
    and what it is not."""
    assert refusal(**overrides) == line


def without_zone(**overrides) -> dict:
    context = cdk_context(**overrides)
    demo = dict(context["environments"]["demo"])
    del demo["availability_zone"]
    return {**context, "environments": {**context["environments"], "demo": demo}}


@pytest.mark.parametrize("zones", ["us-east-1b", ["us-east-1b"]])
def test_the_zone_may_come_from_availability_zones(zones):
    """``-c availability_zones=us-east-1b`` (a string) or cdk.json's one-zone list."""
    assert load(without_zone(availability_zones=zones)).availability_zone == "us-east-1b"


def test_a_zone_is_checked_against_the_zones_cdk_knows_only_where_it_knows_them():
    context = cdk_context(availability_zone="us-east-1z")
    del context["availability-zones:account=123456789012:region=us-east-1"]
    assert load(context).availability_zone == "us-east-1z"  # CDK looks them up at deploy
    assert load(cdk_context(env="prod", availability_zone="us-west-2d")).availability_zone


# --- refusals: one line naming the key, the value and what is allowed -----------------------------


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"instance_type": "m9.huge"}, "instance_type: unknown type 'm9.huge'; allowed: "),
        ({"instance_type": "g5.xlarge"}, "instance_type: g5.xlarge has no EFA; set efa=false"),
        ({"instance_type": "p3dn.24xlarge"}, "p3dn.24xlarge is not supported: Batch's ECS_AL"),
        ({"instance_type": "trn1.32xlarge"}, "trn1.32xlarge is not supported: Trainium and"),
        ({"update_timeout_minutes": "0"}, "update_timeout_minutes: 0; allowed: 1-7200"),
        ({"max_nodes": "0"}, "max_nodes: 0 is below one instance; allowed: >= 1"),
        ({"max_nodes": "many"}, "max_nodes: 'many' is not an integer"),
        ({"availability_zones": ["us-east-1a", "us-east-1b"]}, "an EFA cluster lives in exactly"),
        ({**IMPORTED_VPC, "vpc_id": "vpc-12"}, "vpc_id: 'vpc-12' is"),
        # CDK would stop with its own message ("1 of /24 exceeds remaining space") or a
        # traceback; VPC user guide, vpc-cidr-blocks.html: /16 is the largest block.
        ({"vpc_cidr": "10.42.0.0/18"}, "vpc_cidr: '10.42.0.0/18'; allowed: an IPv4 block of /16"),
        ({"vpc_cidr": "10.0.0.0/8"}, "vpc_cidr: '10.0.0.0/8'; allowed: an IPv4 block of /16 or"),
        ({"vpc_cidr": "10.42.0.1/16"}, "vpc_cidr: '10.42.0.1/16'; allowed: "),
        ({"vpc_cidr": "banana"}, "vpc_cidr: 'banana'; allowed: "),
        ({**IMPORTED_VPC, "default_security_group_id": "sg-x"}, "default_security_group_id: "),
        (
            {"vpc_id": "vpc-0123456789abcdef0"},
            "vpc_id/subnet_id/default_security_group_id: give all",
        ),
        (
            {k: v for k, v in IMPORTED_VPC.items() if k != "default_security_group_id"},
            "give all three to import a VPC (jobs' task interfaces use the VPC's default",
        ),
        ({"capacity_reservation_id": "cr-xyz"}, "capacity_reservation_id: 'cr-xyz' is malformed"),
        ({"capacity_block_id": "cr-xyz"}, "capacity_block_id: 'cr-xyz' is malformed; expected cr-"),
        (
            {"capacity_block_id": BLOCK, "instance_type": "g5.48xlarge"},
            "capacity_block_id: EC2 offers no Capacity Blocks for g5.48xlarge; instance_type must "
            "be one of: p4d.24xlarge, p4de.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge, "
            "p6-b200.48xlarge, p6-b300.48xlarge",
        ),
        (
            {"capacity_block_id": BLOCK, "max_nodes": "65"},
            "max_nodes: 65 is more than a Capacity Block holds; allowed with capacity_block_id: "
            "1-64",
        ),
        (
            {"capacity_block_id": BLOCK, "capacity_reservation_id": BLOCK},
            "capacity_reservation_id/capacity_block_id: give at most one; a launch targets one",
        ),
        (
            {"capacity_block_id": BLOCK, "capacity_reservation_group_arn": GROUP},
            "capacity_block_id/capacity_reservation_group_arn: give at most one",
        ),
        (
            {"capacity_reservation_id": BLOCK, "capacity_reservation_group_arn": GROUP},
            "capacity_reservation_id/capacity_reservation_group_arn: give at most one",
        ),
        (
            {"capacity_reservation_group_arn": "arn:aws:ec2:us-east-1:123456789012:group/ml"},
            "capacity_reservation_group_arn: 'arn:aws:ec2:us-east-1:123456789012:group/ml' is "
            "malformed; expected arn:aws[-PARTITION]:resource-groups:REGION:ACCOUNT:group/NAME",
        ),
        (
            {"capacity_reservation_group_arn": GROUP.replace("us-east-1", "us-west-2")},
            "is in us-west-2 of account 123456789012; the group must be in the cluster's region "
            "us-east-1 and account 123456789012",
        ),
        (
            {"capacity_reservation_group_arn": GROUP.replace("123456789012", "210987654321")},
            "is in us-east-1 of account 210987654321; the group must be in the cluster's region",
        ),
        ({"min_nodes": "3"}, "min_nodes: 3; allowed: 0-2 (0 to max_nodes)"),
        ({"min_nodes": "-1"}, "min_nodes: -1; allowed: 0-2"),
        ({"min_nodes": "two"}, "min_nodes: 'two' is not an integer"),
        (
            {"capacity_wait_minutes": "5"},
            "capacity_wait_minutes: 5; allowed: 0 (never cancel) or 10-1440 (AWS Batch "
            "jobStateTimeLimitActions maxTimeSeconds: 600-86400)",
        ),
        ({"capacity_wait_minutes": "-10"}, "capacity_wait_minutes: -10; allowed: 0 (never"),
        ({"misconfigured_wait_minutes": "1441"}, "misconfigured_wait_minutes: 1441; allowed: 0"),
        ({"misconfigured_wait_minutes": "soon"}, "misconfigured_wait_minutes: 'soon' is not an"),
        ({"env": "staging"}, "env: unknown environment 'staging'; allowed: demo, prod, teams"),
        ({"removal_policy": "snapshot"}, "removal_policy: 'snapshot'; allowed: retain, destroy"),
        ({"log_retention_days": "10"}, "log_retention_days: 10; allowed: 1, 3, 5"),
        ({"efa": "maybe"}, "efa: 'maybe' is not a boolean"),
        (
            {"extra_pull_repository_arns": "arn:x"},
            "extra_pull_repository_arns: 'arn:x' is malformed",
        ),
        ({"availability_zone": "us-west-2a"}, "availability_zone: 'us-west-2a' is not in region"),
        (
            {"availability_zone": "us-east-1z"},
            "availability_zone: 'us-east-1z' is not a zone of us-east-1; allowed: us-east-1a, "
            "us-east-1b, us-east-1c, us-east-1d, us-east-1e, us-east-1f",
        ),
        (
            {"capacity_reservation_fallback": "true"},
            "capacity_reservation_fallback: only a Capacity Reservation group falls back",
        ),
        (
            {"capacity_reservation_fallback": "true", "capacity_reservation_id": BLOCK},
            "a targeted reservation's launch fails when it is full",
        ),
        (
            {"capacity_block_id": BLOCK, "placement_group": "mine"},
            "placement_group: 'mine' with capacity_block_id; a Capacity Block places its",
        ),
        ({"placement_group": "has space"}, "placement_group: 'has space' is malformed"),
        ({"tags": '{"aws:owner": "x"}'}, "tags: 'aws:owner'='x'; allowed: keys of 1-128"),
        ({"creation_tags": '{"efa-batch:cluster": "x"}'}, "not efa-batch:cluster"),
    ],
)
def test_bad_configuration_names_the_key(overrides, expected):
    with pytest.raises(ConfigError) as info:
        load(cdk_context(**overrides))
    message = str(info.value)
    assert expected in message
    assert "\n" not in message


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
            {"tags": json.dumps({f"k{i}": "v" for i in range(41)})},
            "tags: 41 tags; allowed: at most 40",
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
        ({"max_nodes": "0"}, "max_nodes: 0 is below one instance; allowed: >= 1"),
    ],
)
def test_a_refusal_is_one_whole_line(overrides, line):
    """``cdk synth`` stops with this line: the key, the value and what is allowed, all of it
    (a guard against a refusal that names the wrong key or loses its advice)."""
    assert refusal(**overrides) == line


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


def test_a_tag_value_of_257_characters_is_refused():
    """AWS takes tag values of up to 256 characters: one more fails the deploy."""
    assert refusal(tags=json.dumps({"k": "v" * 257})) == (
        f"tags: 'k'='{'v' * 257}'; allowed: keys of 1-128 letters, digits, spaces and "
        "_.:/=+-@ (not aws:*, not efa-batch:cluster), values of at most 256 characters"
    )


def test_efa_off_accepts_a_type_without_efa():
    config = load(cdk_context(instance_type="g5.xlarge", efa="false"))
    assert config.efa_interfaces == 0


def test_the_efa_refusal_names_the_types_that_have_it():
    line = refusal(instance_type="c7i.large")
    assert line.startswith(
        "instance_type: c7i.large has no EFA; set efa=false or use one of: c5n.18xlarge, "
        "c7i.48xlarge, "
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {"update_timeout_minutes": "1"},
        {"update_timeout_minutes": "7200"},
        {"copy_max_vcpus": "1"},
        {"max_nodes": "1"},
        {"tags": json.dumps({f"k{i}": "v" for i in range(40)})},
        {"tags": json.dumps({"k": "v" * 256})},
    ],
)
def test_both_ends_of_every_range_load(overrides):
    """What AWS takes, the stack takes: an end of a range refused is a cluster that cannot be
    configured as the user needs."""
    load(cdk_context(**overrides))


# --- keys: an environment's and the command line's ------------------------------------------------


def test_unknown_key_in_an_environment_is_rejected():
    context = cdk_context()
    context["environments"]["demo"]["instance_typo"] = "p5.48xlarge"
    with pytest.raises(ConfigError, match="instance_typo: unknown key in environment 'demo'"):
        load(context)


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


@pytest.mark.parametrize(
    ("key", "line"),
    [
        ("instance-type", "instance-type: not a setting; did you mean instance_type?"),
        ("max-nodes", "max-nodes: not a setting; did you mean max_nodes?"),
        ("availability-zone", "availability-zone: not a setting; did you mean availability_zone?"),
    ],
)
def test_a_hyphenated_setting_is_refused_naming_the_setting_it_means(key, line):
    with pytest.raises(ConfigError) as info:
        refuse_unknown_settings([key, "max_nodes"])
    assert str(info.value) == line


def test_cdks_own_hyphenated_keys_pass():
    refuse_unknown_settings(
        [
            "acknowledged-issue-numbers",
            "availability-zones:account=123456789012:region=us-east-1",
            "@aws-cdk/core:newStyleStackSynthesis",
            "aws:cdk:enable-path-metadata",
        ]
    )


# --- capacity: reservations, Capacity Blocks, minimum nodes, waits --------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"capacity_block_id": BLOCK},  # p4d in the demo environment
        {"capacity_block_id": "cr-01234567", "env": "prod", "max_nodes": "64", "min_nodes": "64"},
        {"capacity_block_id": BLOCK, "instance_type": "p6-b200.48xlarge", "min_nodes": "1"},
        {"capacity_reservation_id": BLOCK, "max_nodes": "100"},
        {"capacity_reservation_group_arn": GROUP},
        {"capacity_reservation_group_arn": f"{GROUP[:-15]}odcr.pool_1-a"},
        {
            "env": "prod",
            "capacity_reservation_group_arn": "arn:aws:resource-groups:us-west-2:210987654321:"
            "group/ml",
        },
        {"min_nodes": "2"},
        {"capacity_wait_minutes": "0", "misconfigured_wait_minutes": "0"},
        {"capacity_wait_minutes": "10", "misconfigured_wait_minutes": "1440"},
    ],
)
def test_good_capacity_settings_load(overrides):
    config = load(cdk_context(**overrides))
    for key, value in overrides.items():
        if key != "env":
            assert str(getattr(config, key)) == value


def test_capacity_defaults():
    config = load(cdk_context())
    assert (config.capacity_block_id, config.capacity_reservation_group_arn) == (None, None)
    assert (config.min_nodes, config.min_vcpus) == (0, 0)
    assert (config.capacity_wait_minutes, config.misconfigured_wait_minutes) == (240, 10)
    assert load(cdk_context(min_nodes="2")).min_vcpus == 2 * 96


# --- copy jobs: the workspace repository's encryption, pull-through cache, registry secrets -------


PTC_SECRET = secret_arn("ecr-pullthroughcache/docker-hub")
NAT = {"nat_gateway": "true"}


def test_copy_defaults():
    config = load(cdk_context())
    assert config.repository_encryption == "aes256"
    # dlc is no default: a cross-account ECR upstream needs the upstream owner's grant.
    assert [r.name for r in config.pull_through_rules] == ["ecr-public"]
    assert dict(config.registry_secrets) == {}
    assert config.copy_max_vcpus == 16
    assert config.internet_egress == "none"
    assert load(cdk_context(env="prod")).internet_egress == "nat"
    assert load(cdk_context(**IMPORTED_VPC)).internet_egress == "imported"


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("ecr-public,quay,k8s", ["ecr-public", "k8s", "quay"]),
        (["dlc", "ecr-public"], ["dlc", "ecr-public"]),  # a JSON list in cdk.json
        ("none", []),
        ("", []),
        (f"docker-hub={PTC_SECRET}, quay", ["docker-hub", "quay"]),
    ],
)
def test_pull_through_cache_takes_names_and_secrets(value, names):
    config = load(cdk_context(pull_through_cache=value))
    assert [r.name for r in config.pull_through_rules] == names


def test_pull_through_cache_rules_carry_upstream_and_credentials():
    config = load(cdk_context(pull_through_cache=f"dlc,docker-hub={PTC_SECRET}"))
    dlc, hub = config.pull_through_rules
    assert (dlc.prefix, dlc.upstream.url_in(config.region)) == (
        "dlc",
        "763104351884.dkr.ecr.us-east-1.amazonaws.com",
    )
    assert (dlc.upstream.upstream_registry, dlc.upstream.custom_role) == ("ecr", True)
    assert (hub.upstream.url_in(config.region), hub.credential_arn) == (
        "registry-1.docker.io",
        PTC_SECRET,
    )


def test_known_upstreams_are_the_ecr_api_enum():
    """Every upstream the stack knows is one CreatePullThroughCacheRule accepts (botocore)."""
    from infra import pull_through

    enum = pull_through.upstream_registries()
    assert {u.upstream_registry for u in pull_through.KNOWN.values()} <= set(enum)
    assert all(pull_through.prefix_pattern().match(name) for name in pull_through.KNOWN)


def test_registry_secrets_with_nat_or_an_imported_vpc():
    secrets = {"nvcr.io": secret_arn("registry/ngc", "us-west-2", "210987654321")}
    config = load(cdk_context(env="prod", registry_secrets=secrets))
    assert dict(config.registry_secrets) == secrets
    imported = load(cdk_context(**IMPORTED_VPC, registry_secrets=json.dumps(secrets)))
    assert dict(imported.registry_secrets) == secrets


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"repository_encryption": "kms-dsse"},
            "repository_encryption: 'kms-dsse'; allowed: aes256, kms",
        ),
        (
            {"pull_through_cache": "ghcr"},
            "pull_through_cache: unknown upstream 'ghcr'; allowed: ecr-public",
        ),
        (
            {"pull_through_cache": "docker-hub"},
            "pull_through_cache: docker-hub needs credentials: docker-hub=SECRET_ARN",
        ),
        (
            {"pull_through_cache": f"docker-hub={secret_arn('hub')}"},
            "is not a Secrets Manager secret ARN whose name starts with ecr-pullthroughcache/",
        ),
        (
            {"pull_through_cache": f"quay={PTC_SECRET}"},
            "pull_through_cache: quay takes no credentials",
        ),
        ({"pull_through_cache": "quay,quay"}, "pull_through_cache: quay is given twice"),
        (
            {
                "pull_through_cache": "dlc",
                "region": "eu-south-1",
                "availability_zone": "eu-south-1a",
            },
            "pull_through_cache: dlc: account 763104351884 serves Deep Learning Containers in ap-",
        ),
        (
            {"registry_secrets": {"nvcr.io": secret_arn("registry/ngc")}},
            "registry_secrets: copy jobs reach registries outside AWS only through a NAT gateway",
        ),
        (
            {
                "env": "prod",
                "registry_secrets": {
                    "nvcr.io": "arn:aws:secretsmanager:us-west-2:210987654321:secret:ngc"
                },
            },
            "registry_secrets: 'arn:aws:secretsmanager:us-west-2:210987654321:secret:ngc' is "
            "malformed; expected complete Secrets Manager secret ARNs",
        ),
        (
            {"env": "prod", "registry_secrets": {"NVCR.io": secret_arn("x")}},
            "registry_secrets: 'NVCR.io' is malformed; expected registry hosts",
        ),
        (
            {"env": "prod", "registry_secrets": {"docker.io": secret_arn("x")}},
            "registry_secrets: 'docker.io': name Docker Hub registry-1.docker.io",
        ),
        ({"registry_secrets": "[1]"}, "registry_secrets: expected an object of strings"),
        ({"copy_max_vcpus": "0"}, "copy_max_vcpus: 0; allowed: >= 1 (a copy job takes 1 vCPU"),
        ({"copy_max_vcpus": "lots"}, "copy_max_vcpus: 'lots' is not an integer"),
    ],
)
def test_bad_copy_settings_name_the_key(overrides, expected):
    with pytest.raises(ConfigError) as info:
        load(cdk_context(**overrides))
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
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
    ],
)
def test_a_copy_setting_refusal_is_one_whole_line(overrides, line):
    """The copy jobs' settings refused as ``cdk synth`` says it, all of the line."""
    assert refusal(**overrides) == line


# --- image retention, root volumes ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"keep_images": "0"}, "keep_images: 0; allowed: 1-10000"),
        ({"keep_images": "10001"}, "keep_images: 10001; allowed: 1-10000"),
        ({"workspace_image_days": "0"}, "workspace_image_days: 0; allowed: 1-3650 (days)"),
        ({"workspace_image_days": "3651"}, "workspace_image_days: 3651; allowed: 1-3650 (days)"),
        ({"base_image_days": "0"}, "base_image_days: 0; allowed: 1-3650 (days)"),
        ({"base_image_days": "3651"}, "base_image_days: 3651; allowed: 1-3650 (days)"),
        ({"root_volume_gib": "29"}, "root_volume_gib: 29; allowed: 30-16384"),
        ({"root_volume_gib": "16385"}, "root_volume_gib: 16385; allowed: 30-16384"),
        (
            {"pools": {"cpu": {"instance_type": "c5n.18xlarge", "root_volume_gib": 20}}},
            "pools.cpu.root_volume_gib: 20; allowed: 30-16384",
        ),
    ],
)
def test_out_of_range_sizes_and_ages_name_the_key_and_the_range(overrides, expected):
    assert refusal(**overrides) == expected


@pytest.mark.parametrize(
    "overrides",
    [
        {"keep_images": "1", "workspace_image_days": "1", "base_image_days": "1"},
        {"keep_images": "10000", "workspace_image_days": "3650", "base_image_days": "3650"},
        {"root_volume_gib": "30"},
        {"root_volume_gib": "16384"},
    ],
)
def test_the_ends_of_each_range_load(overrides):
    config = load(cdk_context(**overrides))
    assert {k: str(getattr(config, k)) for k in overrides} == overrides
