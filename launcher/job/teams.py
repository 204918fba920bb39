"""Which team a job runs as (``choose``), and the checks that keep a team's job to what the
team may use (``check``): its pools, its share identifier, its tag and its FSx access. Secrets
are checked with the rest in ``launcher.job.validation``, against the team's view's grants.

A stack deployed with ``teams`` (``launcher.stack.teams``) gives each team its own roles, EFS
directory, log group and share; the launcher submits as one of them (``ClusterInfo.for_team``)
and refuses here, in one line and before anything is built or uploaded, what the team's user
policy would refuse later (or what it cannot see, such as another team's share identifier
on a queue without fair share). A stack without teams is untouched by all of it.

Pure: the environment variable's value comes from the caller.
"""

from __future__ import annotations

from launcher.errors import UsageError
from launcher.job.jobspec import JobSpec, MountKind
from launcher.job.setting_error import Setting, SettingError
from launcher.stack.cluster import ClusterInfo
from launcher.stack.teams import TEAM_TAG, FsxAccess

TEAM_ENV = "LAUNCHER_TEAM"  # the team to submit as, where --team is not given


def _teams(cluster: ClusterInfo) -> str:
    return ", ".join(cluster.team_names)


def choose(cluster: ClusterInfo, team: str | None, from_env: str | None = None) -> ClusterInfo:
    """The cluster as the chosen team sees it: ``team`` (the command's ``--team``), else
    ``from_env`` (``$LAUNCHER_TEAM``), else the stack's only team. A stack with several teams
    and none chosen stays as it is (``team`` None): whatever submits is refused by ``check``,
    while reading (list, outputs) needs no team. SettingError for a team the stack lacks, and
    for ``--team`` on a stack without teams; ``$LAUNCHER_TEAM`` is not read there (it may be
    set for another stack), so such a stack behaves exactly as before teams."""
    if not cluster.teams:
        if team is not None:
            raise SettingError(
                Setting("team", team),
                f": stack {cluster.stack_name} was deployed without teams; leave out ",
                Setting("team"),
            )
        return cluster
    if team is None and from_env:
        if from_env not in cluster.team_names:
            raise UsageError(
                f"{TEAM_ENV}={from_env}: stack {cluster.stack_name} has no such team; its "
                f"teams: {_teams(cluster)}"
            )
        team = from_env
    if team is None and len(cluster.teams) == 1:
        team = cluster.teams[0].name
    if team is None:
        return cluster
    if team not in cluster.team_names:
        raise SettingError(
            Setting("team", team),
            f": stack {cluster.stack_name} has no such team; its teams: {_teams(cluster)}",
        )
    return cluster.for_team(team)


def owners(cluster: ClusterInfo, pool: str) -> str:
    """Whose pool it is, in words: ``llm's``, ``llm's and speech's``, ``no team's``."""
    names = [f"{t.name}'s" for t in cluster.teams if pool in t.pools]
    return " and ".join(names) or "no team's"


def default_share(spec: JobSpec, cluster: ClusterInfo) -> str | None:
    """The share identifier a job submits with: the one it names, else (with a team, on a
    fair-share queue) the team's."""
    team = cluster.current_team
    if spec.share_id is None and team is not None and cluster.scheduling_policy_arn:
        return team.share_id
    return spec.share_id


def check(spec: JobSpec, cluster: ClusterInfo) -> None:
    """A team's job names nothing of another team's: a team is chosen (on a stack with
    several), the pool is one of its own, the share identifier is its own, the team tag is
    its own, and FSx is mounted only where the team sees it. ``cluster`` is the job's pool's
    view (``validation.in_pool``)."""
    if not cluster.teams:
        return
    team = cluster.current_team
    if team is None:
        raise SettingError(
            f"stack {cluster.stack_name} has teams {_teams(cluster)}: choose yours with ",
            Setting("team", "NAME"),
            f" or {TEAM_ENV}=NAME",
        )
    if cluster.pool_name not in team.pools:
        raise SettingError(
            Setting("pool", cluster.pool_name),
            f": team {team.name} may submit to pools {', '.join(team.pools)}; "
            f"{cluster.pool_name} is {owners(cluster, cluster.pool_name)}",
        )
    if spec.share_id is not None and spec.share_id != team.share_id:
        whose = [t.name for t in cluster.teams if t.share_id == spec.share_id]
        aside = f" ({spec.share_id} is team {whose[0]}'s)" if whose else ""
        raise SettingError(
            Setting("share_id", spec.share_id),
            f": team {team.name} submits with its own share id, {team.share_id}{aside}; "
            "leave it out",
        )
    tagged = dict(spec.tags).get(TEAM_TAG)
    if tagged is not None and tagged != team.name:
        raise UsageError(
            f"--tag {TEAM_TAG}={tagged}: team {team.name}'s jobs carry {TEAM_TAG}={team.name}, "
            "which the launcher sets"
        )
    every = [m for mounts in spec.mount_sets for m in mounts]
    if team.fsx is FsxAccess.NONE and any(m.kind is MountKind.FSX for m in every):
        raise UsageError(
            f"--mount type=fsx: team {team.name}'s jobs do not see the FSx for Lustre file "
            "system (its fsx setting is none)"
        )
