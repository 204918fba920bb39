"""The CDK app: configuration is read here, once, and handed to the stacks as a typed value."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import aws_cdk as cdk
import cdk_nag

from infra.cluster import ClusterStack
from infra.config import (
    CLUSTER_TAG,
    ZONES_LOOKUP,
    ClusterConfig,
    ConfigError,
    load,
    refuse_unknown_settings,
)
from infra.network import NetworkStack
from infra.storage import StorageStack


def build(app: cdk.App, config: ClusterConfig) -> dict[str, cdk.Stack]:
    env = cdk.Environment(account=config.account, region=config.region)
    name = config.stack_name
    network = NetworkStack(
        app,
        f"{name}-Network",
        config=config,
        env=env,
        description="EFA Batch cluster: VPC, subnet, security groups, endpoints, logs key",
    )
    storage = StorageStack(
        app,
        f"{name}-Storage",
        config=config,
        vpc=network.vpc,
        subnet=network.subnet,
        cluster_security_group=network.cluster_security_group,
        task_security_group=network.task_security_group,
        env=env,
        description="EFA Batch cluster: stateful resources (ECR repository, EFS)",
    )
    cluster = ClusterStack(
        app,
        name,
        config=config,
        subnet=network.subnet,
        cluster_security_group=network.cluster_security_group,
        task_security_group=network.task_security_group,
        copy_security_group=network.copy_security_group,
        repository=storage.repository,
        file_system=storage.file_system,
        access_point=storage.access_point,
        lustre=storage.lustre,
        logs_key=network.logs_key,
        team_access_points=storage.team_access_points,
        env=env,
        description="EFA Batch cluster: compute environment, job queue, roles, logs",
    )
    tag(app, config)
    return {"network": network, "storage": storage, "cluster": cluster}


# Resource types whose Tags are create-only (CloudFormation resource provider schemas,
# createOnlyProperties): a tag change replaces them, and a replaced compute environment takes
# its running jobs with it. They get the cluster tag (fixed for the stack's life) and
# creation_tags only; the nodes get `tags` through ComputeResources.Tags (infra/compute_pool.py),
# which an infrastructure update changes in place.
TAGS_FIXED_AT_CREATION = ("AWS::Batch::ComputeEnvironment", "AWS::EC2::PlacementGroup")


def tag(app: cdk.App, config: ClusterConfig) -> None:
    cdk.Tags.of(app).add(CLUSTER_TAG, config.stack_name)
    for key, value in config.tags.items():
        cdk.Tags.of(app).add(key, value, exclude_resource_types=list(TAGS_FIXED_AT_CREATION))
    for key, value in config.creation_tags.items():
        cdk.Tags.of(app).add(key, value, include_resource_types=list(TAGS_FIXED_AT_CREATION))


def create_app(
    context: Mapping[str, Any] | None = None,
    *,
    outdir: str | None = None,
    packs: Sequence[type[cdk_nag.NagPack]] = (),
) -> tuple[cdk.App, ClusterConfig, dict[str, cdk.Stack]]:
    """The app as ``cdk synth`` runs it: cdk-nag's AwsSolutions pack always checks it (its
    synth raises ValidationFailed on an unacknowledged finding), so no caller, test or tool,
    can synthesize a template that the CDK CLI would refuse. ``packs``: more cdk-nag packs
    to run beside it (``infra.nag_report``)."""
    app = cdk.App(context=dict(context) if context is not None else None, outdir=outdir)
    config = load(_context_of(app))
    stacks = build(app, config)
    packs = (cdk_nag.AwsSolutionsChecks, *packs)
    cdk.Validations.of(app).add_plugins(*(pack(app) for pack in packs))
    return app, config, stacks


def _context_of(app: cdk.App) -> dict[str, Any]:
    refuse_unknown_settings(app.node.get_all_context())
    keys = ("environments", "env", "availability_zones", *ClusterConfig.__dataclass_fields__)
    context = {k: v for k in keys if (v := app.node.try_get_context(k)) is not None}
    prefix = ZONES_LOOKUP.split("{", 1)[0]  # the zones CDK knows, for the zone's check
    zones = {k: v for k, v in app.node.get_all_context().items() if k.startswith(prefix)}
    return {**context, **zones}


def main() -> None:
    try:
        app, _, _ = create_app()
    except ConfigError as exc:
        print(f"error: invalid cluster configuration: {exc}", file=sys.stderr)
        sys.exit(2)
    app.synth()


if __name__ == "__main__":
    main()
