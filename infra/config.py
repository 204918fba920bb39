"""The cluster's configuration: one frozen dataclass, validated before any construct exists.

It is read once, at the app's top (``infra/app.py``), from the ``environments`` object in
``cdk.json`` context, the ``-c env=NAME`` selector and ``-c key=value`` overrides. Constructs
receive it as a typed value and never read context themselves. Every error names the key and
what is allowed, in one line (``ConfigError``, which ``load`` raises).

The settings are one flat dataclass, as the context keys are one flat list; their checks live
by concept: the pools' (and the queues' fair share) in infra/pool_config.py, what jobs may
reach (data buckets, FSx for Lustre, policies, secrets) in infra/data_config.py, and the
vocabulary they share (``ConfigError``, ``check``, ``coerce``) in infra/config_values.py.
The rest (account, network, registries, tags, retention) is checked here.
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import re
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from infra import pull_through
from infra.config_values import ConfigError, check, coerce
from infra.data_config import data_locations, validate_data
from infra.lustre import FsxLustre
from infra.pool_config import (
    POOL_SETTINGS,
    Pool,
    PoolConfig,
    all_pools,
    validate_fair_share,
    validate_pools,
)
from infra.team_config import TeamConfig, team_pools, validate_teams
from launcher.stack import buckets, catalog, secrets
from launcher.stack.outputs import DEFAULT_STACK_NAME, Egress

# The configuration's API. ConfigError is load's error (infra/config_values.py holds it, below
# every configuration module): callers take it from here, with load.
__all__ = [
    "CLUSTER_TAG",
    "DEFAULT_ENVIRONMENT",
    "ZONES_LOOKUP",
    "ClusterConfig",
    "ConfigError",
    "load",
    "refuse_unknown_settings",
]

DEFAULT_ENVIRONMENT = "demo"
CLUSTER_TAG = "efa-batch:cluster"  # on every resource: the stack's name, fixed for its life

_ACCOUNT = re.compile(r"^\d{12}$")
_REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d$")
_AZ = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d[a-z]$")
_VPC = re.compile(r"^vpc-([0-9a-f]{8}|[0-9a-f]{17})$")
_SUBNET = re.compile(r"^subnet-([0-9a-f]{8}|[0-9a-f]{17})$")
_SECURITY_GROUP = re.compile(r"^sg-([0-9a-f]{8}|[0-9a-f]{17})$")
_REPOSITORY_ARN = re.compile(
    r"^arn:aws(-[a-z]+)*:ecr:[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d:\d{12}:repository/[a-z0-9._/*-]+$"
)
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
    # Days the function bucket keeps a Python function's payload and results after their
    # upload (S3 lifecycle expiration, infra/function_payloads.py): a call's caller reads its
    # results within the job's life, so a week leaves room for a queue's wait and a retry.
    function_payload_days: int = 7
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
    # Teams of a shared stack: name -> what the team may use (infra/team_config.py); each
    # gets its own roles, EFS directory, log group and user policy (infra/teams.py). Empty:
    # one team, the stack's own roles, as before.
    teams: Mapping[str, TeamConfig] = field(default_factory=dict)

    @property
    def instance(self) -> catalog.InstanceType:
        found = catalog.lookup(self.instance_type)
        assert found is not None  # checked in validate_pools()
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
        return data_locations(self.data_buckets, self.fsx_lustre)

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
        return all_pools(Pool(self.default_pool, top, True), self.pools)

    def team_pools(self, name: str) -> tuple[str, ...]:
        """The pools team ``name`` may submit to."""
        return team_pools(self.teams[name], tuple(p.name for p in self.pool_list))

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
        check(_ACCOUNT, "account", self.account, "12 digits")
        check(_REGION, "region", self.region, "a region name such as us-east-1")
        check(_AZ, "availability_zone", self.availability_zone, "a zone such as us-east-1a")
        if not self.availability_zone.startswith(self.region):
            raise ConfigError(
                f"availability_zone: {self.availability_zone!r} is not in region {self.region!r}"
            )
        check(_STACK_NAME, "stack_name", self.stack_name, "letters, digits and hyphens")
        _check_vpc_cidr(self.vpc_cidr)
        validate_pools(self.pool_list, region=self.region, account=self.account)
        validate_fair_share(
            fair_share=self.fair_share,
            share_weights=self.share_weights,
            share_decay_seconds=self.share_decay_seconds,
            compute_reservation=self.compute_reservation,
        )
        imported = (self.vpc_id, self.subnet_id, self.default_security_group_id)
        if any(v is not None for v in imported) and not all(v is not None for v in imported):
            raise ConfigError(
                "vpc_id/subnet_id/default_security_group_id: give all three to import a VPC "
                "(jobs' task interfaces use the VPC's default security group), or none"
            )
        if self.vpc_id is not None:
            check(_VPC, "vpc_id", self.vpc_id, "vpc- followed by 8 or 17 hex digits")
            check(_SUBNET, "subnet_id", self.subnet_id, "subnet- followed by 8 or 17 hex digits")
            check(
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
            check(
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
        validate_data(
            data_buckets=self.data_buckets,
            fsx_lustre=self.fsx_lustre,
            job_role_policies=self.job_role_policies,
            job_secrets=self.job_secrets,
            place=secrets.Place("aws", self.region, self.account),
            egress=self.internet_egress,
        )
        validate_teams(
            self.teams,
            pools=tuple(p.name for p in self.pool_list),
            fair_share=self.fair_share,
            share_weights=self.share_weights,
            place=secrets.Place("aws", self.region, self.account),
            egress=self.internet_egress,
        )
        for key in ("tags", "creation_tags"):
            _check_tags(key, getattr(self, key))
        if not 1 <= self.keep_images <= 10000:
            raise ConfigError(f"keep_images: {self.keep_images}; allowed: 1-10000")
        for key in ("workspace_image_days", "base_image_days", "function_payload_days"):
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
            check(_REGISTRY_HOST, "registry_secrets", host, "registry hosts (HOST[:PORT]) as keys")
            check(
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
    values = {k: coerce(k, v, hints[k]) for k, v in raw.items()}
    config = ClusterConfig(env_name=env_name, **values).validate()
    _check_zone(config, context)
    return config
