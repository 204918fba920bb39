"""The resources each team of cdk.json's ``teams`` environment (vision, speech, llm) gets, in
the synthesized templates and on the emulator: its EFS access point (its own root, uid and
0750), its log group (the job log group's name + /NAME, same retention and key, which the
logs key's policy names and the node replacer reads), the fair-share weights, and the Teams
output, which launcher.stack.teams.parse_teams reads; `cdk synth` (the CLI, cdk-nag on)
accepts the environment, and the emulated deploy of it succeeds."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from infra.team_config import default_uid
from launcher.stack.teams import Common, parse_teams
from tests.infra.teams_support import resource_id, synth_teams
from tests.support.iam_eval import render

ROOT = Path(__file__).resolve().parents[2]
TEAMS = ("llm", "speech", "vision")


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    return synth_teams(tmp_path_factory)


def of_type(template: dict, type_: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


@pytest.mark.cdk
def test_each_team_has_its_own_directory_and_uid(synthesized):
    """An access point "enforces a user identity" and "exposes the specified directory as the
    root" (EFS user guide, efs-access-points.html); 0750: the team alone enters its own."""
    points = of_type(synthesized.template("-Storage"), "AWS::EFS::AccessPoint")
    found = {}
    for props in (p["Properties"] for p in points.values()):
        root = props["RootDirectory"]
        if root["Path"].startswith("/teams/"):
            found[root["Path"]] = (props["PosixUser"], root["CreationInfo"])
    assert sorted(found) == [f"/teams/{t}" for t in TEAMS]
    uids = set()
    for team in TEAMS:
        user, creation = found[f"/teams/{team}"]
        uid = str(default_uid(team))
        assert user == {"Uid": uid, "Gid": uid}
        assert creation == {"OwnerUid": uid, "OwnerGid": uid, "Permissions": "0750"}
        uids.add(uid)
    assert len(uids) == 3
    # The common directory's access point is the one-team stacks', unchanged.
    assert any(p["Properties"]["RootDirectory"]["Path"] == "/shared" for p in points.values())


@pytest.mark.cdk
def test_each_team_has_its_own_log_group_like_the_job_log_group(synthesized):
    cluster = synthesized.template()
    groups = {
        v["Properties"]["LogGroupName"]: v["Properties"]
        for v in of_type(cluster, "AWS::Logs::LogGroup").values()
    }
    jobs = groups["/aws/batch/EfaBatch/jobs"]
    for team in TEAMS:
        group = groups[f"/aws/batch/EfaBatch/jobs/{team}"]
        assert group["RetentionInDays"] == jobs["RetentionInDays"] == 7
        assert group["KmsKeyId"] == jobs["KmsKeyId"]
    # The logs key lets CloudWatch Logs use it for these groups (its condition names each).
    key = next(iter(of_type(synthesized.template("-Network"), "AWS::KMS::Key").values()))
    statement = next(
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Sid") == "CloudWatchLogsForTheClusterLogGroups"
    )
    arns = str(render(statement["Condition"]))
    for team in TEAMS:
        assert f"log-group:/aws/batch/EfaBatch/jobs/{team}" in arns
    # The node replacer reads a team job's last lines from its group.
    replacer = next(
        v for k, v in of_type(cluster, "AWS::IAM::Policy").items() if k.startswith("NodeReplacer")
    )
    (reads,) = [
        s
        for s in render(replacer["Properties"]["PolicyDocument"])["Statement"]
        if s["Action"] == "logs:GetLogEvents"
    ]
    for team in TEAMS:
        logical = resource_id(cluster, f"Team{team.capitalize()}LogGroup", "AWS::Logs::LogGroup")
        assert f"<{logical}.Arn>" in reads["Resource"]


@pytest.mark.cdk
def test_the_fair_share_policy_weighs_the_teams(synthesized):
    (policy,) = of_type(synthesized.template(), "AWS::Batch::SchedulingPolicy").values()
    shares = policy["Properties"]["FairsharePolicy"]["ShareDistribution"]
    assert {s["ShareIdentifier"]: s["WeightFactor"] for s in shares} == {
        "llm": 0.5,
        "speech": 2.0,
        "vision": 1.0,
    }
    outputs = synthesized.template()["Outputs"]
    assert outputs["ShareIdentifiers"]["Value"] == "llm speech vision"


def output_text(value) -> str:
    """An output's value with its expressions written as ARN-like stand-ins."""
    text = render(value)
    return text.replace("<", "x").replace(">", "x") if isinstance(text, str) else text


@pytest.mark.cdk
def test_the_teams_output_says_what_each_team_may_use(synthesized):
    outputs = synthesized.template()["Outputs"]
    teams = {t.name: t for t in parse_teams(output_text(outputs["Teams"]["Value"]))}
    assert sorted(teams) == list(TEAMS)
    vision, llm = teams["vision"], teams["llm"]
    assert (vision.share_id, vision.pools, vision.common) == (
        "vision",
        ("default", "cpu"),
        Common.RO,
    )
    assert (llm.pools, llm.common) == (("default", "llm-cb"), Common.RW)
    assert [str(g) for g in vision.job_secrets] == ["vision/", "shared/"]
    assert [str(b) for b in vision.data_buckets] == [
        "example-datasets/imagenet:ro",
        "example-checkpoints/vision:rw",
        "example-datasets/public:ro",
    ]
    assert vision.log_group_name.startswith("x") and vision.fsx.value == "none"  # no FSx here
    assert len({vision.access_point_id, llm.access_point_id}) == 2
    assert len({vision.job_role_arn, llm.job_role_arn, vision.execution_role_arn}) == 3


@pytest.mark.cdk
def test_cdk_synth_accepts_the_three_team_environment(tmp_path):
    """The CDK CLI itself, with cdk-nag on (infra.app.create_app): every finding on the
    teams' roles and user policies is acknowledged with its reason."""
    env = {
        **os.environ,
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "PATH": f"{ROOT / 'node_modules/.bin'}:{ROOT / '.venv/bin'}:{os.environ['PATH']}",
    }
    ran = subprocess.run(
        ["cdk", "synth", "--quiet", "--no-notices", "-c", "env=teams", "-o", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    template = json.loads((tmp_path / "EfaBatch.template.json").read_text())
    assert len(of_type(template, "AWS::IAM::ManagedPolicy")) == 3


@pytest.mark.cdk
@pytest.mark.emulator
def test_the_three_team_stack_deploys_on_the_emulator(synthesized, moto_server):
    moto_server.reset()
    outputs = moto_server.deploy(synthesized.outdir, synthesized.stack_names)["EfaBatch"]
    teams = {t.name: t for t in parse_teams(outputs["Teams"])}
    assert sorted(teams) == list(TEAMS)
    efs = moto_server.client("efs")
    iam = moto_server.client("iam")
    for team in teams.values():
        (point,) = efs.describe_access_points(AccessPointId=team.access_point_id)["AccessPoints"]
        uid = default_uid(team.name)
        assert point["RootDirectory"]["Path"] == f"/teams/{team.name}"
        assert point["PosixUser"]["Uid"] == uid
        assert iam.get_policy(PolicyArn=team.user_policy_arn)["Policy"]["Arn"]
        assert team.job_role_arn.startswith("arn:aws:iam::123456789012:role/")
