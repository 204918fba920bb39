"""The ``teams`` setting without a synth (infra/team_config.py): every wrong team setting is
refused in one line naming ``teams.NAME.KEY`` and what is allowed; defaults (every pool, ro,
own, weight 1, a uid derived from the name alone); the uid rule and its collisions."""

from __future__ import annotations

import json

import pytest

from infra.config import load
from infra.team_config import UID_BASE, UID_SPAN, default_uid
from tests.conftest import cdk_context
from tests.support.config_refusal import refusal

CPU = {"cpu": {"instance_type": "c7i.4xlarge", "max_nodes": 8, "spot": True}}


def teams(value: dict, **more: str) -> dict[str, str]:
    """``-c teams=JSON`` (and more -c settings) as the CDK CLI hands them over: strings."""
    return {"teams": json.dumps(value), "pools": json.dumps(CPU), **more}


def test_the_teams_environment_loads_with_its_defaults():
    config = load(cdk_context(env="teams"))
    assert sorted(config.teams) == ["llm", "speech", "vision"]
    assert config.team_pools("llm") == ("default", "llm-cb")
    assert config.teams["speech"].share_weight == 2.0
    plain = load(cdk_context(**teams({"a": {}})))
    (a,) = plain.teams.values()
    assert (a.pools, a.common, a.fsx, a.share_weight, a.uid) == (None, "ro", "own", 1.0, None)
    assert plain.team_pools("a") == ("default", "cpu")  # every pool, the default first


def test_a_stack_without_teams_has_none():
    assert load(cdk_context()).teams == {}


@pytest.mark.parametrize(
    ("settings", "line"),
    [
        (
            teams({"Vision": {}}),
            "teams: 'Vision' is not a team name; allowed: 1-24 lower-case letters, digits and "
            "hyphens, starting with a letter",
        ),
        (
            teams({"my-team": {}}, fair_share="true"),
            "teams: 'my-team': with fair_share a team's name is its share identifier, letters "
            "and digits only (Batch ShareAttributes.shareIdentifier)",
        ),
        (
            teams({"vision": {"pools": ["gpu"]}}),
            "teams.vision.pools: 'gpu' is not a pool; allowed: default, cpu",
        ),
        (
            teams({"vision": {"pools": []}}),
            "teams.vision.pools: empty; name at least one pool, or leave it out",
        ),
        (
            teams({"vision": {"secrets": ["arn:bad"]}}),
            "teams.vision.secrets: 'arn:bad': allowed: a Secrets Manager name prefix, "
            "ssm:PARAMETER_PREFIX, or a secret's or parameter's ARN",
        ),
        (
            teams({"vision": {"data_buckets": ["Bad_Bucket"]}}),
            "teams.vision.data_buckets: 'Bad_Bucket': bucket 'Bad_Bucket' breaks S3's naming "
            "rules (3-63 lower-case letters, digits, dots, hyphens; BUCKET[/PREFIX][:ro|:rw])",
        ),
        (
            teams({"vision": {"job_role_policies": ["AdministratorAccess"]}}),
            "teams.vision.job_role_policies: 'AdministratorAccess' is malformed; expected "
            "managed policy ARNs (arn:aws:iam::ACCOUNT:policy/NAME or "
            "arn:aws:iam::aws:policy/NAME)",
        ),
        (
            teams({"vision": {"share_weight": 0}}, fair_share="true"),
            "teams.vision.share_weight: 0.0; allowed: 0.0001-999.9999 (Batch "
            "ShareAttributes.weightFactor; lower gets more)",
        ),
        (
            teams({"vision": {"share_weight": "much"}}),
            "teams.vision.share_weight: 'much' is not a number",
        ),
        (
            teams({"vision": {"common": "write"}}),
            "teams.vision.common: 'write'; allowed: ro, rw, none",
        ),
        (teams({"vision": {"fsx": "mine"}}), "teams.vision.fsx: 'mine'; allowed: own, all, none"),
        (
            teams({"vision": {"uid": 1000}}),
            "teams.vision.uid: 1000; allowed: 1-4294967294 except 0, 1000, 65534 (root, the "
            "common directory's owner, nobody)",
        ),
        (
            teams({"vision": {"uid": 0}}),
            "teams.vision.uid: 0; allowed: 1-4294967294 except 0, 1000, 65534 (root, the "
            "common directory's owner, nobody)",
        ),
        (
            teams({"vision": {"colour": "red"}}),
            "teams.vision.colour: unknown key; allowed: pools, secrets, data_buckets, "
            "share_weight, common, fsx, uid, job_role_policies",
        ),
        (
            teams({"vision": {}}, fair_share="true", share_weights='{"vision": 1}'),
            "share_weights: with teams, each team's share_weight is its weight; leave "
            "share_weights out",
        ),
        ({"teams": "vision"}, "teams: 'vision' is not a JSON object"),
    ],
)
def test_a_wrong_team_setting_is_refused_in_one_line(settings, line):
    assert refusal(**settings) == line


def test_secrets_elsewhere_need_a_way_out_as_job_secrets_do():
    arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:vision/token-AbCdEf"
    assert refusal(**teams({"vision": {"secrets": [arn]}})) == (
        f"teams.vision.secrets: {arn} is in another Region; the VPC's endpoints reach "
        "us-east-1 only: set nat_gateway=true, or copy the secret to us-east-1"
    )


def test_the_uid_comes_from_the_name_alone():
    """Deterministic (SHA-256 of the name), in the documented range, and the same whatever
    other teams exist: adding a team never changes another's uid."""
    assert default_uid("vision") == default_uid("vision") == 273852
    for name in ("vision", "speech", "llm", "a", "x" * 24):
        assert UID_BASE <= default_uid(name) < UID_BASE + UID_SPAN
    one = load(cdk_context(**teams({"vision": {}})))
    three = load(cdk_context(**teams({"vision": {}, "llm": {}, "speech": {}})))
    assert one.teams["vision"].uid is None is three.teams["vision"].uid
    assert len({default_uid(n) for n in ("vision", "speech", "llm")}) == 3


def test_two_names_on_one_uid_are_refused_with_the_way_out():
    assert default_uid("t37") == default_uid("t166")  # found by search: a real collision
    assert refusal(**teams({"t37": {}, "t166": {}})) == (
        "teams.t37.uid: 224814 is also team t166's (derived from the name unless set); set "
        "teams.t37.uid to a number of its own"
    )
    load(cdk_context(**teams({"t37": {"uid": 5000}, "t166": {}})))
    assert refusal(**teams({"a": {"uid": 5000}, "b": {"uid": 5000}})) == (
        "teams.b.uid: 5000 is also team a's (derived from the name unless set); set "
        "teams.b.uid to a number of its own"
    )
