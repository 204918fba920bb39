"""Bad configuration fails before any construct exists, with one line naming the key."""

from __future__ import annotations

import pytest

from infra.config import ConfigError, load
from tests.conftest import IMPORTED_VPC, cdk_context


def test_default_environment_loads():
    config = load(cdk_context())
    assert config.env_name == "demo"
    assert config.instance_type == "p4d.24xlarge"
    assert config.efa_interfaces == 4


def test_command_line_overrides_win_over_the_environment():
    config = load(cdk_context(env="prod", max_nodes="3", fair_share="false"))
    assert (config.instance_type, config.max_nodes, config.fair_share) == ("p5.48xlarge", 3, False)


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
        ({"env": "staging"}, "env: unknown environment 'staging'; allowed: demo, prod"),
        ({"removal_policy": "snapshot"}, "removal_policy: 'snapshot'; allowed: retain, destroy"),
        ({"log_retention_days": "10"}, "log_retention_days: 10; allowed: 1, 3, 5"),
        ({"efa": "maybe"}, "efa: 'maybe' is not a boolean"),
        (
            {"extra_pull_repository_arns": "arn:x"},
            "extra_pull_repository_arns: 'arn:x' is malformed",
        ),
        ({"availability_zone": "us-west-2a"}, "availability_zone: 'us-west-2a' is not in region"),
    ],
)
def test_bad_configuration_names_the_key(overrides, expected):
    with pytest.raises(ConfigError) as info:
        load(cdk_context(**overrides))
    message = str(info.value)
    assert expected in message
    assert "\n" not in message


def test_unknown_key_in_an_environment_is_rejected():
    context = cdk_context()
    context["environments"]["demo"]["instance_typo"] = "p5.48xlarge"
    with pytest.raises(ConfigError, match="instance_typo: unknown key in environment 'demo'"):
        load(context)


def test_efa_off_accepts_a_type_without_efa():
    config = load(cdk_context(instance_type="g5.xlarge", efa="false"))
    assert config.efa_interfaces == 0


def test_values_are_coerced_from_the_field_annotations():
    """``-c key=value`` gives strings; each is read as its field's type, lists split on commas."""
    arns = ",".join(f"arn:aws:ecr:us-east-1:111122223333:repository/{n}" for n in "ab")
    config = load(cdk_context(extra_pull_repository_arns=arns, tags='{"team": "ml"}', efa="no"))
    assert config.extra_pull_repository_arns == tuple(arns.split(","))
    assert config.tags == {"team": "ml"}
    assert config.efa is False
    listed = load(cdk_context(extra_pull_repository_arns=arns.split(",")))
    assert listed.extra_pull_repository_arns == config.extra_pull_repository_arns
