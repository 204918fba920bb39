"""A team's copy jobs (launcher/copyjob/plan.py): submitted with the team's tag, which its
users' policy asks of every tag given at submission (infra/teams.py user_statements), and
logged to the team's own group, which its users may read."""

from __future__ import annotations

import dataclasses

from devenv.clusters import cluster_info
from launcher.copyjob import plan as copy_plan
from launcher.image.reference import Reference
from launcher.job import teams
from launcher.stack.teams import EXAMPLE_TEAMS, TEAM_TAG, parse_teams

SOURCE = Reference("nvcr.io", "nvidia/pytorch", None, "sha256:" + "a" * 64)
TARGET = Reference("123456789012.dkr.ecr.us-east-1.amazonaws.com", "workspace")


def copy_requests(cluster):
    return copy_plan.requests(SOURCE, TARGET, cluster, copy_plan.CopierImage(cluster.copy_image))


def test_a_teams_copy_job_carries_its_tag_and_logs_to_its_group():
    cluster = dataclasses.replace(cluster_info(), teams=parse_teams(EXAMPLE_TEAMS))
    vision = teams.choose(cluster, "vision")
    requests_ = copy_requests(vision)
    assert requests_.submit["tags"][TEAM_TAG] == "vision"
    options = requests_.register["containerProperties"]["logConfiguration"]["options"]
    assert options["awslogs-group"] == vision.current_team.log_group_name


def test_without_teams_the_copy_job_is_as_before():
    requests_ = copy_requests(cluster_info())
    assert TEAM_TAG not in requests_.submit["tags"]
