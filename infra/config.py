"""The cluster's configuration: one frozen dataclass, validated before any construct exists.

It is read once, at the app's top (``infra/app.py``), from the ``environments`` object in
``cdk.json`` context, the ``-c env=NAME`` selector and ``-c key=value`` overrides. Constructs
receive it as a typed value and never read context themselves. Every error names the key and
what is allowed, in one line.
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import json
import re
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from infra import pull_through
from infra.lustre import FsxLustre, LustreError
from launcher.stack import buckets, catalog, secrets
from launcher.stack.outputs import DEFAULT_STACK_NAME, Egress

DEFAULT_ENVIRONMENT = "demo"
CLUSTER_TAG = "efa-batch:cluster"  # on every resource: the stack's name, fixed for its life

_ACCOUNT = re.compile(r"^\d{12}$")
_REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d$")
_AZ = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d[a-z]$")
_VPC = re.compile(r"^vpc-([0-9a-f]{8}|[0-9a-f]{17})$")
_SUBNET = re.compile(r"^subnet-([0-9a-f]{8}|[0-9a-f]{17})$")
_SECURITY_GROUP = re.compile(r"^sg-([0-9a-f]{8}|[0-9a-f]{17})$")
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


_REPOSITORY_ARN = re.compile(
    r"^arn:aws(-[a-z]+)*:ecr:[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d:\d{12}:repository/[a-z0-9._/*-]+$"
)
# An IAM managed policy's ARN: the account's own or AWS's ("aws" in place of the account).
_POLICY_ARN = re.compile(r"^arn:aws(-[a-z]+)*:iam::(\d{12}|aws):policy/[\w+=,.@/-]{1,1024}$")
# "Managed policies attached to an IAM role: 10" by default, adjustable to 20 (IAM user guide,
# reference_iam-quotas.html).
MAX_MANAGED_POLICIES_PER_ROLE = 20
_PLACEMENT_GROUP = re.compile(r"^[\x21-\x7e]{1,255}$")  # EC2: up to 255 ASCII characters
_STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,100}$")
_REMOVAL_POLICIES = ("retain", "destroy")
# The workspace repository's encryption: ECR's default (AES256, S3-managed keys) or KMS with
# the AWS managed key aws/ecr. ECR mounts a blob only between repositories with "identical
# encryption type and keys" (ECR user guide, blob-mounting.html).
_REPOSITORY_ENCRYPTIONS = ("aes256", "kms")
# A complete Secrets Manager secret ARN (the name ends in the six characters Secrets Manager
# appends): IAM matches the execution role's GetSecretValue grant against the full ARN.
_SECRET_ARN = re.compile(
    r"^arn:aws(-[a-z]+)*:secretsmanager:[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d:\d{12}:"
    r"secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$"
)
# A registry host as image references name it (HOST[:PORT], lower case).
_REGISTRY_HOST = re.compile(
    r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+(:\d{1,5})?$"
)
_DOCKER_HUB_ALIASES = ("docker.io", "index.docker.io")
# A Capacity Block holds at most 64 instances (EC2 DescribeCapacityBlockOfferings, InstanceCount),
# and Capacity Blocks at most 256 together: "The total number of instances that can be reserved
# in Capacity Blocks across all accounts in your AWS Organization can't exceed 256 instances on
# a particular date" (EC2 user guide, ec2-capacity-blocks.html). A group of blocks is capped by
# the latter.
CAPACITY_BLOCK_MAX_INSTANCES = 64
CAPACITY_BLOCKS_MAX_INSTANCES = 256
# Batch runs a queue's jobStateTimeLimitActions after maxTimeSeconds, 600-86400 (10 min-24 h).
_TIME_LIMIT_MINUTES = (10, 1440)
# CloudWatch Logs accepts only these retention periods (PutRetentionPolicy).
_LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)


class ConfigError(ValueError):
    """A configuration value is wrong; the message is one line naming the key."""


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
# "You can associate up to three compute environments with a job queue" (Batch API,
# CreateJobQueue.computeEnvironmentOrder): a pool's own and its fallback's stay well inside.
# Fair share: share identifiers "limited to 255 alphanumeric characters, and can be followed by
# an asterisk (*)" (Batch API, ShareAttributes.shareIdentifier).
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
        assert found is not None  # checked in validate()
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


@dataclass(frozen=True)
class ClusterConfig:
    env_name: str
    account: str
    region: str
    availability_zone: str
    instance_type: str = "p4d.24xlarge"
    max_nodes: int = 4
    efa: bool = True
    stack_name: str = DEFAULT_STACK_NAME
    vpc_id: str | None = None
    subnet_id: str | None = None
    # The imported VPC's default security group: multi-node jobs' task interfaces are in it.
    default_security_group_id: str | None = None
    vpc_cidr: str = "10.42.0.0/16"
    nat_gateway: bool = False
    # Where the new VPC's public subnet (NAT) sits: after the cluster subnet, so turning NAT on
    # or off later never moves the cluster subnet. Stacks first deployed with NAT by 0.1.0 have
    # it first; they set this to keep their subnets where they are (infra/updates.py).
    public_subnet_first: bool = False
    # Where nodes launch: at most one of an On-Demand Capacity Reservation, an EC2 Capacity
    # Block for ML (also a cr- id, or the ARN of a Capacity Reservation group of Capacity
    # Blocks; the launch template then uses the capacity-block market) or a Capacity
    # Reservation group (an AWS Resource Groups ARN). None: On-Demand, open ODCRs.
    capacity_reservation_id: str | None = None
    capacity_block_id: str | None = None
    capacity_reservation_group_arn: str | None = None
    # A reservation group target launches On-Demand when the group is full, unless the launch
    # asks for reservations only (EC2 user guide, cr-groups-launch). Off: nodes wait instead.
    capacity_reservation_fallback: bool = False
    # The cluster placement group: "auto" (the stack's own; none in a Capacity Block), "none",
    # or the name of an existing cluster placement group, such as the one an On-Demand
    # Capacity Reservation was created in (its instances must launch into that group).
    placement_group: str = "auto"
    # Nodes the compute environment keeps running while idle (MinvCpus = min_nodes x vCPUs).
    min_nodes: int = 0
    # The job queue cancels a job that waits at its head (RUNNABLE) this long, in minutes, for
    # EC2 capacity, or for a cluster that can never run it (0: never).
    capacity_wait_minutes: int = 240
    misconfigured_wait_minutes: int = 10
    root_volume_gib: int = 200
    removal_policy: str = "retain"
    # Days the repository keeps each kind of image after its push (ECR lifecycle policy by
    # age: how many images a team builds in a day never decides what a queued job loses).
    workspace_image_days: int = 30
    base_image_days: int = 90
    # Other images pushed into the repository by hand: the newest this many.
    keep_images: int = 50
    log_retention_days: int = 30
    fair_share: bool = False
    # How long an infrastructure update of the compute environment lets running jobs go on
    # before it replaces their nodes (Batch UpdatePolicy.jobExecutionTimeoutMinutes, 1-7200).
    update_timeout_minutes: int = 1440
    extra_pull_repository_arns: tuple[str, ...] = ()
    # Tags on every resource that updates its tags in place, and on the nodes (EC2 instances)
    # through the compute environment; a change never replaces anything.
    tags: Mapping[str, str] = field(default_factory=dict)
    # Tags on the resources whose tags AWS fixes at creation (the compute environments and the
    # placement group): changing them replaces those resources and ends their running jobs.
    creation_tags: Mapping[str, str] = field(default_factory=dict)
    # The workspace repository's encryption: aes256 (ECR's default, what ordinary repositories
    # use, so their bases mount) or kms (the AWS managed key aws/ecr).
    repository_encryption: str = "aes256"
    # ECR pull-through cache rules: NAME or NAME=SECRET_ARN entries (infra/pull_through.py);
    # None: the default rules; "none": no rule.
    pull_through_cache: tuple[str, ...] | None = None
    # Registry host -> Secrets Manager secret (JSON keys username, accessToken) copy jobs may
    # read to pull from that registry directly. Needs a route out: NAT or an imported VPC.
    registry_secrets: Mapping[str, str] = field(default_factory=dict)
    # Most vCPUs the copy jobs' Fargate compute environment runs at once (1 per copy job).
    copy_max_vcpus: int = 16
    # S3 locations jobs read (BUCKET[/PREFIX][:ro|:rw], read-only unless :rw): the job role
    # gets exactly these (infra/data_access.py).
    data_buckets: tuple[str, ...] = ()
    # Managed policies attached to the job role: whatever else a team's jobs need.
    job_role_policies: tuple[str, ...] = ()
    # Secrets jobs may read (--secret): Secrets Manager name prefixes, ssm:PARAMETER_PREFIX,
    # or complete ARNs; the execution role may read those alone.
    job_secrets: tuple[str, ...] = ()
    # FSx for Lustre on every node (infra/lustre.py); None: none.
    fsx_lustre: FsxLustre | None = None
    # Privileged containers (--privileged): off, and the nodes' ECS agent refuses them.
    allow_privileged: bool = False
    # ECS Exec into running jobs (launcher exec): off, since anyone allowed ecs:ExecuteCommand
    # in the account then gets a root shell in the job's container, with the job role's rights.
    ecs_exec: bool = False
    # Drain and terminate the instance of a node that ended with the bad-host or lost-node
    # exit code, so the job's retry lands elsewhere (infra/node_replacer.py).
    replace_bad_nodes: bool = True
    # The pool the top-level keys (instance_type, max_nodes, efa, capacity_*, ...) describe,
    # where jobs go when none is named; its resources keep the single-pool stacks' ids.
    default_pool: str = "default"
    # A pool of `pools` whose compute environment follows the default pool's in its queue.
    fallback: str | None = None
    # More pools: name -> PoolConfig, each its own launch template, compute environment, queue.
    pools: Mapping[str, PoolConfig] = field(default_factory=dict)
    # Fair share (with fair_share=true): share identifier (or PREFIX*) -> weight factor (lower
    # gets more), the decay window of past usage, the vCPUs kept for idle identifiers (Batch
    # API, FairsharePolicy).
    share_weights: Mapping[str, float] = field(default_factory=dict)
    share_decay_seconds: int = 3600
    compute_reservation: int = 0

    @property
    def instance(self) -> catalog.InstanceType:
        found = catalog.lookup(self.instance_type)
        assert found is not None  # checked in validate()
        return found

    @property
    def efa_interfaces(self) -> int:
        return self.instance.efa_interfaces if self.efa else 0

    @property
    def imports_vpc(self) -> bool:
        return self.vpc_id is not None

    @property
    def internet_egress(self) -> Egress:
        """How tasks reach registries outside AWS: through NAT, an imported VPC's own way (the
        stack cannot tell), or none (VPC endpoints only)."""
        if self.imports_vpc:
            return Egress.IMPORTED
        return Egress.NAT if self.nat_gateway else Egress.NONE

    @property
    def pull_through_rules(self) -> tuple[pull_through.Rule, ...]:
        entries = self.pull_through_cache
        if entries is None:
            entries = pull_through.DEFAULT_RULES
        if tuple(entries) in ((), ("none",)):
            return ()
        return pull_through.parse(tuple(entries), self.region)

    @property
    def data_locations(self) -> tuple[buckets.DataBucket, ...]:
        """The data buckets, and the FSx file system's linked location (read and write)."""
        configured = buckets.parse_all(self.data_buckets)
        linked = self.fsx_lustre.repository if self.fsx_lustre else None
        if linked is None or any(b.covers(linked) for b in configured):
            return configured
        return (*configured, linked)

    @property
    def secret_grants(self) -> tuple[secrets.SecretGrant, ...]:
        return secrets.parse_grants(self.job_secrets)

    @property
    def pool_list(self) -> tuple[Pool, ...]:
        """Every pool, the default one first."""
        top = PoolConfig(
            **{k: getattr(self, k) for k in POOL_SETTINGS},
            fallback=self.fallback,
        )
        found = [Pool(self.default_pool, top, True)]
        for name, settings in sorted(self.pools.items()):
            if settings.efa is None:
                it = catalog.lookup(settings.instance_type)
                efa = bool(it and it.efa_capable) and not settings.spot
                settings = dataclasses.replace(settings, efa=efa)
            found.append(Pool(name, settings, False))
        return tuple(found)

    def pool(self, name: str) -> Pool:
        (found,) = [p for p in self.pool_list if p.name == name]
        return found

    def for_pool(self, pool: Pool) -> ClusterConfig:
        """This configuration with the pool's settings in the top-level keys: what the
        single-pool code (launch template, capacity, placement group) reads."""
        values = {k: getattr(pool.settings, k) for k in POOL_SETTINGS}
        values["efa"] = pool.efa
        return dataclasses.replace(self, **values, fallback=pool.fallback, pools={})

    @property
    def min_vcpus(self) -> int:
        return self.min_nodes * self.instance.vcpus

    @property
    def max_vcpus(self) -> int:
        return self.max_nodes * self.instance.vcpus

    def validate(self) -> ClusterConfig:
        _check(_ACCOUNT, "account", self.account, "12 digits")
        _check(_REGION, "region", self.region, "a region name such as us-east-1")
        _check(_AZ, "availability_zone", self.availability_zone, "a zone such as us-east-1a")
        if not self.availability_zone.startswith(self.region):
            raise ConfigError(
                f"availability_zone: {self.availability_zone!r} is not in region {self.region!r}"
            )
        _check(_STACK_NAME, "stack_name", self.stack_name, "letters, digits and hyphens")
        _check_vpc_cidr(self.vpc_cidr)
        self._validate_pools()
        imported = (self.vpc_id, self.subnet_id, self.default_security_group_id)
        if any(v is not None for v in imported) and not all(v is not None for v in imported):
            raise ConfigError(
                "vpc_id/subnet_id/default_security_group_id: give all three to import a VPC "
                "(jobs' task interfaces use the VPC's default security group), or none"
            )
        if self.vpc_id is not None:
            _check(_VPC, "vpc_id", self.vpc_id, "vpc- followed by 8 or 17 hex digits")
            _check(_SUBNET, "subnet_id", self.subnet_id, "subnet- followed by 8 or 17 hex digits")
            _check(
                _SECURITY_GROUP,
                "default_security_group_id",
                self.default_security_group_id,
                "sg- followed by 8 or 17 hex digits (the VPC's group named 'default')",
            )
        for key in ("capacity_wait_minutes", "misconfigured_wait_minutes"):
            minutes = getattr(self, key)
            low, high = _TIME_LIMIT_MINUTES
            if minutes != 0 and not low <= minutes <= high:
                raise ConfigError(
                    f"{key}: {minutes}; allowed: 0 (never cancel) or {low}-{high} (AWS Batch "
                    "jobStateTimeLimitActions maxTimeSeconds: 600-86400)"
                )
        for arn in self.extra_pull_repository_arns:
            _check(
                _REPOSITORY_ARN,
                "extra_pull_repository_arns",
                arn,
                "ECR repository ARNs (arn:aws:ecr:REGION:ACCOUNT:repository/NAME), comma-separated",
            )
        if self.removal_policy not in _REMOVAL_POLICIES:
            raise ConfigError(
                f"removal_policy: {self.removal_policy!r}; allowed: {', '.join(_REMOVAL_POLICIES)}"
            )
        if not 1 <= self.update_timeout_minutes <= 7200:
            raise ConfigError(
                f"update_timeout_minutes: {self.update_timeout_minutes}; allowed: 1-7200 "
                "(AWS Batch UpdatePolicy.jobExecutionTimeoutMinutes)"
            )
        self._validate_registries()
        self._validate_data()
        for key in ("tags", "creation_tags"):
            _check_tags(key, getattr(self, key))
        if not 1 <= self.keep_images <= 10000:
            raise ConfigError(f"keep_images: {self.keep_images}; allowed: 1-10000")
        for key in ("workspace_image_days", "base_image_days"):
            if not 1 <= getattr(self, key) <= 3650:
                raise ConfigError(f"{key}: {getattr(self, key)}; allowed: 1-3650 (days)")
        if self.log_retention_days not in _LOG_RETENTION_DAYS:
            raise ConfigError(
                f"log_retention_days: {self.log_retention_days}; allowed: "
                + ", ".join(map(str, _LOG_RETENTION_DAYS))
            )
        return self

    def _validate_registries(self) -> None:
        if self.repository_encryption not in _REPOSITORY_ENCRYPTIONS:
            raise ConfigError(
                f"repository_encryption: {self.repository_encryption!r}; allowed: "
                + ", ".join(_REPOSITORY_ENCRYPTIONS)
            )
        try:
            _ = self.pull_through_rules
        except pull_through.RuleError as exc:
            raise ConfigError(f"pull_through_cache: {exc}") from None
        for host, arn in self.registry_secrets.items():
            if host in _DOCKER_HUB_ALIASES:
                raise ConfigError(
                    f"registry_secrets: {host!r}: name Docker Hub registry-1.docker.io, the host "
                    "images are pulled from"
                )
            _check(_REGISTRY_HOST, "registry_secrets", host, "registry hosts (HOST[:PORT]) as keys")
            _check(
                _SECRET_ARN,
                "registry_secrets",
                arn,
                "complete Secrets Manager secret ARNs (arn:aws:secretsmanager:REGION:ACCOUNT:"
                "secret:NAME-XXXXXX) as values",
            )
        if self.registry_secrets and self.internet_egress is Egress.NONE:
            raise ConfigError(
                "registry_secrets: copy jobs reach registries outside AWS only through a NAT "
                "gateway; set nat_gateway=true (or import a VPC with a route out), or leave "
                "registry_secrets empty"
            )
        if self.copy_max_vcpus < 1:
            raise ConfigError(
                f"copy_max_vcpus: {self.copy_max_vcpus}; allowed: >= 1 (a copy job takes 1 vCPU; "
                "the account's Fargate vCPU quota caps what runs at once)"
            )

    def _validate_data(self) -> None:
        if self.fsx_lustre is not None:  # first: its link joins data_locations below
            try:
                self.fsx_lustre.validate()
            except LustreError as exc:
                raise ConfigError(f"fsx_lustre.{exc}") from None
        try:
            _ = self.data_locations
        except buckets.BucketError as exc:
            raise ConfigError(f"data_buckets: {exc}") from None
        if len(self.job_role_policies) > MAX_MANAGED_POLICIES_PER_ROLE:
            raise ConfigError(
                f"job_role_policies: {len(self.job_role_policies)} policies; IAM attaches at "
                f"most {MAX_MANAGED_POLICIES_PER_ROLE} managed policies to a role (IAM quotas)"
            )
        for arn in self.job_role_policies:
            _check(
                _POLICY_ARN,
                "job_role_policies",
                arn,
                "managed policy ARNs (arn:aws:iam::ACCOUNT:policy/NAME or "
                "arn:aws:iam::aws:policy/NAME)",
            )
        try:
            grants = self.secret_grants
        except secrets.SecretError as exc:
            raise ConfigError(f"job_secrets: {exc}") from None
        elsewhere = [str(g) for g in grants if g.region(self._place) != self.region]
        if elsewhere and self.internet_egress is Egress.NONE:
            raise ConfigError(
                f"job_secrets: {elsewhere[0]} is in another Region; the VPC's endpoints reach "
                f"{self.region} only: set nat_gateway=true, or copy the secret to {self.region}"
            )

    @property
    def _place(self) -> secrets.Place:
        return secrets.Place("aws", self.region, self.account)

    def _validate_pools(self) -> None:
        names = [p.name for p in self.pool_list]
        for name in names:
            _check(
                _POOL_NAME,
                "default_pool" if name == self.default_pool else "pools",
                name,
                "pool names of 1-24 lower-case letters, digits and hyphens, starting with a letter",
            )
        if self.default_pool in self.pools:
            raise ConfigError(
                f"pools.{self.default_pool}: the top-level keys (instance_type, max_nodes, ...) "
                "describe the default pool; name the other pools differently"
            )
        for pool in self.pool_list:
            at = "" if pool.default else f"pools.{pool.name}."
            self.for_pool(pool)._validate_pool(pool, at)
        by_name = {p.name: p for p in self.pool_list}
        for pool in self.pool_list:
            at = "" if pool.default else f"pools.{pool.name}."
            if pool.fallback is None:
                continue
            other = by_name.get(pool.fallback)
            if other is None or other is pool:
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
        self._validate_fair_share()

    def _validate_pool(self, pool: Pool, at: str) -> None:
        """The pool's own settings, on this configuration as its view (for_pool)."""
        it = catalog.lookup(self.instance_type)
        if self.instance_type in catalog.UNSUPPORTED:
            raise ConfigError(
                f"{at}instance_type: {self.instance_type} is not supported: "
                f"{catalog.UNSUPPORTED[self.instance_type]}; supported: {catalog.known_names()}"
            )
        if it is None:
            raise ConfigError(
                f"{at}instance_type: unknown type {self.instance_type!r}; "
                f"allowed: {catalog.known_names()}"
            )
        if self.efa and not it.efa_capable:
            capable = ", ".join(n for n, t in sorted(catalog.CATALOG.items()) if t.efa_capable)
            raise ConfigError(
                f"{at}instance_type: {self.instance_type} has no EFA; set {at}efa=false or use "
                f"one of: {capable}"
            )
        if self.max_nodes < 1:
            raise ConfigError(
                f"{at}max_nodes: {self.max_nodes} is below one instance; allowed: >= 1"
            )
        if not 0 <= self.min_nodes <= self.max_nodes:
            raise ConfigError(
                f"{at}min_nodes: {self.min_nodes}; allowed: 0-{self.max_nodes} (0 to max_nodes)"
            )
        if not 30 <= self.root_volume_gib <= 16384:
            raise ConfigError(f"{at}root_volume_gib: {self.root_volume_gib}; allowed: 30-16384")
        self._validate_capacity(it, at)
        if pool.spot:
            why = (
                "a Spot pool runs single-node jobs only: multi-node parallel jobs aren't "
                "supported on Spot Instances (Batch API, ComputeResource.type; Batch user guide, "
                "mnp-ce.html)"
            )
            if self.efa:
                raise ConfigError(f"{at}efa: true with spot; {why}, and EFA serves those")
            reserved = [
                k
                for k in (
                    "capacity_reservation_id",
                    "capacity_block_id",
                    "capacity_reservation_group_arn",
                )
                if getattr(self, k) is not None
            ]
            if reserved:
                raise ConfigError(
                    f"{at}{reserved[0]}: with spot; Spot Instances do not launch into "
                    "Capacity Reservations or Capacity Blocks"
                )
            if self.placement_group not in ("auto", "none"):
                raise ConfigError(
                    f"{at}placement_group: {self.placement_group!r} with spot; {why}, and a "
                    "cluster placement group serves those: use auto or none"
                )

    def _validate_fair_share(self) -> None:
        low, high = _SHARE_DECAY_SECONDS
        if not low <= self.share_decay_seconds <= high:
            raise ConfigError(
                f"share_decay_seconds: {self.share_decay_seconds}; allowed: {low}-{high} (AWS "
                "Batch FairsharePolicy.shareDecaySeconds; 0 is the 600 s minimum)"
            )
        low, high = _COMPUTE_RESERVATION
        if not low <= self.compute_reservation <= high:
            raise ConfigError(
                f"compute_reservation: {self.compute_reservation}; allowed: {low}-{high} (AWS "
                "Batch FairsharePolicy.computeReservation, a percentage)"
            )
        if len(self.share_weights) > MAX_SHARE_IDENTIFIERS:
            raise ConfigError(
                f"share_weights: {len(self.share_weights)} share identifiers; a queue has at "
                f"most {MAX_SHARE_IDENTIFIERS} (CreateJobQueue.schedulingPolicyArn)"
            )
        for team, weight in self.share_weights.items():
            _check(
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
        prefixes = [t[:-1] for t in self.share_weights if t.endswith("*")]
        for prefix in prefixes:
            for team in self.share_weights:
                if team != prefix + "*" and team.startswith(prefix):
                    raise ConfigError(
                        f"share_weights: {team} overlaps {prefix}*; the identifiers of a "
                        "fair-share policy can't overlap (ShareAttributes.shareIdentifier)"
                    )
        defaults = {"share_weights": {}, "share_decay_seconds": 3600, "compute_reservation": 0}
        changed = [k for k, v in defaults.items() if getattr(self, k) != v]
        if changed and not self.fair_share:
            raise ConfigError(
                f"{changed[0]}: a fair-share setting; set fair_share=true (or leave it out)"
            )

    def _validate_capacity(self, it: catalog.InstanceType, at: str) -> None:
        targets = {
            "capacity_reservation_id": self.capacity_reservation_id,
            "capacity_block_id": self.capacity_block_id,
            "capacity_reservation_group_arn": self.capacity_reservation_group_arn,
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
        block_group = is_group_arn(self.capacity_block_id)
        for key, what in (
            ("capacity_reservation_id", "the Capacity Reservation's id"),
            (
                "capacity_block_id",
                "the Capacity Block's Capacity Reservation id, or the ARN of "
                "a Capacity Reservation group of Capacity Blocks",
            ),
        ):
            if targets[key] is not None and not (key == "capacity_block_id" and block_group):
                _check(
                    _RESERVATION,
                    at + key,
                    targets[key],
                    f"cr- followed by 8 or 17 hex digits ({what})",
                )
        if self.capacity_block_id is not None:
            if not it.capacity_blocks:
                offered = ", ".join(
                    n for n, t in sorted(catalog.CATALOG.items()) if t.capacity_blocks
                )
                raise ConfigError(
                    f"{at}capacity_block_id: EC2 offers no Capacity Blocks for "
                    f"{self.instance_type}; "
                    f"{at}instance_type must be one of: {offered}"
                )
            # A group's nodes may span its blocks, up to what Capacity Blocks hold at all.
            most, holds = (
                (CAPACITY_BLOCKS_MAX_INSTANCES, "Capacity Blocks hold together")
                if block_group
                else (CAPACITY_BLOCK_MAX_INSTANCES, "a Capacity Block holds")
            )
            if self.max_nodes > most:
                raise ConfigError(
                    f"{at}max_nodes: {self.max_nodes} is more than {holds}; allowed with "
                    f"capacity_block_id: 1-{most}"
                )
            if self.capacity_reservation_fallback:
                # "If no matching capacity is available, the instances fail to launch" (EC2 user
                # guide, cr-groups-launch.html, Capacity Blocks in a group).
                raise ConfigError(
                    f"{at}capacity_reservation_fallback: Capacity Blocks never fall back to "
                    "On-Demand, in a group or not; use a fallback pool, or leave it false"
                )
        if self.capacity_reservation_fallback and self.capacity_reservation_group_arn is None:
            raise ConfigError(
                f"{at}capacity_reservation_fallback: only a Capacity Reservation group falls "
                "back to On-Demand; a targeted reservation's launch fails when it is full (EC2 "
                "user guide); set capacity_reservation_group_arn, or leave it false"
            )
        if self.placement_group not in ("auto", "none"):
            _check(
                _PLACEMENT_GROUP,
                at + "placement_group",
                self.placement_group,
                "auto, none, or an existing cluster placement group's name (1-255 characters)",
            )
            # A group of blocks too: "You can't specify a placement group when launching into
            # Capacity Blocks in a Capacity Reservation Resource Group" (cr-groups-launch.html).
            if self.capacity_block_id is not None:
                raise ConfigError(
                    f"{at}placement_group: {self.placement_group!r} with capacity_block_id; a "
                    "Capacity Block places its instances itself: use auto or none"
                )
        if self.capacity_reservation_group_arn is not None:
            self._validate_group_arn(
                at + "capacity_reservation_group_arn", self.capacity_reservation_group_arn
            )
        elif self.capacity_block_id is not None and block_group:
            self._validate_group_arn(at + "capacity_block_id", self.capacity_block_id)

    def _validate_group_arn(self, key: str, arn: str) -> None:
        _check(
            _GROUP_ARN, key, arn, "arn:aws[-PARTITION]:resource-groups:REGION:ACCOUNT:group/NAME"
        )
        found = _GROUP_ARN.match(arn)
        assert found is not None
        if (found["region"], found["account"]) != (self.region, self.account):
            raise ConfigError(
                f"{key}: {arn!r} is in {found['region']} of account {found['account']}; the "
                f"group must be in the cluster's region {self.region} and account {self.account}"
            )


# AWS tag limits (Tagging AWS resources, tag naming limits); aws: is reserved, and the stack
# sets efa-batch:cluster itself.
_TAG_KEY = re.compile(r"^[\w.:/=+\-@ ]{1,128}$")
MAX_TAGS = 40  # of the 50 a resource may carry, the rest are CDK's and CloudFormation's own


def _check_tags(key: str, tags: Mapping[str, str]) -> None:
    if len(tags) > MAX_TAGS:
        raise ConfigError(f"{key}: {len(tags)} tags; allowed: at most {MAX_TAGS}")
    for name, value in tags.items():
        if (
            not _TAG_KEY.match(name)
            or name.lower().startswith("aws:")
            or name == CLUSTER_TAG
            or len(value) > 256
        ):
            raise ConfigError(
                f"{key}: {name!r}={value!r}; allowed: keys of 1-128 letters, digits, spaces and "
                f"_.:/=+-@ (not aws:*, not {CLUSTER_TAG}), values of at most 256 characters"
            )


# The new VPC's block: the cluster subnet takes a /18 and the NAT's public subnet a /24 beside
# it (infra/network.py), so a /18 or smaller has no room for NAT; AWS allows "between a /16
# netmask (65,536 IP addresses) and /28 netmask" (VPC user guide, vpc-cidr-blocks.html).
VPC_PREFIXES = (16, 17)


def _check_vpc_cidr(value: str) -> None:
    try:
        network = ipaddress.IPv4Network(value)
    except ValueError:
        network = None
    if network is None or network.prefixlen not in VPC_PREFIXES:
        raise ConfigError(
            f"vpc_cidr: {value!r}; allowed: an IPv4 block of /16 or /17 such as 10.42.0.0/16 "
            "(the cluster subnet takes a /18 of it, the NAT gateway's subnet a /24)"
        )


def _check(pattern: re.Pattern[str], key: str, value: object, allowed: str) -> None:
    if not isinstance(value, str) or not pattern.match(value):
        raise ConfigError(f"{key}: {value!r} is malformed; expected {allowed}")


def _coerce(key: str, value: Any, hint: Any) -> Any:
    """Coerce one value to its field's annotated type.

    ``-c key=value`` on the CDK command line always gives strings; cdk.json gives JSON types.
    The dataclass's own annotations say what each key is, so no key list is kept by hand.
    """
    if value is None:
        return None
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        (hint,) = args  # optional: X | None
        args = list(typing.get_args(hint))
    origin = typing.get_origin(hint) or hint
    if hint is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "1", "yes"):
            return True
        if str(value).lower() in ("false", "0", "no"):
            return False
        raise ConfigError(f"{key}: {value!r} is not a boolean; allowed: true, false")
    if hint is int:
        if isinstance(value, (bool, float)):
            raise ConfigError(f"{key}: {value!r} is not an integer")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: {value!r} is not an integer") from None
    if origin is tuple:
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
            raise ConfigError(f"{key}: expected a list of strings (or one comma-separated string)")
        return tuple(i.strip() for i in items if i.strip())
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _coerce_object(key, value, hint)
    if origin in (Mapping, dict):
        value = _from_json(key, value)
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected an object of strings, got {value!r}")
        item = args[1] if len(args) == 2 else str
        if isinstance(item, type) and dataclasses.is_dataclass(item):
            return {str(k): _coerce_object(f"{key}.{k}", v, item) for k, v in value.items()}
        if item is float:
            return {str(k): _number(f"{key}.{k}", v) for k, v in value.items()}
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, (dict, list)):
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    return str(value)


def _from_json(key: str, value: Any) -> Any:
    """``-c key=value`` gives an object as its JSON text; cdk.json gives the object itself."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise ConfigError(f"{key}: {value!r} is not a JSON object") from None


def _coerce_object(key: str, value: Any, kind: type) -> Any:
    """A nested setting (a JSON object, or its text on ``-c``), each key by its annotation."""
    value = _from_json(key, value)
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}: expected a JSON object, got {value!r}")
    hints = typing.get_type_hints(kind)
    allowed = [f.name for f in fields(kind)]
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown key; allowed: {', '.join(allowed)}")
    missing = [f.name for f in fields(kind) if f.name == "instance_type" and f.name not in value]
    if missing:
        raise ConfigError(f"{key}.{missing[0]}: missing")
    return kind(**{k: _coerce(f"{key}.{k}", v, hints[k]) for k, v in value.items()})


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{key}: {value!r} is not a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}: {value!r} is not a number") from None


_FIELDS = {f.name for f in fields(ClusterConfig)} - {"env_name"}


# Context keys that are the app's own besides the settings; CDK's keys never look like ours
# (feature flags "@aws-cdk/...", lookups "availability-zones:...", "aws:cdk:...").
_CONTEXT_KEYS = ("env", "environments", "availability_zones")
_SETTING_LIKE = re.compile(r"^[a-z][a-z0-9_]*$")
# A setting typed with hyphens (`-c instance-type=...`). CDK keeps hyphenated keys of its own
# at the top of context ("acknowledged-issue-numbers"), so only one close to a setting is ours.
_HYPHENATED = re.compile(r"^[a-z][a-z0-9_]*(-[a-z0-9_]+)+$")
# CDK's context key for the zones of an account's region: the stack's zones, which the VPC's
# zone must be one of (cdk.json carries them for each environment; `cdk context` lists them).
ZONES_LOOKUP = "availability-zones:account={account}:region={region}"


def refuse_unknown_settings(keys: Iterable[str]) -> None:
    """A `-c max_node=8` would otherwise be dropped without a word, and the cluster deployed
    with the default: refuse context keys shaped like a setting that is not one."""
    known = sorted(_FIELDS | set(_CONTEXT_KEYS))
    for key in sorted(keys):
        if _SETTING_LIKE.match(key) and key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]}?" if close else "allowed: " + ", ".join(known)
            raise ConfigError(f"{key}: not a setting; {hint}")
        if _HYPHENATED.match(key):
            close = difflib.get_close_matches(key.replace("-", "_"), known, n=1, cutoff=0.85)
            if close:
                raise ConfigError(f"{key}: not a setting; did you mean {close[0]}?")


def _check_zone(config: ClusterConfig, context: Mapping[str, Any]) -> None:
    """The zone is one of its region's, where the context knows them: CDK would otherwise
    stop the synth with a traceback ("must be a subset of the stack's availability zones")."""
    lookup = ZONES_LOOKUP.format(account=config.account, region=config.region)
    zones = context.get(lookup)
    if isinstance(zones, list) and zones and config.availability_zone not in zones:
        raise ConfigError(
            f"availability_zone: {config.availability_zone!r} is not a zone of "
            f"{config.region}; allowed: {', '.join(map(str, zones))}"
        )


def load(context: Mapping[str, Any]) -> ClusterConfig:
    """Build the configuration from CDK context: ``environments[env]`` then overrides."""
    environments = context.get("environments") or {}
    env_name = str(context.get("env") or DEFAULT_ENVIRONMENT)
    if env_name not in environments:
        raise ConfigError(
            f"env: unknown environment {env_name!r}; allowed: {', '.join(sorted(environments))}"
        )
    raw: dict[str, Any] = dict(environments[env_name])
    # `-c instance_type=p5.48xlarge` and friends override the selected environment.
    raw.update({k: v for k, v in context.items() if k in _FIELDS or k == "availability_zones"})
    unknown = sorted(set(raw) - _FIELDS - {"availability_zones"})
    if unknown:
        raise ConfigError(
            f"{unknown[0]}: unknown key in environment {env_name!r}; allowed: "
            + ", ".join(sorted(_FIELDS))
        )
    if "availability_zones" in raw:
        zones = raw.pop("availability_zones")
        zones = [zones] if isinstance(zones, str) else list(zones)
        if len(zones) != 1:
            raise ConfigError(
                f"availability_zones: {zones!r}; an EFA cluster lives in exactly one zone "
                "(EFA traffic cannot cross zones)"
            )
        raw.setdefault("availability_zone", zones[0])
    for required in ("account", "region", "availability_zone"):
        if required not in raw:
            raise ConfigError(f"{required}: missing in environment {env_name!r}")
    hints = typing.get_type_hints(ClusterConfig)
    values = {k: _coerce(k, v, hints[k]) for k, v in raw.items()}
    config = ClusterConfig(env_name=env_name, **values).validate()
    _check_zone(config, context)
    return config
