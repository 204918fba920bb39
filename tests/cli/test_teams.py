"""Teams through the real `launcher` CLI, on cdk.json's teams environment (vision, speech, llm;
fair share on; pools default, cpu and llm-cb) deployed on the moto server: choosing the team,
every refusal (exit 2, one line, nothing registered or submitted), a vision dry run with
vision's roles, access points, log group, tag and share, and who is who in list, describe
and outputs."""

from __future__ import annotations

import json

import pytest

from launcher.stack.teams import COMMON_PATH, TEAM_TAG, parse_teams, team_definition_prefix
from tests.cli.test_commands import IMAGE, launcher, ok


@pytest.fixture(scope="module")
def stack(moto_server, synth_teams):
    moto_server.reset()
    outputs = moto_server.deploy(synth_teams.outdir, synth_teams.stack_names)["EfaBatch"]
    return moto_server, {t.name: t for t in parse_teams(outputs["Teams"])}


def state(server) -> tuple[int, int]:
    """(job definitions, jobs of every queue): what a refused command leaves unchanged."""
    batch = server.client("batch")
    definitions = batch.describe_job_definitions()["jobDefinitions"]
    jobs = 0
    for queue in batch.describe_job_queues()["jobQueues"]:
        found = batch.list_jobs(
            jobQueue=queue["jobQueueArn"], filters=[{"name": "AFTER_CREATED_AT", "values": ["0"]}]
        )
        jobs += len(found["jobSummaryList"])
    return len(definitions), jobs


def run(server, *args: str, env: dict | None = None):
    return launcher(server, "run", "--no-workspace", "--image", IMAGE, *args, "--", "true", env=env)


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        (
            [],
            {},
            "stack EfaBatch has teams llm, speech, vision: choose yours with --team NAME or "
            "LAUNCHER_TEAM=NAME",
        ),
        (
            ["--team", "vision", "--pool", "llm-cb"],
            {},
            "--pool llm-cb: team vision may submit to pools default, cpu; llm-cb is llm's",
        ),
        (
            ["--pool", "llm-cb"],
            {"LAUNCHER_TEAM": "vision"},
            "--pool llm-cb: team vision may submit to pools default, cpu; llm-cb is llm's",
        ),
        (
            ["--team", "vision", "--share-id", "llm"],
            {},
            "--share-id llm: team vision submits with its own share id, vision (llm is team "
            "llm's); leave it out",
        ),
        (
            ["--team", "vision", "--secret", "HF=llm/hf-token"],
            {},
            "--secret HF=llm/hf-token: team vision's jobs read only secrets under its grants: ",
        ),
        (
            ["--team", "robotics"],
            {},
            "--team robotics: stack EfaBatch has no such team; its teams: llm, speech, vision",
        ),
        (
            [],
            {"LAUNCHER_TEAM": "robotics"},
            "LAUNCHER_TEAM=robotics: stack EfaBatch has no such team; its teams: llm, "
            "speech, vision",
        ),
    ],
)
def test_each_refusal_is_one_line_and_submits_nothing(stack, args, env, line):
    server, _ = stack
    before = state(server)
    result = run(server, *args, env=env)
    assert result.returncode == 2, result.stderr
    (said,) = result.stderr.strip().splitlines()
    assert said.startswith(f"launcher: error: {line}"), said
    assert result.stdout == ""
    assert state(server) == before


def test_the_secret_refusal_names_the_teams_grants_and_the_stack_wide_ones(stack):
    server, teams = stack
    said = run(server, "--team", "vision", "--secret", "HF=llm/hf-token").stderr
    grants = ", ".join(str(g) for g in teams["vision"].job_secrets)
    assert said.strip().endswith(f"read only secrets under its grants: {grants}")
    assert "vision/" in grants and "shared/" in grants and "llm/" not in grants


def test_a_vision_dry_run_shows_visions_roles_directories_log_group_tag_and_share(stack):
    """Batch RegisterJobDefinition: the team's jobRoleArn and executionRoleArn, the awslogs
    group, EFSVolumeConfiguration.authorizationConfig.accessPointId (the team's own at the EFS
    path, the stack's common one at COMMON_PATH with MountPoint.readOnly); SubmitJob: the tag
    efa-batch:team and the team's shareIdentifier (the queue has a fair-share policy)."""
    server, teams = stack
    vision = teams["vision"]
    before = state(server)
    printed = json.loads(ok(run(server, "--team", "vision", "--nodes", "2", "--dryrun")).stdout)
    register, submit = printed["registerJobDefinition"], printed["submitJob"]
    container = register["nodeProperties"]["nodeRangeProperties"][0]["container"]
    assert container["jobRoleArn"] == vision.job_role_arn
    assert container["executionRoleArn"] == vision.execution_role_arn
    assert container["logConfiguration"]["options"]["awslogs-group"] == vision.log_group_name
    points = {
        m["containerPath"]: (
            {v["name"]: v for v in container["volumes"]}[m["sourceVolume"]],
            m["readOnly"],
        )
        for m in container["mountPoints"]
    }
    own, own_ro = points["/mnt/efs"]
    common, common_ro = points[COMMON_PATH]
    own_point = own["efsVolumeConfiguration"]["authorizationConfig"]["accessPointId"]
    common_point = common["efsVolumeConfiguration"]["authorizationConfig"]["accessPointId"]
    assert (own_point, own_ro) == (vision.access_point_id, False)
    assert common_point != vision.access_point_id and common_ro is True  # common: ro
    assert register["jobDefinitionName"].startswith(team_definition_prefix("vision"))
    assert submit["tags"][TEAM_TAG] == "vision"
    assert submit["shareIdentifier"] == "vision"
    assert state(server) == before


def test_llm_with_common_rw_writes_the_common_directory(stack):
    server, _ = stack
    printed = json.loads(ok(run(server, "--team", "llm", "--dryrun")).stdout)
    container = printed["registerJobDefinition"]["containerProperties"]
    (common,) = [m for m in container["mountPoints"] if m["containerPath"] == COMMON_PATH]
    assert common["readOnly"] is False


def test_list_describe_and_json_show_whose_job_it_is(stack):
    server, _ = stack
    vision_job = ok(run(server, "--team", "vision")).stdout.strip()
    llm_job = ok(run(server, env={"LAUNCHER_TEAM": "llm"})).stdout.strip()

    listed = {j["job_id"]: j for j in json.loads(ok(launcher(server, "list", "-o", "json")).stdout)}
    assert (listed[vision_job]["team"], listed[vision_job]["share"]) == ("vision", "vision")
    assert (listed[llm_job]["team"], listed[llm_job]["share"]) == ("llm", "llm")

    table = ok(launcher(server, "list")).stdout.splitlines()
    assert table[0].split()[:5] == ["ID", "NAME", "POOL", "TEAM", "SHARE"]
    rows = {line.split()[0]: line.split() for line in table[1:]}
    assert rows[vision_job][2:5] == ["default", "vision", "vision"]
    assert rows[llm_job][2:5] == ["default", "llm", "llm"]

    fields = dict(
        line.split(None, 1)
        for line in ok(launcher(server, "describe", llm_job)).stdout.splitlines()
    )
    assert (fields["team"], fields["share"]) == ("llm", "llm")
    described = json.loads(ok(launcher(server, "describe", vision_job, "-o", "json")).stdout)
    assert (described["team"], described["share"]) == ("vision", "vision")


def test_outputs_shows_the_teams(stack):
    server, teams = stack
    shown = ok(launcher(server, "outputs", env={"LAUNCHER_TEAM": "speech"})).stdout
    lines = shown.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("TEAM "))
    assert lines[header].split() == ["TEAM", "SHARE", "POOLS", "COMMON", "FSX", "USER", "POLICY"]
    rows = [line.split() for line in lines[header + 1 : header + 4]]
    assert rows == [
        [name, *([">"] if name == "speech" else [])]
        + [t.share_id, ",".join(t.pools), t.common.value, t.fsx.value, t.user_policy_arn]
        for name, t in teams.items()
    ]
    assert "> the team you submit as" in shown
    data = json.loads(ok(launcher(server, "outputs", "-o", "json")).stdout)
    assert [t["name"] for t in data["teams"]] == list(teams)
    assert data["teams"][0]["user_policy_arn"] == teams[data["teams"][0]["name"]].user_policy_arn


def test_a_job_file_names_the_team_and_the_flag_wins(stack, tmp_path):
    server, _ = stack
    job = tmp_path / "job.yaml"
    job.write_text(f"team: speech\nimage: {IMAGE}\ncommand: ['true']\n")

    def tagged(*flags: str) -> str:
        printed = ok(launcher(server, "run", "-f", str(job), "--no-workspace", "--dryrun", *flags))
        return json.loads(printed.stdout)["submitJob"]["tags"][TEAM_TAG]

    assert tagged() == "speech"
    assert tagged("--team", "llm") == "llm"


def test_logs_read_the_teams_log_group(stack):
    """A team's job logs to its team's group (the definition's awslogs-group); launcher logs
    reads the group the job's own definition names, with no --team (the job id is enough)."""
    from devenv import moto_gaps
    from devenv.emulator import ACCOUNT, REGION

    server, teams = stack
    job_id = ok(run(server, "--team", "vision", "--nodes", "2")).stdout.strip()
    moto_gaps.run_job(ACCOUNT, REGION, job_id, success=True, node_logs={0: ["vision's line"]})
    groups = server.client("logs").describe_log_groups(
        logGroupNamePrefix=teams["vision"].log_group_name
    )["logGroups"]
    streams = server.client("logs").describe_log_streams(logGroupName=groups[0]["logGroupName"])
    assert groups[0]["logGroupName"] == teams["vision"].log_group_name
    assert streams["logStreams"]  # the nodes' streams are in vision's group
    assert ok(launcher(server, "logs", job_id)).stdout == "[node 0] vision's line\n"
