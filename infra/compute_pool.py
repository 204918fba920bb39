"""One compute pool's resources: its launch template, placement group (EFA pools), compute
environment and queue (``ComputePool``), and what names and shapes them (queue names, node
tags, EFA interfaces, the capacity target, the queue's time limits).

The cluster stack (infra/cluster.py) makes one ``ComputePool`` per pool of the configuration
and gives each what the pools share: the subnet, the nodes' security group, instance profile
and user data, the fair-share policy. The default pool's resources live in the stack itself,
so their logical ids stay those of the single-pool stacks; the others' in a construct each.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import (
    Acknowledgment,
    CfnDeletionPolicy,
    CfnResource,
    Fn,
    Validations,
)
from aws_cdk import aws_batch as batch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.batch_names import compute_environment_name
from infra.config import CLUSTER_TAG, ClusterConfig
from infra.pool_config import Pool, is_group_arn

# The RUNNABLE reasons a queue may act on (Batch user guide,
# job_stuck_in_runnable_time_limit_actions.html), by the setting that times each one.
TIME_LIMIT_REASONS: dict[str, tuple[str, ...]] = {
    "capacity_wait_minutes": ("CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",),
    "misconfigured_wait_minutes": (
        "MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE",
        "MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT",
    ),
}


def efa_network_interfaces(
    cards: range, security_group_id: str
) -> list[ec2.CfnLaunchTemplate.NetworkInterfaceProperty]:
    """One EFA device on each of ``cards``; the node's only IP address on card 0.

    The EC2 guide (efa-acc-inst-types.html) wants the primary interface (card 0, device 0) to
    carry IP traffic (it cannot be EFA-only) and EFA-only interfaces at device 0 of every
    further card: one IP address per node, not one per card. Card 0's EFA device comes from
    making the primary interface "EFA with ENA" rather than adding an EFA-only interface at
    card 0 device 1, because a multi-node job's awsvpc task interface needs that second slot
    on card 0 (p5 and p5e allow two interfaces per card). Where card 0 takes no EFA device
    (P6-B300: "the primary network card supports only an ENA network interface"), ``cards``
    starts at 1 and the primary is a plain ENA interface, as the guide's P6-B300 example has
    it ("NetworkCardIndex=0,DeviceIndex=0,...,InterfaceType=interface").

    Security groups live here, not on the compute environment: Batch would pass the compute
    environment's groups at the instance level, which EC2 refuses beside interfaces.
    """
    LT = ec2.CfnLaunchTemplate
    primary = [] if 0 in cards else [(0, "interface")]
    return [
        LT.NetworkInterfaceProperty(
            network_card_index=card,
            device_index=0,
            interface_type=kind,
            groups=[security_group_id],
            delete_on_termination=True,
        )
        for card, kind in primary + [(c, "efa" if c == 0 else "efa-only") for c in cards]
    ]


def _capacity_reservation(
    config: ClusterConfig,
) -> ec2.CfnLaunchTemplate.CapacityReservationSpecificationProperty | None:
    """The one reservation, Capacity Block or reservation group nodes launch into, if any.

    ``capacity_block_id`` may name a group of Capacity Blocks: the launch then targets the
    group's ARN on the capacity-block market ("specify the group ARN and select the Capacity
    Blocks purchasing option", EC2 user guide, cr-groups-launch.html).
    """
    LT = ec2.CfnLaunchTemplate
    block = config.capacity_block_id
    block_group = block if is_group_arn(block) else None
    reservation_id = (None if block_group else block) or config.capacity_reservation_id
    group_arn = config.capacity_reservation_group_arn or block_group
    if not (reservation_id or group_arn):
        return None
    # A group target launches On-Demand when the group has no free capacity, unless the launch
    # asks for reservations only ("You can only specify CapacityReservationPreference and
    # CapacityReservationTarget if the CapacityReservationPreference is
    # capacity-reservations-only", EC2 API, CapacityReservationSpecification). A targeted
    # reservation or Capacity Block never falls back: its launch fails when it is full, and so
    # does a group's on the capacity-block market ("If no matching capacity is available, the
    # instances fail to launch", cr-groups-launch.html).
    only = bool(config.capacity_reservation_group_arn) and not config.capacity_reservation_fallback
    return LT.CapacityReservationSpecificationProperty(
        capacity_reservation_preference="capacity-reservations-only" if only else None,
        capacity_reservation_target=LT.CapacityReservationTargetProperty(
            capacity_reservation_id=reservation_id,
            capacity_reservation_resource_group_arn=group_arn,
        ),
    )


def job_queue_name(config: ClusterConfig, pool: Pool | None = None) -> str:
    """Batch cannot add a fair-share policy to a queue or remove one ("After a job queue has a
    fair-share scheduling policy, it can be replaced but can't be removed", CreateJobQueue), so
    each mode has its own queue: changing fair_share replaces the queue under a new name. The
    default pool's queue keeps the single-pool stacks' name; the others carry their pool's."""
    base = f"{config.stack_name}-jobs"
    if pool is not None and not pool.default:
        base = f"{config.stack_name}-{pool.name}"
    return base + ("-fairshare" if config.fair_share else "")


def node_tags(config: ClusterConfig, pool: Pool | None = None) -> dict[str, str]:
    """Tags on every node (EC2 instance): the cluster's, a Name for the console, the user's."""
    name = f"{config.stack_name} node"
    if pool is not None and not pool.default:
        name = f"{config.stack_name} {pool.name} node"
    return {CLUSTER_TAG: config.stack_name, "Name": name, **config.tags}


def pool_construct_id(pool: Pool) -> str:
    """The construct a non-default pool's resources live in (PoolGpu for gpu, PoolCpuSpot for
    cpu-spot); the default pool's live in the stack itself, under the ids they always had."""
    return "Pool" + "".join(part.capitalize() for part in pool.name.split("-"))


def _only_on_replacement(resource: CfnResource) -> None:
    """Retained when replaced, deleted with the stack: cfn-lint's W3011 asks for both
    policies, which would leave the resource behind on `cdk destroy`."""
    reason = (
        "retained when a setting replaces it, so its jobs run on; deleted with the stack, "
        "where keeping it would leave the compute environment in use"
    )
    resource.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3011"]}})
    Validations.of(resource).acknowledge(
        Acknowledgment(id="CloudFormation-Validate::W3011", reason=reason)
    )


def _time_limit_actions(
    config: ClusterConfig,
) -> list[batch.CfnJobQueue.JobStateTimeLimitActionProperty]:
    """Cancel a job that waits at the head of the queue too long; a setting of 0 turns its
    reasons off. A cancelled head job lets the jobs behind it run."""
    return [
        batch.CfnJobQueue.JobStateTimeLimitActionProperty(
            state="RUNNABLE", action="CANCEL", reason=reason, max_time_seconds=minutes * 60
        )
        for key, reasons in TIME_LIMIT_REASONS.items()
        if (minutes := getattr(config, key))
        for reason in reasons
    ]


class ComputePool:
    """One pool: its launch template, placement group (EFA pools), compute environment and
    queue, in ``scope`` (the stack itself for the default pool, so its logical ids stay those
    of the single-pool stacks)."""

    def __init__(
        self,
        scope: Construct,
        pool: Pool,
        config: ClusterConfig,
        *,
        subnet: ec2.ISubnet,
        security_group: ec2.ISecurityGroup,
        user_data: str,
        powers_off: bool,
        instance_profile: iam.CfnInstanceProfile,
    ) -> None:
        self.scope, self.pool, self.config = scope, pool, config
        it = pool.instance
        placement_group = self._placement_group(config)
        self.launch_template = self._launch_template(config, security_group, user_data, powers_off)
        self.compute_environment = batch.CfnComputeEnvironment(
            scope,
            "ComputeEnvironment",
            type="MANAGED",
            state="ENABLED",
            # No serviceRole: Batch uses its service-linked role (AWSServiceRoleForBatch).
            compute_resources=batch.CfnComputeEnvironment.ComputeResourcesProperty(
                # Multi-node parallel jobs run on On-Demand EC2 only (no Spot, no Fargate); a
                # Spot pool takes single-node jobs only (pool_config.py refuses the rest). Spot's
                # price-capacity-optimized strategy keeps infrastructure updates (BEST_FIT
                # alone does not) and needs no Spot Fleet role (Batch API, ComputeResource).
                type="SPOT" if pool.spot else "EC2",
                allocation_strategy="SPOT_PRICE_CAPACITY_OPTIMIZED"
                if pool.spot
                else "BEST_FIT_PROGRESSIVE",
                # Warm nodes: Batch keeps min_nodes instances running even without jobs.
                minv_cpus=config.min_vcpus,
                maxv_cpus=config.max_vcpus,
                instance_types=[config.instance_type],
                # The nodes' tags: a change is an infrastructure update, never a replacement
                # (the compute environment's own Tags are create-only: infra/app.py).
                tags=node_tags(config, pool),
                subnets=[subnet.subnet_id],
                placement_group=placement_group,
                instance_role=instance_profile.attr_arn,
                ec2_configuration=[
                    batch.CfnComputeEnvironment.Ec2ConfigurationObjectProperty(
                        image_type=it.image_type
                    )
                ],
                # Infrastructure updates move the nodes to Batch's latest AMI for the type.
                update_to_latest_image_version=True,
                launch_template=batch.CfnComputeEnvironment.LaunchTemplateSpecificationProperty(
                    launch_template_id=self.launch_template.ref,
                    # Pinned: with $Latest, Batch would keep launching the old version.
                    version=self.launch_template.attr_latest_version_number,
                ),
            ),
            # Changes become infrastructure updates: nodes are replaced as their jobs finish
            # (up to update_timeout_minutes), never by a new compute environment that kills
            # every running job. Needs BEST_FIT_PROGRESSIVE and the service-linked role.
            replace_compute_environment=False,
            update_policy=batch.CfnComputeEnvironment.UpdatePolicyProperty(
                job_execution_timeout_minutes=config.update_timeout_minutes,
                terminate_jobs_on_update=False,
            ),
        )

    def add_queue(
        self, fallback: ComputePool | None, scheduling_policy: batch.CfnSchedulingPolicy | None
    ) -> None:
        """The pool's queue: its compute environment, then its fallback's.

        "Compute environments are tried in ascending order": when the first "can't provide a
        suitable compute resource, the scheduler attempts to run the job on the next compute
        environment" (Batch API, ComputeEnvironmentOrder.order; Batch user guide,
        compute_environments.html). A multi-node job is placed whole in one compute
        environment (each needs maxvCpus for the whole job, and "All node groups in a
        multi-node parallel job must use the same instance type", ContainerProperties), so a
        Capacity Block pool's jobs run in the block when it has room and on the fallback's
        On-Demand nodes when it has not (or before it starts, or after it ends).
        """
        config = self.config
        order = [self.compute_environment] + ([fallback.compute_environment] if fallback else [])
        self.queue_name = job_queue_name(config, self.pool)
        self.queue = batch.CfnJobQueue(
            self.scope,
            "JobQueue",
            job_queue_name=self.queue_name,
            priority=1,
            state="ENABLED",
            compute_environment_order=[
                batch.CfnJobQueue.ComputeEnvironmentOrderProperty(
                    compute_environment=ce.ref, order=index
                )
                for index, ce in enumerate(order, start=1)
            ],
            scheduling_policy_arn=scheduling_policy.ref if scheduling_policy else None,
            job_state_time_limit_actions=_time_limit_actions(config) or None,
        )
        # A queue replaced by a fair_share change keeps running the jobs it holds: CloudFormation
        # retains it instead of deleting it (DeleteJobQueue would terminate them). Deleting the
        # stack still deletes it: a retained queue would keep the compute environment in use.
        self.queue.cfn_options.update_replace_policy = CfnDeletionPolicy.RETAIN
        _only_on_replacement(self.queue)

    def describe(self) -> dict[str, Any]:
        """The pool as the Pools output gives it to the launcher (launcher.stack.outputs)."""
        it = self.pool.instance
        return {
            "name": self.pool.name,
            "queue_name": self.queue_name,
            "queue_arn": self.queue.ref,
            "instance_type": it.name,
            "max_nodes": self.config.max_nodes,
            "gpus_per_node": it.gpus,
            "vcpus_per_node": it.vcpus,
            "memory_mib_per_node": it.usable_memory_mib,
            "efa_interfaces": self.pool.efa_interfaces,
            "spot": self.pool.spot,
            "fallback": self.pool.fallback,
            "capacity_block_id": self.config.capacity_block_id,
            # What Batch sets AWS_BATCH_CE_NAME to in a job placed here (job_env_vars.html): the
            # prelude's checkpoint timer arms only in a block's own. CloudFormation's name, so it
            # stays the same as long as the compute environment does.
            "compute_environment_name": compute_environment_name(self.compute_environment),
        }

    def _placement_group(self, config: ClusterConfig) -> str | None:
        """The cluster placement group's name, or None.

        A Capacity Block already places its instances close together: EC2 says there is "no
        need to use a cluster placement group with a Capacity Block" (capacity-blocks-using.html),
        and a group of the stack's own would only constrain placement inside the block. An On-
        Demand Capacity Reservation created in a cluster placement group serves only instances
        launched into that group (EC2 user guide, cr-cpg.html): the configuration names it.
        """
        if config.placement_group == "none" or (
            config.placement_group == "auto"
            and (config.capacity_block_id or not self.pool.efa or self.pool.spot)
        ):
            return None
        if config.placement_group != "auto":
            return config.placement_group
        return ec2.CfnPlacementGroup(self.scope, "PlacementGroup", strategy="cluster").ref

    def _launch_template(
        self,
        config: ClusterConfig,
        security_group: ec2.ISecurityGroup,
        user_data: str,
        powers_off: bool,
    ) -> ec2.CfnLaunchTemplate:
        LT = ec2.CfnLaunchTemplate
        data = LT.LaunchTemplateDataProperty(
            metadata_options=LT.MetadataOptionsProperty(
                http_tokens="required",  # IMDSv2 only
                http_endpoint="enabled",
                # The host (the ECS agent runs in the host's network) needs IMDS; containers in
                # bridge mode are a hop further and stay out, awsvpc ones are blocked by the
                # agent (NODE_AGENT_SETTINGS). AWS's p6 Batch sample uses 1 too.
                http_put_response_hop_limit=1,
            ),
            user_data=Fn.base64(user_data),
            # A node whose boot powers it off (it could not mount FSx, infra/lustre.py) is gone,
            # not stopped with its volume billed: EC2's default is stop (RequestLaunchTemplateData
            # InstanceInitiatedShutdownBehavior); ParallelCluster's compute nodes terminate too.
            # Set only where the boot may power off, so an upgrade rolls no other cluster's nodes.
            instance_initiated_shutdown_behavior="terminate" if powers_off else None,
            block_device_mappings=[
                LT.BlockDeviceMappingProperty(
                    device_name="/dev/xvda",
                    ebs=LT.EbsProperty(
                        volume_size=config.root_volume_gib,
                        volume_type="gp3",
                        encrypted=True,
                        delete_on_termination=True,
                    ),
                )
            ],
            # A Capacity Block is launched into on its own market, by its reservation id (as in
            # AWS's p5 sample, awsome-distributed-training 0.aws-batch-distributed-training-p5).
            instance_market_options=LT.InstanceMarketOptionsProperty(market_type="capacity-block")
            if config.capacity_block_id
            else None,
            capacity_reservation_specification=_capacity_reservation(config),
            # Without EFA, a plain security group on the primary interface does the same job.
            network_interfaces=efa_network_interfaces(
                config.instance.efa_cards, security_group.security_group_id
            )
            if config.efa_interfaces
            else None,
            security_group_ids=None
            if config.efa_interfaces
            else [security_group.security_group_id],
        )
        return LT(self.scope, "LaunchTemplate", launch_template_data=data)
