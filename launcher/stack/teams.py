"""Teams: what each team of a shared stack may use, as the stack's ``Teams`` output says it.

A stack deployed with ``teams`` (infra/team_config.py) gives each team its own job role,
execution role, EFS access point and log group, its share identifier, the pools it may submit
to and a managed policy for its users. The launcher submits a team's jobs with exactly those
(``ClusterInfo.for_team``), so a job of one team names nothing of another's; IAM (the roles
and the user policy) holds the same line for whoever goes around the launcher.

Pure: no I/O.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, fields
from typing import Any

from launcher.stack.buckets import BucketError, DataBucket
from launcher.stack.secrets import SecretError, SecretGrant

# The tag every job of a team carries (SubmitJob tags, propagated to its tasks): list and
# describe show it, and a team's user policy lets its users cancel only jobs that carry theirs.
TEAM_TAG = "efa-batch:team"
# Where a team's job sees the stack's common directory (the EFS directory every team shares,
# the access point one-team stacks mount); the team's own directory is at the job's EFS path.
COMMON_PATH = "/mnt/common"
# A team's name: its share identifier, part of its resources' names and of IAM ARNs.
TEAM_NAME = re.compile(r"^[a-z][a-z0-9-]{0,23}$")
TEAM_NAME_RULE = "1-24 lower-case letters, digits and hyphens, starting with a letter"


class Common(str, enum.Enum):
    """What a team's jobs may do in the common directory (EFS IAM: ClientMount reads,
    ClientWrite writes; EFS user guide, iam-access-control-nfs-efs.html)."""

    RO = "ro"
    RW = "rw"
    NONE = "none"

    def __str__(self) -> str:
        return self.value


class FsxAccess(str, enum.Enum):
    """What of the FSx for Lustre file system a team's jobs see at their FSx path: its own
    directory (``fsx_team_directory``), the whole file system, or nothing."""

    OWN = "own"
    ALL = "all"
    NONE = "none"

    def __str__(self) -> str:
        return self.value


# The launcher's job definitions are named JOB_DEFINITION_PREFIX-HASH (launcher/job/jobdef.py);
# a team's are JOB_DEFINITION_PREFIX-TEAM_HASH, so its users' policy can name them alone. The
# underscore ends the team's name (team names hold none): "efa-batch-vision_*" cannot match a
# team named vision-x. The Batch user guide scopes SubmitJob and RegisterJobDefinition the same
# way, by a name prefix ending in "_" (iam-example-job-def.html, "JobDefA_*"): SubmitJob takes
# no role, so a policy that allowed every definition would let one team's users run another
# team's definition, and its roles, on their own queue.
JOB_DEFINITION_PREFIX = "efa-batch"


def team_definition_prefix(team: str) -> str:
    """What every name of a team's job definitions starts with."""
    return f"{JOB_DEFINITION_PREFIX}-{team}_"


def efs_team_directory(team: str) -> str:
    """The root of a team's EFS access point."""
    return f"/teams/{team}"


def fsx_team_directory(team: str) -> str:
    """The node directory a team's jobs bind as their FSx path (``FsxAccess.OWN``), under
    the node's mount of the file system (``launcher.job.jobspec.FSX_NODE_PATH``)."""
    return f"/teams/{team}"


class TeamsError(ValueError):
    """A malformed Teams output."""


@dataclass(frozen=True)
class TeamInfo:
    """One team of the stack: what its jobs run as and may reach, and where they go."""

    name: str
    share_id: str  # its share identifier in the queues' fair-share policy (its name)
    pools: tuple[str, ...]  # the pools its users may submit to
    job_role_arn: str  # its data buckets and managed policies, nothing of another team's
    execution_role_arn: str  # its secrets, its log group
    access_point_id: str  # its own EFS directory (efs_team_directory), at the job's EFS path
    common: Common  # the common directory at COMMON_PATH: ro, rw or none
    log_group_name: str  # its jobs' logs; its users read this group alone
    data_buckets: tuple[DataBucket, ...]  # every location its job role reaches
    job_secrets: tuple[SecretGrant, ...]  # every secret its execution role reads
    fsx: FsxAccess  # own, all or none (none also where the stack has no FSx)
    user_policy_arn: str  # the managed policy the platform team attaches to its users

    def __post_init__(self) -> None:
        object.__setattr__(self, "pools", tuple(self.pools))
        object.__setattr__(self, "common", Common(self.common))
        object.__setattr__(self, "fsx", FsxAccess(self.fsx))
        buckets = tuple(DataBucket.parse(b) if isinstance(b, str) else b for b in self.data_buckets)
        grants = tuple(SecretGrant.parse(g) if isinstance(g, str) else g for g in self.job_secrets)
        object.__setattr__(self, "data_buckets", buckets)
        object.__setattr__(self, "job_secrets", grants)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "share_id": self.share_id,
            "pools": list(self.pools),
            "job_role_arn": self.job_role_arn,
            "execution_role_arn": self.execution_role_arn,
            "access_point_id": self.access_point_id,
            "common": self.common.value,
            "log_group_name": self.log_group_name,
            "data_buckets": [str(b) for b in self.data_buckets],
            "job_secrets": [str(g) for g in self.job_secrets],
            "fsx": self.fsx.value,
            "user_policy_arn": self.user_policy_arn,
        }


_FIELDS = [f.name for f in fields(TeamInfo)]


def parse_teams(value: str) -> tuple[TeamInfo, ...]:
    """The ``Teams`` output (a JSON list of TeamInfo objects; ``none``: no teams)."""
    if value == "none":
        return ()
    try:
        items = json.loads(value)
    except ValueError:
        raise TeamsError("is not JSON") from None
    if not isinstance(items, list) or not all(
        isinstance(i, dict) and sorted(i) == sorted(_FIELDS) for i in items
    ):
        raise TeamsError(f"is malformed: expected a list of objects with keys {', '.join(_FIELDS)}")
    try:
        return tuple(TeamInfo(**item) for item in items)
    except (BucketError, SecretError, ValueError, TypeError) as exc:
        raise TeamsError(f"is malformed: {exc}") from None


def render_teams(value: Any) -> str:
    """The stack renders its own JSON (with its resources' references); the launcher's
    fixtures render TeamInfo values."""
    if isinstance(value, str):
        return value
    if not value:
        return "none"
    return json.dumps([t.as_dict() for t in value], separators=(",", ":"))


EXAMPLE_TEAMS = json.dumps(
    [
        {
            "name": "vision",
            "share_id": "vision",
            "pools": ["default", "cpu"],
            "job_role_arn": "arn:aws:iam::123456789012:role/EfaBatch-vision-job",
            "execution_role_arn": "arn:aws:iam::123456789012:role/EfaBatch-vision-execution",
            "access_point_id": "fsap-0aaaaaaaaaaaaaaa1",
            "common": "ro",
            "log_group_name": "/aws/batch/EfaBatch/jobs/vision",
            "data_buckets": ["example-datasets/imagenet:ro", "example-checkpoints/vision:rw"],
            "job_secrets": ["vision/"],
            "fsx": "own",
            "user_policy_arn": "arn:aws:iam::123456789012:policy/EfaBatch-vision-users",
        },
        {
            "name": "llm",
            "share_id": "llm",
            "pools": ["default"],
            "job_role_arn": "arn:aws:iam::123456789012:role/EfaBatch-llm-job",
            "execution_role_arn": "arn:aws:iam::123456789012:role/EfaBatch-llm-execution",
            "access_point_id": "fsap-0aaaaaaaaaaaaaaa2",
            "common": "ro",
            "log_group_name": "/aws/batch/EfaBatch/jobs/llm",
            "data_buckets": ["example-checkpoints/llm:rw"],
            "job_secrets": ["llm/"],
            "fsx": "own",
            "user_policy_arn": "arn:aws:iam::123456789012:policy/EfaBatch-llm-users",
        },
    ],
    separators=(",", ":"),
)
