"""The pre-deploy check's preflight: what the account says of the pools a synthesized stack will
run, before ``cdk deploy`` (``launcher.aws.readiness.account_findings``): the EC2 vCPU quotas,
the instance types in the stack's zone, an imported subnet's free addresses, Capacity Blocks
and reservations, the AMI in the Region. The compute environments do not exist yet, so the
pools are read from the templates: each compute environment and its launch template.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra.update_plan import references
from launcher.job.readiness import PoolNeed, addresses_per_node, reservation_of
from launcher.stack.catalog import lookup

COMPUTE_ENVIRONMENT = "AWS::Batch::ComputeEnvironment"
LAUNCH_TEMPLATE = "AWS::EC2::LaunchTemplate"
QUEUE = "AWS::Batch::JobQueue"


def _resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {
        logical_id: body.get("Properties", {})
        for logical_id, body in template.get("Resources", {}).items()
        if body.get("Type") == kind
    }


def zone_of(templates: Sequence[dict[str, Any]]) -> str | None:
    """The cluster subnet's zone where the assembly creates it (a literal AvailabilityZone)."""
    for template in templates:
        for subnet in _resources(template, "AWS::EC2::Subnet").values():
            zone = subnet.get("AvailabilityZone")
            if isinstance(zone, str):
                return zone
    return None


def pool_needs(template: dict[str, Any], pools: dict[str, str], zone: str | None) -> list[PoolNeed]:
    """Each compute environment of ``template`` as a pool's need (``pools``: queue logical id
    -> pool name, from the Pools output), named by its pool where a queue puts it first."""
    environments = _resources(template, COMPUTE_ENVIRONMENT)
    templates = _resources(template, LAUNCH_TEMPLATE)
    order: dict[str, list[str]] = {
        queue: [
            name
            for kind, name in references(body.get("ComputeEnvironmentOrder", []))
            if kind == "local"
        ]
        for queue, body in _resources(template, QUEUE).items()
    }
    name_of = {ces[0]: pools.get(queue, queue) for queue, ces in order.items() if ces}
    fallback_of = {ces[0]: name_of.get(ces[1]) for ces in order.values() if len(ces) > 1}
    needs = []
    for logical_id, body in environments.items():
        resources = body.get("ComputeResources") or {}
        types = resources.get("InstanceTypes") or []
        known = lookup(types[0]) if len(types) == 1 and isinstance(types[0], str) else None
        if known is None or not isinstance(resources.get("MaxvCpus"), int):
            continue
        spec = resources.get("LaunchTemplate") or {}
        launch: dict[str, Any] = {}
        for kind, name in references(spec.get("LaunchTemplateId")):
            if kind == "local" and name in templates:
                launch = templates[name].get("LaunchTemplateData") or {}
        data = launch  # CloudFormation's LaunchTemplateData is the EC2 API's, key for key
        spot = resources.get("Type") == "SPOT"
        subnets = tuple(s for s in resources.get("Subnets") or [] if isinstance(s, str))
        reservation = reservation_of(data)
        market = (data.get("InstanceMarketOptions") or {}).get("MarketType")
        needs.append(
            PoolNeed(
                pool=name_of.get(logical_id, logical_id),
                instance_type=known.name,
                vcpus_per_node=known.vcpus,
                max_nodes=int(resources["MaxvCpus"]) // known.vcpus,
                spot=spot,
                addresses_per_node=addresses_per_node(data, multi_node=not spot),
                subnets=subnets,
                reservation_id=reservation,
                block=market == "capacity-block",
                fallback=fallback_of.get(logical_id),
                image_type=((resources.get("Ec2Configuration") or [{}])[0]).get("ImageType"),
                zone=None if subnets else zone,
            )
        )
    return needs
