"""The compute pools' settings: ``PoolConfig`` (one entry of ``pools``), ``Pool`` (a pool as the
stack builds it), and their checks: each pool's instance type, node counts, capacity target
(reservation, Capacity Block, reservation group) and placement, its fallback, and the fair
share of the queues.

The top-level keys of the same names describe the default pool (``POOL_SETTINGS``);
infra/config.py gathers every pool (``ClusterConfig.pool_list``) and calls these checks.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass

from infra.config_values import ConfigError, check
from launcher.stack import catalog

# A pool's name is part of its queue's name ("up to 128 letters (uppercase and lowercase),
# numbers, hyphens, and underscores", CreateJobQueue.jobQueueName) and of its constructs' ids.
_POOL_NAME = re.compile(r"^[a-z][a-z0-9-]{0,23}$")
# The settings a pool has and the top-level keys describe for the default pool, same names.
POOL_SETTINGS = (
    "instance_type",
    "max_nodes",
    "min_nodes",
    "efa",
    "capacity_reservation_id",
    "capacity_block_id",
    "capacity_reservation_group_arn",
    "capacity_reservation_fallback",
    "placement_group",
    "root_volume_gib",
)
_RESERVATION = re.compile(r"^cr-([0-9a-f]{8}|[0-9a-f]{17})$")
# botocore's resource-groups GroupArn pattern, with the region and account captured.
_GROUP_ARN = re.compile(
    r"^arn:aws(-[a-z]+)*:resource-groups:(?P<region>[a-z]{2}(-[a-z]+)+-\d):(?P<account>\d{12}):"
    r"group/([a-zA-Z0-9_.-]{1,300}|[a-zA-Z0-9_.-]{1,150}/[a-z0-9]{26})$"
)


def is_group_arn(target: str | None) -> bool:
    """A capacity target that names a Capacity Reservation group, not one reservation.

    ``capacity_block_id`` may be one: a group may hold Capacity Blocks ("A group supports all
    reservation types, including On-Demand Capacity Reservations, interruptible Capacity
    Reservations, and Capacity Blocks for ML", EC2 user guide, cr-groups.html).
    """
    return target is not None and target.startswith("arn:")


_PLACEMENT_GROUP = re.compile(r"^[\x21-\x7e]{1,255}$")  # EC2: up to 255 ASCII characters
# A Capacity Block holds at most 64 instances (EC2 DescribeCapacityBlockOfferings, InstanceCount),
# and Capacity Blocks at most 256 together: "The total number of instances that can be reserved
# in Capacity Blocks across all accounts in your AWS Organization can't exceed 256 instances on
# a particular date" (EC2 user guide, ec2-capacity-blocks.html). A group of blocks is capped by
# the latter.
CAPACITY_BLOCK_MAX_INSTANCES = 64
CAPACITY_BLOCKS_MAX_INSTANCES = 256
# The queues' fair share: share identifiers "limited to 255 alphanumeric characters, and can be
# followed by an asterisk (*)" (Batch API, ShareAttributes.shareIdentifier).
_SHARE_IDENTIFIER = re.compile(r"^[A-Za-z0-9]{1,255}\*?$")
MAX_SHARE_IDENTIFIERS = 500  # "no more than 500 share identifiers active in a job queue"
_WEIGHT_FACTOR = (0.0001, 999.9999)  # ShareAttributes.weightFactor: smallest and largest
_SHARE_DECAY_SECONDS = (0, 604800)  # FairsharePolicy.shareDecaySeconds (0: the 600 s minimum)
_COMPUTE_RESERVATION = (0, 99)  # FairsharePolicy.computeReservation


@dataclass(frozen=True)
class PoolConfig:
    """One compute pool of ``pools``: its own launch template, compute environment and queue.

    The keys mean what the top-level keys of the same names mean for the default pool; ``efa``
    unset is on where the type has EFA and the pool is not Spot. ``spot`` pools run single-node
    work only: "Multi-node parallel jobs aren't supported on Spot Instances" (Batch API,
    ComputeResource.type; Batch user guide, mnp-ce.html). ``fallback`` names a pool of the same
    instance type whose compute environment follows this pool's in its queue.
    """

    instance_type: str = ""
    max_nodes: int = 4
    min_nodes: int = 0
    efa: bool | None = None
    capacity_reservation_id: str | None = None
    capacity_block_id: str | None = None
    capacity_reservation_group_arn: str | None = None
    capacity_reservation_fallback: bool = False
    placement_group: str = "auto"
    root_volume_gib: int = 200
    spot: bool = False
    fallback: str | None = None


@dataclass(frozen=True)
class Pool:
    """A pool as the stack builds it: its name, settings (EFA resolved) and whether it is the
    default pool, whose resources keep the logical ids of the single-pool stacks."""

    name: str
    settings: PoolConfig
    default: bool

    @property
    def instance(self) -> catalog.InstanceType:
        found = catalog.lookup(self.settings.instance_type)
        assert found is not None  # checked in validate_pools()
        return found

    @property
    def efa(self) -> bool:
        return bool(self.settings.efa)

    @property
    def efa_interfaces(self) -> int:
        return self.instance.efa_interfaces if self.efa else 0

    @property
    def spot(self) -> bool:
        return self.settings.spot

    @property
    def fallback(self) -> str | None:
        return self.settings.fallback


def all_pools(default: Pool, others: Mapping[str, PoolConfig]) -> tuple[Pool, ...]:
    """``default``, then ``others`` by name, each with EFA resolved: unset is on where the
    type has EFA and the pool is not Spot."""
    found = [default]
    for name, settings in sorted(others.items()):
        if settings.efa is None:
            it = catalog.lookup(settings.instance_type)
            efa = bool(it and it.efa_capable) and not settings.spot
            settings = dataclasses.replace(settings, efa=efa)
        found.append(Pool(name, settings, False))
    return tuple(found)


def validate_pools(pools: tuple[Pool, ...], *, region: str, account: str) -> None:
    """Every pool (``all_pools``): its name, its own settings, and its fallback.

    ``region`` and ``account`` are the cluster's: a reservation group must be in them.
    """
    (default,) = [p for p in pools if p.default]
    names = [p.name for p in pools]
    for name in names:
        check(
            _POOL_NAME,
            "default_pool" if name == default.name else "pools",
            name,
            "pool names of 1-24 lower-case letters, digits and hyphens, starting with a letter",
        )
    if names.count(default.name) > 1:
        raise ConfigError(
            f"pools.{default.name}: the top-level keys (instance_type, max_nodes, ...) "
            "describe the default pool; name the other pools differently"
        )
    for pool in pools:
        at = "" if pool.default else f"pools.{pool.name}."
        _validate_pool(pool, at, region=region, account=account)
    by_name = {p.name: p for p in pools}
    # "You can associate up to three compute environments with a job queue" (Batch API,
    # CreateJobQueue.computeEnvironmentOrder): a pool's own and its fallback's stay well inside.
    for pool in pools:
        at = "" if pool.default else f"pools.{pool.name}."
        if pool.fallback is None:
            continue
        other = by_name.get(pool.fallback)
        # A pool naming itself is refused below, as a fallback that has a fallback of its own.
        if other is None:
            raise ConfigError(
                f"{at}fallback: {pool.fallback!r} is not another pool; allowed: "
                + ", ".join(n for n in names if n != pool.name)
            )
        if other.settings.instance_type != pool.settings.instance_type:
            raise ConfigError(
                f"{at}fallback: pool {other.name} has {other.settings.instance_type}, not "
                f"{pool.settings.instance_type}; a queue's multi-node jobs are sized for one "
                "instance type (Batch: all node groups use the same instance type)"
            )
        if other.spot and not pool.spot:
            raise ConfigError(
                f"{at}fallback: pool {other.name} is Spot, and multi-node parallel jobs "
                "aren't supported on Spot Instances (Batch API, ComputeResource.type)"
            )
        if other.efa != pool.efa:
            raise ConfigError(
                f"{at}fallback: pool {other.name} has EFA {'on' if other.efa else 'off'}, "
                f"this pool {'on' if pool.efa else 'off'}; a job's devices must exist on "
                "both"
            )
        if other.fallback is not None:
            raise ConfigError(
                f"{at}fallback: pool {other.name} has a fallback of its own; one step only "
                "(a queue takes at most three compute environments, CreateJobQueue)"
            )


def _validate_pool(pool: Pool, at: str, *, region: str, account: str) -> None:
    """The pool's own settings; ``at`` names it in the keys (``pools.NAME.``, or nothing for
    the default pool, whose settings are the top-level keys)."""
    s = pool.settings
    it = catalog.lookup(s.instance_type)
    if s.instance_type in catalog.UNSUPPORTED:
        raise ConfigError(
            f"{at}instance_type: {s.instance_type} is not supported: "
            f"{catalog.UNSUPPORTED[s.instance_type]}; supported: {catalog.known_names()}"
        )
    if it is None:
        raise ConfigError(
            f"{at}instance_type: unknown type {s.instance_type!r}; allowed: {catalog.known_names()}"
        )
    if pool.efa and not it.efa_capable:
        capable = ", ".join(n for n, t in sorted(catalog.CATALOG.items()) if t.efa_capable)
        raise ConfigError(
            f"{at}instance_type: {s.instance_type} has no EFA; set {at}efa=false or use "
            f"one of: {capable}"
        )
    if s.max_nodes < 1:
        raise ConfigError(f"{at}max_nodes: {s.max_nodes} is below one instance; allowed: >= 1")
    if not 0 <= s.min_nodes <= s.max_nodes:
        raise ConfigError(
            f"{at}min_nodes: {s.min_nodes}; allowed: 0-{s.max_nodes} (0 to max_nodes)"
        )
    if not 30 <= s.root_volume_gib <= 16384:
        raise ConfigError(f"{at}root_volume_gib: {s.root_volume_gib}; allowed: 30-16384")
    _validate_capacity(s, it, at, region=region, account=account)
    if pool.spot:
        why = (
            "a Spot pool runs single-node jobs only: multi-node parallel jobs aren't "
            "supported on Spot Instances (Batch API, ComputeResource.type; Batch user guide, "
            "mnp-ce.html)"
        )
        if pool.efa:
            raise ConfigError(f"{at}efa: true with spot; {why}, and EFA serves those")
        reserved = [
            k
            for k in (
                "capacity_reservation_id",
                "capacity_block_id",
                "capacity_reservation_group_arn",
            )
            if getattr(s, k) is not None
        ]
        if reserved:
            raise ConfigError(
                f"{at}{reserved[0]}: with spot; Spot Instances do not launch into "
                "Capacity Reservations or Capacity Blocks"
            )
        if s.placement_group not in ("auto", "none"):
            raise ConfigError(
                f"{at}placement_group: {s.placement_group!r} with spot; {why}, and a "
                "cluster placement group serves those: use auto or none"
            )


def _validate_capacity(
    s: PoolConfig, it: catalog.InstanceType, at: str, *, region: str, account: str
) -> None:
    """Where the pool's nodes launch: at most one capacity target, and its placement."""
    targets = {
        "capacity_reservation_id": s.capacity_reservation_id,
        "capacity_block_id": s.capacity_block_id,
        "capacity_reservation_group_arn": s.capacity_reservation_group_arn,
    }
    given = [k for k, v in targets.items() if v is not None]
    if len(given) > 1:
        hint = (
            "; a group of Capacity Blocks is capacity_block_id=GROUP-ARN"
            if "capacity_block_id" in given and "capacity_reservation_group_arn" in given
            else ""
        )
        raise ConfigError(
            f"{at}{'/'.join(given)}: give at most one; a launch targets one Capacity "
            f"Reservation, one Capacity Block or one Capacity Reservation group{hint}"
        )
    block_group = is_group_arn(s.capacity_block_id)
    for key, what in (
        ("capacity_reservation_id", "the Capacity Reservation's id"),
        (
            "capacity_block_id",
            "the Capacity Block's Capacity Reservation id, or the ARN of "
            "a Capacity Reservation group of Capacity Blocks",
        ),
    ):
        if targets[key] is not None and not (key == "capacity_block_id" and block_group):
            check(
                _RESERVATION,
                at + key,
                targets[key],
                f"cr- followed by 8 or 17 hex digits ({what})",
            )
    if s.capacity_block_id is not None:
        if not it.capacity_blocks:
            offered = ", ".join(n for n, t in sorted(catalog.CATALOG.items()) if t.capacity_blocks)
            raise ConfigError(
                f"{at}capacity_block_id: EC2 offers no Capacity Blocks for "
                f"{s.instance_type}; "
                f"{at}instance_type must be one of: {offered}"
            )
        # A group's nodes may span its blocks, up to what Capacity Blocks hold at all.
        most, holds = (
            (CAPACITY_BLOCKS_MAX_INSTANCES, "Capacity Blocks hold together")
            if block_group
            else (CAPACITY_BLOCK_MAX_INSTANCES, "a Capacity Block holds")
        )
        if s.max_nodes > most:
            raise ConfigError(
                f"{at}max_nodes: {s.max_nodes} is more than {holds}; allowed with "
                f"capacity_block_id: 1-{most}"
            )
        if s.capacity_reservation_fallback:
            # "If no matching capacity is available, the instances fail to launch" (EC2 user
            # guide, cr-groups-launch.html, Capacity Blocks in a group).
            raise ConfigError(
                f"{at}capacity_reservation_fallback: Capacity Blocks never fall back to "
                "On-Demand, in a group or not; use a fallback pool, or leave it false"
            )
    if s.capacity_reservation_fallback and s.capacity_reservation_group_arn is None:
        raise ConfigError(
            f"{at}capacity_reservation_fallback: only a Capacity Reservation group falls "
            "back to On-Demand; a targeted reservation's launch fails when it is full (EC2 "
            "user guide); set capacity_reservation_group_arn, or leave it false"
        )
    if s.placement_group not in ("auto", "none"):
        check(
            _PLACEMENT_GROUP,
            at + "placement_group",
            s.placement_group,
            "auto, none, or an existing cluster placement group's name (1-255 characters)",
        )
        # A group of blocks too: "You can't specify a placement group when launching into
        # Capacity Blocks in a Capacity Reservation Resource Group" (cr-groups-launch.html).
        if s.capacity_block_id is not None:
            raise ConfigError(
                f"{at}placement_group: {s.placement_group!r} with capacity_block_id; a "
                "Capacity Block places its instances itself: use auto or none"
            )
    if s.capacity_reservation_group_arn is not None:
        _validate_group_arn(
            at + "capacity_reservation_group_arn",
            s.capacity_reservation_group_arn,
            region=region,
            account=account,
        )
    elif s.capacity_block_id is not None and block_group:
        _validate_group_arn(
            at + "capacity_block_id", s.capacity_block_id, region=region, account=account
        )


def _validate_group_arn(key: str, arn: str, *, region: str, account: str) -> None:
    check(_GROUP_ARN, key, arn, "arn:aws[-PARTITION]:resource-groups:REGION:ACCOUNT:group/NAME")
    found = _GROUP_ARN.match(arn)
    assert found is not None
    if (found["region"], found["account"]) != (region, account):
        raise ConfigError(
            f"{key}: {arn!r} is in {found['region']} of account {found['account']}; the "
            f"group must be in the cluster's region {region} and account {account}"
        )


def validate_fair_share(
    *,
    fair_share: bool,
    share_weights: Mapping[str, float],
    share_decay_seconds: int,
    compute_reservation: int,
) -> None:
    """The fair-share settings (Batch API, FairsharePolicy), given only with fair_share on."""
    low, high = _SHARE_DECAY_SECONDS
    if not low <= share_decay_seconds <= high:
        raise ConfigError(
            f"share_decay_seconds: {share_decay_seconds}; allowed: {low}-{high} (AWS "
            "Batch FairsharePolicy.shareDecaySeconds; 0 is the 600 s minimum)"
        )
    low, high = _COMPUTE_RESERVATION
    if not low <= compute_reservation <= high:
        raise ConfigError(
            f"compute_reservation: {compute_reservation}; allowed: {low}-{high} (AWS "
            "Batch FairsharePolicy.computeReservation, a percentage)"
        )
    if len(share_weights) > MAX_SHARE_IDENTIFIERS:
        raise ConfigError(
            f"share_weights: {len(share_weights)} share identifiers; a queue has at "
            f"most {MAX_SHARE_IDENTIFIERS} (CreateJobQueue.schedulingPolicyArn)"
        )
    for team, weight in share_weights.items():
        check(
            _SHARE_IDENTIFIER,
            "share_weights",
            team,
            "share identifiers of 1-255 letters and digits, optionally ending in * (a "
            "prefix), as keys",
        )
        low_w, high_w = _WEIGHT_FACTOR
        if not low_w <= weight <= high_w:
            raise ConfigError(
                f"share_weights: {team}={weight}; allowed weights: {low_w}-{high_w} (AWS "
                "Batch ShareAttributes.weightFactor; lower gets more)"
            )
    prefixes = [t[:-1] for t in share_weights if t.endswith("*")]
    for prefix in prefixes:
        for team in share_weights:
            if team != prefix + "*" and team.startswith(prefix):
                raise ConfigError(
                    f"share_weights: {team} overlaps {prefix}*; the identifiers of a "
                    "fair-share policy can't overlap (ShareAttributes.shareIdentifier)"
                )
    defaults = {"share_weights": {}, "share_decay_seconds": 3600, "compute_reservation": 0}
    given = {
        "share_weights": share_weights,
        "share_decay_seconds": share_decay_seconds,
        "compute_reservation": compute_reservation,
    }
    changed = [k for k, v in defaults.items() if given[k] != v]
    if changed and not fair_share:
        raise ConfigError(
            f"{changed[0]}: a fair-share setting; set fair_share=true (or leave it out)"
        )
