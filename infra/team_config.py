"""The ``teams`` setting: what each team of a shared stack may use, and its checks.

``teams`` maps a team's name to a ``TeamConfig`` (coerced from cdk.json or ``-c teams=JSON``
like ``pools``). Each team gets its own job role, execution role, EFS access point, log group
and user policy (infra/teams.py), and its name is its share identifier. The stack-wide
``data_buckets`` and ``job_secrets`` are granted to every team besides its own.

A team's POSIX uid (the owner of its EFS directory, what its jobs write as) defaults to one
derived from its name alone (``default_uid``), so adding a team never changes another's;
two names that land on one uid are refused, with the hint to set ``uid``.

infra/config.py holds the setting and calls ``validate_teams``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from infra.config_values import ConfigError
from infra.data_config import validate_data
from launcher.stack import secrets
from launcher.stack.outputs import Egress
from launcher.stack.teams import TEAM_NAME, TEAM_NAME_RULE, Common, FsxAccess

# Derived uids (and gids) fall in [UID_BASE, UID_BASE + UID_SPAN): above the ranges
# distributions give local users and system accounts (below 60000 on Debian, Amazon Linux),
# and away from the common directory's owner (infra/storage.py JOB_UID_GID, 1000).
UID_BASE = 200000
UID_SPAN = 100000
# A uid the team may set itself: not root, not the common directory's owner, below the
# "nobody"-like values 65534 and 4294967295 mean to NFS and Linux.
UID_RANGE = (1, 4294967294)
_RESERVED_UIDS = (0, 1000, 65534)
# Batch share identifiers are letters and digits ("limited to 255 alphanumeric characters",
# Batch API, ShareAttributes.shareIdentifier); a team's name is its share identifier.
_SHARE_ID = re.compile(r"^[A-Za-z0-9]{1,255}$")
# Batch ShareAttributes.weightFactor, smallest and largest (infra/pool_config.py's range).
WEIGHT_FACTOR = (0.0001, 999.9999)


@dataclass(frozen=True)
class TeamConfig:
    """One team of ``teams``.

    ``pools``: the pools its users may submit to (None: every pool); ``secrets`` and
    ``data_buckets``: its own, as job_secrets and data_buckets entries; ``share_weight``: its
    weight factor in the fair-share policy (lower gets more); ``common``: ro, rw or none in
    the stack's common EFS directory; ``fsx``: own, all or none of FSx for Lustre; ``uid``:
    its POSIX uid/gid (None: ``default_uid``); ``job_role_policies``: managed policy ARNs
    attached to its job role.
    """

    pools: tuple[str, ...] | None = None
    secrets: tuple[str, ...] = ()
    data_buckets: tuple[str, ...] = ()
    share_weight: float = 1.0
    common: str = Common.RO.value
    fsx: str = FsxAccess.OWN.value
    uid: int | None = None
    job_role_policies: tuple[str, ...] = ()


def default_uid(name: str) -> int:
    """A uid from the name alone (SHA-256, so the same on every machine and Python)."""
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
    return UID_BASE + digest % UID_SPAN


def team_uid(name: str, team: TeamConfig) -> int:
    return team.uid if team.uid is not None else default_uid(name)


def team_construct_name(team: str) -> str:
    """A team's name in construct ids (vision -> Vision, my-team -> MyTeam): distinct for
    distinct names, since a capital marks each hyphen."""
    return "".join(part.capitalize() for part in team.split("-"))


def team_pools(team: TeamConfig, every_pool: tuple[str, ...]) -> tuple[str, ...]:
    """The pools a team may use: its own list, or every pool (in the stack's order)."""
    return every_pool if team.pools is None else tuple(team.pools)


# validate_data names the stack-wide keys; a team's error names the team's.
_DATA_KEYS = {
    "data_buckets:": "data_buckets:",
    "job_secrets:": "secrets:",
    "job_role_policies:": "job_role_policies:",
}


def validate_teams(
    teams: Mapping[str, TeamConfig],
    *,
    pools: tuple[str, ...],
    fair_share: bool,
    share_weights: Mapping[str, float],
    place: secrets.Place,
    egress: Egress,
) -> None:
    """Each team's name, pools, data, secrets, weight, modes and uid; one line each."""
    if teams and share_weights:
        raise ConfigError(
            "share_weights: with teams, each team's share_weight is its weight; leave "
            "share_weights out"
        )
    uids: dict[int, str] = {}
    for name, team in sorted(teams.items()):
        at = f"teams.{name}"
        if not TEAM_NAME.match(name):
            raise ConfigError(f"teams: {name!r} is not a team name; allowed: {TEAM_NAME_RULE}")
        if fair_share and not _SHARE_ID.match(name):
            raise ConfigError(
                f"teams: {name!r}: with fair_share a team's name is its share identifier, "
                "letters and digits only (Batch ShareAttributes.shareIdentifier)"
            )
        if team.pools is not None:
            if not team.pools:
                raise ConfigError(f"{at}.pools: empty; name at least one pool, or leave it out")
            unknown = [p for p in team.pools if p not in pools]
            if unknown:
                raise ConfigError(
                    f"{at}.pools: {unknown[0]!r} is not a pool; allowed: {', '.join(pools)}"
                )
        try:
            validate_data(
                data_buckets=team.data_buckets,
                fsx_lustre=None,
                job_role_policies=team.job_role_policies,
                job_secrets=team.secrets,
                place=place,
                egress=egress,
            )
        except ConfigError as exc:
            message = str(exc)
            for stack_key, team_key in _DATA_KEYS.items():
                if message.startswith(stack_key):
                    message = team_key + message[len(stack_key) :]
            raise ConfigError(f"{at}.{message}") from None
        low, high = WEIGHT_FACTOR
        if not low <= team.share_weight <= high:
            raise ConfigError(
                f"{at}.share_weight: {team.share_weight}; allowed: {low}-{high} (Batch "
                "ShareAttributes.weightFactor; lower gets more)"
            )
        for key, kind in (("common", Common), ("fsx", FsxAccess)):
            value = getattr(team, key)
            if value not in {m.value for m in kind}:
                allowed = ", ".join(m.value for m in kind)
                raise ConfigError(f"{at}.{key}: {value!r}; allowed: {allowed}")
        uid = team_uid(name, team)
        if team.uid is not None and (
            not UID_RANGE[0] <= uid <= UID_RANGE[1] or uid in _RESERVED_UIDS
        ):
            raise ConfigError(
                f"{at}.uid: {uid}; allowed: {UID_RANGE[0]}-{UID_RANGE[1]} except "
                f"{', '.join(map(str, _RESERVED_UIDS))} (root, the common directory's owner, "
                "nobody)"
            )
        if uid in uids:
            raise ConfigError(
                f"{at}.uid: {uid} is also team {uids[uid]}'s (derived from the name unless "
                f"set); set teams.{name}.uid to a number of its own"
            )
        uids[uid] = name
