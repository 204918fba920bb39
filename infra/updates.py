"""What changing each setting does to a deployed cluster: the update table of docs/operating.md.

Every setting of ``ClusterConfig`` has one entry, and every key of ``fsx_lustre`` and every
part of a ``data_buckets`` entry one of its own (``fsx_lustre.s3``, ``data_buckets.prefix``),
so a new setting must say how it behaves on the second ``cdk deploy``.
``tests/infra/test_updates.py`` deploys each example change over the default environment's
templates, works out from the CloudFormation resource schemas what would be replaced or refused
(``infra/update_plan.py``), and fails when an entry says otherwise.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class Effect(str, enum.Enum):
    IN_PLACE = "in place"
    # An infrastructure update: Batch replaces the nodes as their jobs finish (within
    # update_timeout_minutes), so no running job is ended by the deploy.
    NODES_ROLL = "in place, nodes replaced as their jobs finish"
    REPLACES = "replaces"
    # CloudFormation refuses the update (an export in use, a named resource) and rolls back.
    REFUSED = "refused"
    NEW_CLUSTER = "a new cluster"


@dataclass(frozen=True)
class Update:
    effect: Effect
    note: str = ""
    # REPLACES: the resource types replaced (a replaced job queue is retained, its jobs run on).
    replaces: tuple[str, ...] = ()
    # Settings that, deployed over the default environment, show the effect
    # (tests/infra/test_updates.py).
    example: Mapping[str, object] = field(default_factory=dict)
    # Settings the cluster had before the example, when the default environment's are not a
    # start the setting can be changed from (fair-share weights need fair_share on).
    baseline: Mapping[str, object] = field(default_factory=dict)


_CR = "cr-0123456789abcdef0"
_GROUP = "arn:aws:resource-groups:us-east-1:123456789012:group/training"
_SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:registry/ngc-AbCdEf"
_IMPORTED = {
    "vpc_id": "vpc-0123456789abcdef0",
    "subnet_id": "subnet-0123456789abcdef0",
    "default_security_group_id": "sg-0123456789abcdef0",
}
_MOVES_THE_SUBNET = "moves the cluster subnet, which the other stacks import"
_CPU_POOL = {"cpu": {"instance_type": "c7i.4xlarge", "max_nodes": 8, "spot": True}}
_ON_DEMAND_POOL = {"ondemand": {"instance_type": "p4d.24xlarge", "max_nodes": 2}}

UPDATES: dict[str, Update] = {
    "account": Update(Effect.NEW_CLUSTER, "another account is another cluster"),
    "region": Update(Effect.NEW_CLUSTER, "another region is another cluster"),
    "stack_name": Update(Effect.NEW_CLUSTER, "new stacks beside the old ones"),
    "availability_zone": Update(
        Effect.REFUSED, _MOVES_THE_SUBNET, example={"availability_zone": "us-east-1b"}
    ),
    "vpc_cidr": Update(Effect.REFUSED, _MOVES_THE_SUBNET, example={"vpc_cidr": "10.43.0.0/16"}),
    "vpc_id": Update(Effect.REFUSED, _MOVES_THE_SUBNET, example=_IMPORTED),
    "subnet_id": Update(Effect.REFUSED, _MOVES_THE_SUBNET, example=_IMPORTED),
    "default_security_group_id": Update(Effect.REFUSED, _MOVES_THE_SUBNET, example=_IMPORTED),
    "public_subnet_first": Update(
        Effect.REFUSED,
        "set once, at creation (0.1.0 stacks created with NAT: true); " + _MOVES_THE_SUBNET,
        example={"public_subnet_first": True},
    ),
    "nat_gateway": Update(
        Effect.IN_PLACE,
        "the public subnet and the NAT gateway come or go after the cluster subnet",
        example={"nat_gateway": True},
    ),
    "instance_type": Update(Effect.NODES_ROLL, example={"instance_type": "p5.48xlarge"}),
    "efa": Update(Effect.NODES_ROLL, example={"efa": False}),
    "root_volume_gib": Update(Effect.NODES_ROLL, example={"root_volume_gib": 300}),
    "capacity_reservation_id": Update(Effect.NODES_ROLL, example={"capacity_reservation_id": _CR}),
    "capacity_reservation_group_arn": Update(
        Effect.NODES_ROLL, example={"capacity_reservation_group_arn": _GROUP}
    ),
    "capacity_reservation_fallback": Update(
        Effect.NODES_ROLL,
        example={"capacity_reservation_group_arn": _GROUP, "capacity_reservation_fallback": True},
    ),
    "placement_group": Update(
        Effect.NODES_ROLL,
        "also drops the stack's own group, which EC2 deletes once its nodes are gone",
        example={"placement_group": "training-odcr-group"},
    ),
    "capacity_block_id": Update(
        Effect.NODES_ROLL,
        "also drops the placement group, which EC2 deletes once its nodes are gone",
        example={"capacity_block_id": _CR},
    ),
    "tags": Update(
        Effect.NODES_ROLL,
        "the nodes get them through the compute environment's node tags; everything else's "
        "tags change in place",
        example={"tags": {"efa-batch:environment": "demo", "cost-centre": "ml-research"}},
    ),
    "creation_tags": Update(
        Effect.REPLACES,
        "AWS fixes these tags at creation: the compute environments are replaced, ending "
        "their running jobs; set them once",
        replaces=("AWS::Batch::ComputeEnvironment", "AWS::EC2::PlacementGroup"),
        example={"creation_tags": {"team": "ml"}},
    ),
    "fair_share": Update(
        Effect.REPLACES,
        "Batch cannot add or remove a queue's fair-share policy: a new queue named for the "
        "mode; the old one is retained and runs its jobs to the end (then delete it)",
        replaces=("AWS::Batch::JobQueue",),
        example={"fair_share": True},
    ),
    "repository_encryption": Update(
        Effect.REFUSED,
        "ECR fixes encryption at creation; a new repository would change what the cluster "
        "stack imports",
        example={"repository_encryption": "kms"},
    ),
    "max_nodes": Update(Effect.IN_PLACE, example={"max_nodes": 4}),
    "min_nodes": Update(Effect.IN_PLACE, example={"min_nodes": 1}),
    "capacity_wait_minutes": Update(Effect.IN_PLACE, example={"capacity_wait_minutes": 60}),
    "misconfigured_wait_minutes": Update(
        Effect.IN_PLACE, example={"misconfigured_wait_minutes": 30}
    ),
    "update_timeout_minutes": Update(Effect.IN_PLACE, example={"update_timeout_minutes": 60}),
    "removal_policy": Update(Effect.IN_PLACE, example={"removal_policy": "retain"}),
    "keep_images": Update(Effect.IN_PLACE, example={"keep_images": 20}),
    "workspace_image_days": Update(Effect.IN_PLACE, example={"workspace_image_days": 14}),
    "base_image_days": Update(Effect.IN_PLACE, example={"base_image_days": 30}),
    "log_retention_days": Update(Effect.IN_PLACE, example={"log_retention_days": 30}),
    "function_payload_days": Update(
        Effect.IN_PLACE,
        "the function bucket's lifecycle rule; objects already there expire by the new rule",
        example={"function_payload_days": 14},
    ),
    "extra_pull_repository_arns": Update(
        Effect.IN_PLACE,
        example={
            "extra_pull_repository_arns": (
                "arn:aws:ecr:us-east-1:123456789012:repository/team/base",
            )
        },
    ),
    "pull_through_cache": Update(
        Effect.IN_PLACE, example={"pull_through_cache": "ecr-public,quay"}
    ),
    "registry_secrets": Update(
        Effect.IN_PLACE,
        "(needs nat_gateway)",
        example={"nat_gateway": True, "registry_secrets": {"nvcr.io": _SECRET}},
    ),
    "copy_max_vcpus": Update(Effect.IN_PLACE, example={"copy_max_vcpus": 32}),
    "data_buckets": Update(
        Effect.IN_PLACE,
        "a location added or removed: the job role's policy; running jobs' credentials follow "
        "within their refresh",
        example={"data_buckets": ("example-datasets/imagenet", "example-checkpoints:rw")},
    ),
    "data_buckets.bucket": Update(
        Effect.IN_PLACE,
        "another bucket for a location: the job role's policy",
        example={"data_buckets": ("other-datasets/imagenet",)},
        baseline={"data_buckets": ("example-datasets/imagenet",)},
    ),
    "data_buckets.prefix": Update(
        Effect.IN_PLACE,
        "another prefix: the job role's policy (it lists PREFIX/, never a sibling)",
        example={"data_buckets": ("example-datasets/imagenet-2026",)},
        baseline={"data_buckets": ("example-datasets/imagenet",)},
    ),
    "data_buckets.writable": Update(
        Effect.IN_PLACE,
        ":ro to :rw or back: the job role's policy",
        example={"data_buckets": ("example-checkpoints:rw",)},
        baseline={"data_buckets": ("example-checkpoints",)},
    ),
    "job_role_policies": Update(
        Effect.IN_PLACE, example={"job_role_policies": ("arn:aws:iam::aws:policy/ReadOnlyAccess",)}
    ),
    "job_secrets": Update(
        Effect.IN_PLACE,
        "the execution role's policy, and the endpoints that read them without NAT",
        example={"job_secrets": ("team/", "ssm:/team/")},
    ),
    # Adding it rolls the nodes. The cluster stack imports the file system's id, DNS name and
    # mount name, and CloudFormation refuses to change or drop an export in use
    # (walkthrough-crossstackref.html): a new deployment (which replaces the file system) or
    # removing it fails the storage stack's update. tests/infra/test_data_access.py plans all three.
    "fsx_lustre": Update(
        Effect.NODES_ROLL,
        "adding it: nodes mount it at every boot; removing it is refused while the cluster "
        "stack imports the file system: take it out in two deploys, the cluster stack alone "
        "first (cdk deploy STACK_NAME --exclusively), then all (the old one is retained unless "
        "removal_policy is destroy)",
        example={"fsx_lustre": {"storage_gib": 1200, "s3": "example-datasets/lustre"}},
    ),
    "fsx_lustre.storage_gib": Update(
        Effect.IN_PLACE,
        "grows in place; FSx never shrinks a file system",
        example={"fsx_lustre": {"storage_gib": 2400}},
        baseline={"fsx_lustre": {"storage_gib": 1200}},
    ),
    "fsx_lustre.throughput_mibps_per_tib": Update(
        Effect.IN_PLACE,
        "FSx changes a PERSISTENT_2 file system's throughput in place",
        example={"fsx_lustre": {"storage_gib": 1200, "throughput_mibps_per_tib": 500}},
        baseline={"fsx_lustre": {"storage_gib": 1200}},
    ),
    "fsx_lustre.deployment": Update(
        Effect.REFUSED,
        "FSx fixes the deployment type at creation, and a new file system would change what "
        "the cluster stack imports: take fsx_lustre out in two deploys (above), then add the "
        "new one",
        example={"fsx_lustre": {"storage_gib": 1200, "deployment": "SCRATCH_2"}},
        baseline={"fsx_lustre": {"storage_gib": 1200}},
    ),
    "fsx_lustre.s3": Update(
        Effect.REPLACES,
        "the new location links at its own /fsx/BUCKET/PREFIX beside the old one, whose files "
        "stay on the file system, unlinked; refused when one location lies inside the other or "
        "the old link is at / (FSx refuses overlapping links): deploy once without s3, then "
        "with the new one",
        replaces=("AWS::FSx::DataRepositoryAssociation",),
        example={"fsx_lustre": {"storage_gib": 1200, "s3": "example-datasets/lustre-2026"}},
        baseline={"fsx_lustre": {"storage_gib": 1200, "s3": "example-datasets/lustre"}},
    ),
    "fsx_lustre.link_path": Update(
        Effect.REFUSED,
        "FSx links a location once, and CloudFormation links the new path before it unlinks "
        "the old: deploy once without s3, then with the new link_path; / keeps a link made "
        "before link_path existed where it is",
        example={
            "fsx_lustre": {
                "storage_gib": 1200,
                "s3": "example-datasets/lustre",
                "link_path": "/data",
            }
        },
        baseline={"fsx_lustre": {"storage_gib": 1200, "s3": "example-datasets/lustre"}},
    ),
    "fsx_lustre.export": Update(
        Effect.IN_PLACE,
        "the S3 link starts or stops writing files back, in place (its S3 property is not "
        "create-only), and the job role gains or loses write on the location",
        example={
            "fsx_lustre": {"storage_gib": 1200, "s3": "example-datasets/lustre", "export": False}
        },
        baseline={"fsx_lustre": {"storage_gib": 1200, "s3": "example-datasets/lustre"}},
    ),
    "allow_privileged": Update(
        Effect.NODES_ROLL,
        "the nodes' ECS agent setting ECS_DISABLE_PRIVILEGED",
        example={"allow_privileged": True},
    ),
    "ecs_exec": Update(
        Effect.IN_PLACE,
        "the job role's SSM messages permissions and the EcsExec output; jobs submitted from "
        "then on start with ECS Exec on (a running job keeps what it started with)",
        example={"ecs_exec": True},
    ),
    "replace_bad_nodes": Update(
        Effect.IN_PLACE,
        "adds or removes the node replacer (its rule, function, role and log group) and the "
        "logs key's grant for its log group; running jobs and nodes are not touched",
        example={"replace_bad_nodes": False},
    ),
    # Pools: the default pool's resources keep the single-pool stacks' logical ids, so adding
    # pools to a deployed cluster adds resources and replaces none (tests/infra/test_pools.py).
    "pools": Update(
        Effect.IN_PLACE,
        "a new pool adds its own launch template, compute environment and queue; a pool's keys "
        "do to it what the same top-level keys do to the default pool; a removed pool's queue "
        "and compute environment are deleted (drain them first)",
        example={"pools": _CPU_POOL},
    ),
    "default_pool": Update(
        Effect.IN_PLACE,
        "the default pool's name in the outputs; its resources and queue name stay",
        example={"default_pool": "train"},
    ),
    "fallback": Update(
        Effect.IN_PLACE,
        "the fallback pool's compute environment joins (or leaves) the default pool's queue",
        example={"pools": _ON_DEMAND_POOL, "fallback": "ondemand"},
        baseline={"pools": _ON_DEMAND_POOL},
    ),
    "share_weights": Update(
        Effect.IN_PLACE,
        "the fair-share policy's share distribution (needs fair_share)",
        example={"fair_share": True, "share_weights": {"vision": 1.0, "nlp*": 0.5}},
        baseline={"fair_share": True},
    ),
    "teams": Update(
        Effect.IN_PLACE,
        "a new team adds its roles, EFS access point, log group and user policy; a removed "
        "team's are deleted (its log group with its logs; its directory's files stay on EFS); "
        "weights change the fair-share policy in place",
        example={"teams": {"vision": {}}},
    ),
    "share_decay_seconds": Update(
        Effect.IN_PLACE,
        "the fair-share policy (needs fair_share)",
        example={"fair_share": True, "share_decay_seconds": 86400},
        baseline={"fair_share": True},
    ),
    "compute_reservation": Update(
        Effect.IN_PLACE,
        "the fair-share policy (needs fair_share)",
        example={"fair_share": True, "compute_reservation": 25},
        baseline={"fair_share": True},
    ),
}


def markdown_table() -> str:
    """docs/operating.md's table: one row per setting, in the order of the effect's severity."""
    order = list(Effect)
    rows = ["| setting | a change on a deployed cluster | why |", "| --- | --- | --- |"]
    for key, update in sorted(UPDATES.items(), key=lambda kv: (order.index(kv[1].effect), kv[0])):
        effect = update.effect.value
        if update.replaces:
            kinds = ", ".join(t.split("::")[-1] for t in update.replaces)
            effect = f"replaces: {kinds}"
        rows.append(f"| `{key}` | {effect} | {update.note} |")
    return "\n".join(rows)
