"""The preflight on AWS: read what decides whether each pool's nodes can start, then judge it
with ``launcher.job.readiness``. Every call is a read (Describe*, Get*); one the identity may
not make turns its lines into "skipped" with the permission named, never into a failure.

Calls for a stack of N pools: DescribeComputeEnvironments (1), DescribeLaunchTemplateVersions
(N), DescribeSubnets (1), DescribeInstanceTypeOfferings (1), GetServiceQuota (one per quota
the pools draw on), DescribeCapacityReservations (1, where a pool has one), GetParameters (1).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from launcher.aws.client import Aws
from launcher.errors import RemoteError, is_denied
from launcher.job import readiness
from launcher.job.capacity import is_group
from launcher.job.readiness import Finding, PoolNeed, addresses_per_node, reservation_of
from launcher.stack.cluster import ClusterInfo
from launcher.stack.outputs import PoolInfo

T = TypeVar("T")
@dataclass(frozen=True)
class Unread:
    """Why a call could not be made: its permission, or AWS's line."""

    why: str


class Reader:
    """Reads through ``aws``; a call refused for want of permission is remembered as a note."""

    def __init__(self, aws: Aws) -> None:
        self.aws = aws

    def read(self, permission: str, call: Callable[[], T]) -> T | Unread:
        """The call's answer, or why it could not be made."""
        try:
            return call()
        except RemoteError as exc:
            if is_denied(exc):
                return Unread(f"this AWS identity may not call {permission}")
            return Unread(str(exc))


def need_of(pool: PoolInfo, environment: dict[str, Any], template: dict[str, Any]) -> PoolNeed:
    """A pool's need from its compute environment and its launch template as deployed."""
    resources = environment.get("computeResources") or {}
    ec2_configuration = resources.get("ec2Configuration") or [{}]
    reservation = reservation_of(template)
    block = pool.capacity_block_id
    return PoolNeed(
        pool=pool.name,
        instance_type=pool.instance_type,
        vcpus_per_node=pool.vcpus_per_node,
        max_nodes=pool.max_nodes,
        spot=pool.spot or resources.get("type") == "SPOT",
        addresses_per_node=addresses_per_node(template, multi_node=not pool.spot),
        subnets=tuple(resources.get("subnets") or ()),
        reservation_id=reservation or (block if block and not is_group(block) else None),
        block=bool(block),
        fallback=pool.fallback,
        image_type=ec2_configuration[0].get("imageType"),
    )


def _environments(
    reader: Reader, info: ClusterInfo, pools: Sequence[PoolInfo]
) -> dict[str, dict[str, Any]] | Unread:
    """Each pool's compute environment by pool name (its name from the Pools output, or the
    first of its queue's on stacks older than that field)."""
    names: dict[str, str] = {}
    for pool in pools:
        if pool.compute_environment_name:
            names[pool.name] = pool.compute_environment_name
            continue
        queue = reader.read("batch:DescribeJobQueues", functools.partial(info_queue, reader, pool))
        if isinstance(queue, str) and queue:
            names[pool.name] = queue
    if not names:
        return {}
    found = reader.read(
        "batch:DescribeComputeEnvironments",
        lambda: reader.aws.describe_compute_environments(sorted(set(names.values()))),
    )
    if isinstance(found, Unread):
        return found
    by_name = {e["computeEnvironmentName"]: e for e in found}
    by_arn = {e.get("computeEnvironmentArn"): e for e in found}
    return {
        pool: environment
        for pool, name in names.items()
        if (environment := by_name.get(name) or by_arn.get(name)) is not None
    }


def info_queue(reader: Reader, pool: PoolInfo) -> str:
    """The name (or ARN) of the first compute environment of the pool's queue."""
    queue = reader.aws.describe_job_queue(pool.queue_name) or {}
    order = sorted(queue.get("computeEnvironmentOrder") or [], key=lambda e: e["order"])
    return str(order[0]["computeEnvironment"]) if order else ""


def preflight(aws: Aws, info: ClusterInfo, pools: Sequence[str] = ()) -> list[Finding]:
    """Every finding for ``pools`` (default: all of the stack's), pool by pool."""
    chosen = [p for p in info.pools if not pools or p.name in pools]
    reader = Reader(aws)
    findings: list[Finding] = []
    environments = _environments(reader, info, chosen)
    if isinstance(environments, Unread):
        return [Finding(p.name, "environment", None, environments.why) for p in chosen]
    needs: list[PoolNeed] = []
    for pool in chosen:
        environment = environments.get(pool.name)
        findings.append(readiness.environment_finding(_bare(pool), environment))
        if environment is None:
            continue
        template = _template(reader, environment)
        if isinstance(template, Unread):
            findings.append(Finding(pool.name, "addresses", None, template.why))
        needs.append(need_of(pool, environment, template if isinstance(template, dict) else {}))
    findings += _nodes(reader, environments)
    findings += account_findings(aws, needs, info.region)
    return in_order(findings, [p.name for p in chosen])


CHECKS = ("environment", "nodes", "quota", "zone", "addresses", "reservation", "image")


def in_order(findings: Sequence[Finding], pools: Sequence[str]) -> list[Finding]:
    """Pool by pool (in ``pools``' order), each pool's checks in CHECKS' order."""
    order = {name: i for i, name in enumerate(pools)}
    return sorted(findings, key=lambda f: (order.get(f.pool, 0), CHECKS.index(f.check)))


def account_findings(aws: Aws, needs: Sequence[PoolNeed], region: str) -> list[Finding]:
    """What the account says of pools that may not be deployed yet (the pre-deploy check's
    part): quotas, the zone's offerings and free addresses, reservations, the AMI."""
    reader = Reader(aws)
    return [
        *_quotas(reader, needs),
        *_zones_and_addresses(reader, needs),
        *_reservations(reader, needs),
        *_images(reader, needs, region),
    ]


def _nodes(reader: Reader, environments: dict[str, dict[str, Any]]) -> list[Finding]:
    """Instances the pools' Auto Scaling groups started that never joined their ECS clusters
    (the oldest one's console's last line where none joined); nothing where none run."""
    names = {pool: e["computeEnvironmentName"] for pool, e in environments.items()}
    groups = reader.read(
        "autoscaling:DescribeAutoScalingGroups", lambda: reader.aws.scaling_groups([])
    )
    if isinstance(groups, Unread):
        return [Finding(pool, "nodes", None, groups.why) for pool in names]
    mine = readiness.scaling_groups(list(names.values()), groups)
    if not mine:
        return []
    group_names = sorted(mine.values())
    instances = reader.read(
        "ec2:DescribeInstances", lambda: reader.aws.group_instances(group_names)
    )
    arns = [e["ecsClusterArn"] for e in environments.values() if e.get("ecsClusterArn")]
    clusters = reader.read("ecs:DescribeClusters", lambda: reader.aws.describe_ecs_clusters(arns))
    with_group = [pool for pool, name in names.items() if name in mine]
    if isinstance(instances, Unread):
        return [Finding(pool, "nodes", None, instances.why) for pool in with_group]
    if isinstance(clusters, Unread):
        return [Finding(pool, "nodes", None, clusters.why) for pool in with_group]
    findings = []
    for pool in with_group:
        group = mine[names[pool]]
        running = readiness.in_group(instances, group)
        arn = environments[pool].get("ecsClusterArn")
        registered = next(
            (
                int(c.get("registeredContainerInstancesCount", 0))
                for c in clusters
                if c.get("clusterArn") == arn
            ),
            None,
        )
        text, oldest = readiness.unjoined(running, registered)
        if text is None:
            if running:
                findings.append(Finding(pool, "nodes", True, f"{len(running)} running, all joined"))
            continue
        if oldest is not None:
            output = reader.read(
                "ec2:GetConsoleOutput", functools.partial(reader.aws.console_output, oldest)
            )
            tail = None if isinstance(output, Unread) else readiness.console_tail(output)
            if tail:
                text += f"; {oldest}'s console ends: {tail}"
        findings.append(Finding(pool, "nodes", False, text))
    return findings


def _bare(pool: PoolInfo) -> PoolNeed:
    return PoolNeed(
        pool.name, pool.instance_type, pool.vcpus_per_node, pool.max_nodes, pool.spot, 1
    )


def _template(reader: Reader, environment: dict[str, Any]) -> dict[str, Any] | Unread:
    spec = (environment.get("computeResources") or {}).get("launchTemplate") or {}
    template_id = spec.get("launchTemplateId")
    if not template_id:
        return {}
    version = str(spec.get("version") or "$Default")
    return reader.read(
        "ec2:DescribeLaunchTemplateVersions",
        lambda: reader.aws.launch_template_version(template_id, version),
    )


def _quotas(reader: Reader, needs: Sequence[PoolNeed]) -> list[Finding]:
    findings = []
    limits: dict[str, float | Unread] = {}
    for need in needs:
        quota = readiness.quota_of(need.instance_type, need.spot)
        if quota is None:
            text = f"no EC2 quota known for {need.instance_type}: check it in Service Quotas"
            findings.append(Finding(need.pool, "quota", None, text))
            continue
        code = quota[0]
        if code not in limits:
            limits[code] = reader.read(
                "servicequotas:GetServiceQuota", functools.partial(reader.aws.ec2_quota, code)
            )
        limit = limits[code]
        if isinstance(limit, Unread):
            findings.append(Finding(need.pool, "quota", None, f"{quota[1]} ({code}): {limit.why}"))
            continue
        others = [
            o
            for o in needs
            if o is not need
            and not o.block
            and readiness.quota_of(o.instance_type, o.spot) == quota
        ]
        findings.append(readiness.quota_finding(need, limit, others))
    return findings


def _zones_and_addresses(reader: Reader, needs: Sequence[PoolNeed]) -> list[Finding]:
    subnet_ids = sorted({s for n in needs for s in n.subnets})
    if not subnet_ids and not any(n.zone for n in needs):
        return []
    subnets = (
        reader.read("ec2:DescribeSubnets", lambda: reader.aws.subnets(subnet_ids))
        if subnet_ids
        else []
    )
    if isinstance(subnets, Unread):
        why = subnets.why
        return [Finding(n.pool, c, None, why) for n in needs for c in ("zone", "addresses")]
    zones = {s["SubnetId"]: s["AvailabilityZone"] for s in subnets}
    free = {s["SubnetId"]: int(s.get("AvailableIpAddressCount", 0)) for s in subnets}
    types = sorted({n.instance_type for n in needs})
    offered = reader.read(
        "ec2:DescribeInstanceTypeOfferings", lambda: reader.aws.type_offerings(types)
    )
    findings = []
    for need in needs:
        mine = {s: zones[s] for s in need.subnets if s in zones}
        if need.zone and not need.subnets:  # a subnet the deploy will create: its zone only
            mine = {f"new subnet of {need.pool}": need.zone}
        if isinstance(offered, Unread):
            findings.append(Finding(need.pool, "zone", None, offered.why))
        else:
            where = {zone for kind, zone in offered if kind == need.instance_type}
            findings.append(readiness.zone_finding(need, mine, where))
        if not need.subnets:
            continue  # created by the deploy: its size is the stack's own (configuration.md)
        if not mine:
            findings.append(Finding(need.pool, "addresses", None, "its subnet could not be read"))
            continue
        others = [o for o in needs if o is not need and set(o.subnets) & set(need.subnets)]
        count = sum(free[s] for s in mine)
        findings.append(readiness.addresses_finding(need, count, others))
    return findings


def _reservations(reader: Reader, needs: Sequence[PoolNeed]) -> list[Finding]:
    ids = sorted({n.reservation_id for n in needs if n.reservation_id})
    if not ids:
        return []
    found = reader.read(
        "ec2:DescribeCapacityReservations", lambda: reader.aws.capacity_reservations(ids)
    )
    findings = []
    for need in needs:
        if not need.reservation_id:
            continue
        if isinstance(found, Unread):
            findings.append(Finding(need.pool, "reservation", None, found.why))
            continue
        entry = next((r for r in found if r["CapacityReservationId"] == need.reservation_id), None)
        if entry is None:
            text = f"{need.reservation_id} does not exist in this account and Region"
            findings.append(Finding(need.pool, "reservation", False, text))
            continue
        findings.append(readiness.reservation_finding(need, entry))
    return findings


def _images(reader: Reader, needs: Sequence[PoolNeed], region: str) -> list[Finding]:
    wanted = {n.image_type: readiness.AMI_PARAMETERS.get(n.image_type or "") for n in needs}
    names = sorted({p for p in wanted.values() if p})
    if not names:
        return []
    missing = reader.read("ssm:GetParameters", lambda: reader.aws.missing_parameters(names))
    findings = []
    for need in needs:
        parameter = wanted.get(need.image_type)
        if not parameter:
            continue
        if isinstance(missing, Unread):
            findings.append(Finding(need.pool, "image", None, missing.why))
        else:
            findings.append(readiness.image_finding(need, region, parameter not in missing))
    return findings
