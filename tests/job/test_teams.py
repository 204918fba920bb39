"""A team's job (launcher.job.teams, volumes, jobdef): which team a job runs as, what it may
name, and the requests it sends, on the outputs' example cluster with launcher.stack.teams'
EXAMPLE_TEAMS (vision: pools default and cpu in the example; here vision keeps default alone
and llm gets cpu, so one pool is another team's)."""

from __future__ import annotations

import dataclasses

import pytest

from devenv.clusters import cluster_info
from launcher.errors import UsageError
from launcher.job import jobdef, teams
from launcher.job.jobspec import JobSpec, parse_mount, parse_secret, parse_tag
from launcher.job.options import make_spec
from launcher.job.setting_error import SettingError
from launcher.stack.teams import (
    COMMON_PATH,
    EXAMPLE_TEAMS,
    TEAM_TAG,
    Common,
    FsxAccess,
    parse_teams,
    team_definition_prefix,
)

FSX = "fs-0123456789abcdef1"


def stack(*, fair_share: bool = True, fsx_id: str | None = FSX, **vision: object):
    """The example cluster with two teams; ``vision``: fields of vision's TeamInfo to change."""
    vision_team, llm = parse_teams(EXAMPLE_TEAMS)
    vision_team = dataclasses.replace(vision_team, pools=("default",), **vision)
    llm = dataclasses.replace(llm, pools=("default", "cpu"))
    info = cluster_info(fair_share=fair_share, fsx_file_system_id=fsx_id)
    return dataclasses.replace(info, teams=(vision_team, llm))


def vision(**kwargs: object):
    return teams.choose(stack(**kwargs), "vision")


def spec(**options: object) -> JobSpec:
    return make_spec(["python", "train.py"], image="img:1", nodes=2, **options)


def refusal(cluster, **options: object) -> str:
    with pytest.raises(UsageError) as caught:
        jobdef.build(spec(**options), cluster)
    return str(caught.value)


# --- choosing the team ------------------------------------------------------------------------


def test_the_flag_then_the_environment_then_the_only_team():
    two = stack()
    assert teams.choose(two, "llm", "vision").team == "llm"
    assert teams.choose(two, None, "vision").team == "vision"
    assert teams.choose(two, None, None).team is None  # several, none chosen: refused on submit
    (only,) = two.teams[:1]
    assert teams.choose(dataclasses.replace(two, teams=(only,)), None, None).team == "vision"


def test_a_team_the_stack_lacks_names_its_teams():
    with pytest.raises(SettingError) as caught:
        teams.choose(stack(), "speech", None)
    assert (
        str(caught.value)
        == "--team speech: stack EfaBatch has no such team; its teams: vision, llm"
    )
    with pytest.raises(UsageError) as caught:
        teams.choose(stack(), None, "speech")
    assert str(caught.value) == (
        "LAUNCHER_TEAM=speech: stack EfaBatch has no such team; its teams: vision, llm"
    )


def test_a_stack_without_teams_refuses_the_flag_and_ignores_the_environment():
    plain = cluster_info()
    with pytest.raises(SettingError) as caught:
        teams.choose(plain, "vision", None)
    assert str(caught.value) == (
        "--team vision: stack EfaBatch was deployed without teams; leave out --team"
    )
    assert teams.choose(plain, None, "vision") is plain


def test_several_teams_and_none_chosen_is_refused_in_one_line():
    assert refusal(stack()) == (
        "stack EfaBatch has teams vision, llm: choose yours with --team NAME or LAUNCHER_TEAM=NAME"
    )


def test_the_view_is_the_teams_own():
    """ClusterInfo.for_team: the team's roles, log group, secrets and share."""
    view = vision()
    team = view.current_team
    assert (view.job_role_arn, view.execution_role_arn) == (
        team.job_role_arn,
        team.execution_role_arn,
    )
    assert view.log_group_name == "/aws/batch/EfaBatch/jobs/vision"
    assert view.share_identifiers == ("vision",)


# --- refusals, before anything is built ---------------------------------------------------------


def test_another_teams_pool_is_refused_naming_the_teams_pools():
    assert refusal(vision(), pool="cpu") == (
        "--pool cpu: team vision may submit to pools default; cpu is llm's"
    )


def test_another_share_id_is_refused_and_the_teams_is_the_default():
    assert refusal(vision(), share_id="llm") == (
        "--share-id llm: team vision submits with its own share id, vision (llm is team llm's); "
        "leave it out"
    )
    assert jobdef.build(spec(), vision()).submit["shareIdentifier"] == "vision"
    assert jobdef.build(spec(share_id="vision"), vision()).submit["shareIdentifier"] == "vision"


def test_without_fair_share_a_teams_job_names_no_share():
    """The queue has no fair-share policy: no shareIdentifier ("The share identifier for the
    job. Don't specify this parameter if the job queue doesn't have a fair-share scheduling
    policy", SubmitJob.shareIdentifier)."""
    submit = jobdef.build(spec(), vision(fair_share=False)).submit
    assert "shareIdentifier" not in submit


def test_a_secret_outside_the_teams_grants_is_refused_naming_the_team():
    assert refusal(vision(), secrets=(parse_secret("HF=llm/hf-token"),)) == (
        "--secret HF=llm/hf-token: team vision's jobs read only secrets under its grants: vision/"
    )
    jobdef.build(spec(secrets=(parse_secret("HF=vision/hf-token"),)), vision())


def test_another_teams_tag_is_refused():
    assert refusal(vision(), tags=(parse_tag(f"{TEAM_TAG}=llm"),)) == (
        f"--tag {TEAM_TAG}=llm: team vision's jobs carry {TEAM_TAG}=vision, which the launcher sets"
    )


def test_fsx_for_a_team_without_it_is_refused():
    assert refusal(vision(fsx=FsxAccess.NONE), mounts=(parse_mount("type=fsx,dst=/data"),)) == (
        "--mount type=fsx: team vision's jobs do not see the FSx for Lustre file system (its fsx "
        "setting is none)"
    )


# --- the requests -----------------------------------------------------------------------------


def _container(requests: jobdef.Requests) -> dict:
    ranges = requests.register["nodeProperties"]["nodeRangeProperties"]
    return ranges[0]["container"]


def test_a_teams_job_runs_as_the_team_with_its_directory_and_the_common_one_read_only():
    """The job's roles and log group are the team's; EFS through the team's access point at
    the usual path and the stack's (the common directory) at COMMON_PATH, readOnly (Batch
    MountPoint.readOnly: "If this value is true, the container has read-only access to the
    volume"), both with IAM authorization and transit encryption (EFSAuthorizationConfig:
    "If an access point is used, transit encryption must be enabled"). The submit carries the
    team's tag and share; the definition's name the team's prefix, which its users' policy
    allows."""
    cluster = vision()
    team = cluster.current_team
    requests = jobdef.build(spec(), cluster)
    container = _container(requests)
    assert container["jobRoleArn"] == team.job_role_arn
    assert container["executionRoleArn"] == team.execution_role_arn
    assert container["logConfiguration"]["options"]["awslogs-group"] == team.log_group_name
    volumes = {v["name"]: v for v in container["volumes"]}
    assert volumes["efs"]["efsVolumeConfiguration"] == {
        "fileSystemId": cluster.file_system_id,
        "transitEncryption": "ENABLED",
        "authorizationConfig": {"accessPointId": "fsap-0aaaaaaaaaaaaaaa1", "iam": "ENABLED"},
    }
    common = volumes["common"]["efsVolumeConfiguration"]["authorizationConfig"]
    assert common["accessPointId"] == cluster.access_point_id == "fsap-0123456789abcdef0"
    points = {m["sourceVolume"]: m for m in container["mountPoints"]}
    assert points["efs"] == {"sourceVolume": "efs", "containerPath": "/mnt/efs", "readOnly": False}
    assert points["common"] == {
        "sourceVolume": "common",
        "containerPath": COMMON_PATH,
        "readOnly": True,
    }
    assert requests.register["jobDefinitionName"].startswith(team_definition_prefix("vision"))
    assert requests.submit["jobDefinition"] == requests.register["jobDefinitionName"]
    assert requests.submit["tags"][TEAM_TAG] == "vision"
    assert requests.submit["shareIdentifier"] == "vision"


def test_common_rw_is_writable_and_none_is_not_mounted():
    rw = _container(jobdef.build(spec(), vision(common=Common.RW)))
    assert {m["sourceVolume"]: m["readOnly"] for m in rw["mountPoints"]}["common"] is False
    none = _container(jobdef.build(spec(), vision(common=Common.NONE)))
    assert "common" not in {v["name"] for v in none["volumes"]}
    assert COMMON_PATH not in {m["containerPath"] for m in none["mountPoints"]}


def test_fsx_own_binds_the_teams_directory_all_the_mount_none_nothing():
    """A host volume's source that is not there yet is made: "If the sourcePath value doesn't
    exist on the host container instance, the Docker daemon creates it" (ECS API,
    HostVolumeProperties.sourcePath), so a team's first job finds /fsx/teams/NAME."""

    def fsx(**vision_fields: object) -> tuple[str | None, str | None]:
        container = _container(jobdef.build(spec(), vision(**vision_fields)))
        source = {v["name"]: v for v in container["volumes"]}.get("fsx", {})
        env = {e["name"]: e["value"] for e in container["environment"]}
        return source.get("host", {}).get("sourcePath"), env.get("LAUNCHER_FSX")

    assert fsx() == ("/fsx/teams/vision", "/fsx")
    assert fsx(fsx=FsxAccess.ALL) == ("/fsx", "/fsx")
    assert fsx(fsx=FsxAccess.NONE) == (None, None)


def test_a_stack_without_teams_builds_what_it_built_before():
    """No team: one EFS volume through the stack's access point, no team tag, the plain
    definition name (the goldens in tests/job pin the whole requests)."""
    requests = jobdef.build(spec(), cluster_info(fsx_file_system_id=FSX))
    container = _container(requests)
    assert [v["name"] for v in container["volumes"]] == ["efs", "fsx"]
    assert container["volumes"][1]["host"] == {"sourcePath": "/fsx"}
    assert TEAM_TAG not in requests.submit["tags"]
    assert requests.register["jobDefinitionName"].startswith("efa-batch-")
    assert "_" not in requests.register["jobDefinitionName"]
