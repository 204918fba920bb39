"""What the cluster stack builds from the configuration, without a synth: the nodes' network
interfaces, capacity target, agent settings, user data, tags and queue names (the functions of
the configuration in infra/cluster.py and infra/compute_pool.py; the templates themselves are
the `cdk` tier's)."""

from __future__ import annotations

import email

import pytest

from infra import cluster, compute_pool
from infra.config import load
from launcher.stack import catalog
from tests.conftest import POOLS, cdk_context

SG = "sg-0123456789abcdef0"
BLOCK = "cr-0123456789abcdef0"
GROUP = "arn:aws:resource-groups:us-east-1:123456789012:group/ml-reservations"
EFA_TYPES = sorted(n for n, t in catalog.CATALOG.items() if t.efa_capable)


@pytest.mark.parametrize("instance_type", EFA_TYPES)
def test_every_efa_device_of_the_type_and_one_ip_address_per_node(instance_type):
    """A node gets as many EFA devices as the job definition maps (uverbs0..N-1, one per EFA
    interface of the type) and one IP address: the primary interface (card 0, device 0)
    carries IP, every other one is EFA-only at device 0 of its own card (EC2 user guide,
    efa-acc-inst-types.html). Every interface is in the cluster's group (EFA traffic needs its
    group to admit itself) and goes with the instance."""
    it = catalog.CATALOG[instance_type]
    interfaces = compute_pool.efa_network_interfaces(it.efa_cards, SG)
    efa = [i for i in interfaces if i.interface_type in ("efa", "efa-only")]
    with_ip = [i for i in interfaces if i.interface_type != "efa-only"]
    assert len(efa) == it.efa_interfaces
    assert [(i.network_card_index, i.device_index) for i in with_ip] == [(0, 0)]
    assert sorted(i.network_card_index for i in interfaces) == list(range(len(interfaces)))
    assert {i.device_index for i in interfaces} == {0}
    assert all(i.groups == [SG] and i.delete_on_termination for i in interfaces)


def test_card_0_is_efa_with_ena_except_where_it_takes_no_efa_device():
    """P6-B300's "primary network card supports only an ENA network interface": a plain ENA
    primary there, "EFA with ENA" on card 0 of the others (efa-acc-inst-types.html)."""
    kinds = {
        name: [i.interface_type for i in compute_pool.efa_network_interfaces(t.efa_cards, SG)][:2]
        for name, t in catalog.CATALOG.items()
        if t.efa_capable and t.efa_interfaces > 1
    }
    assert kinds.pop("p6-b300.48xlarge") == ["interface", "efa-only"]
    assert set(map(tuple, kinds.values())) == {("efa", "efa-only")}


@pytest.mark.parametrize(
    ("overrides", "target", "preference"),
    [
        ({}, None, None),
        ({"capacity_reservation_id": BLOCK}, (BLOCK, None), None),
        ({"capacity_block_id": BLOCK}, (BLOCK, None), None),
        # A group of Capacity Blocks: the group's ARN, on the capacity-block market.
        ({"capacity_block_id": GROUP}, (None, GROUP), None),
        # A reservation group: reservations only, unless the launch may fall back to On-Demand.
        ({"capacity_reservation_group_arn": GROUP}, (None, GROUP), "capacity-reservations-only"),
        (
            {"capacity_reservation_group_arn": GROUP, "capacity_reservation_fallback": "true"},
            (None, GROUP),
            None,
        ),
    ],
)
def test_nodes_launch_into_the_one_capacity_target_configured(overrides, target, preference):
    """Nodes wait for the reservation (or block) they were given; only a reservation group
    with capacity_reservation_fallback launches On-Demand when it is full (EC2 API,
    CapacityReservationSpecification; EC2 user guide, cr-groups-launch.html)."""
    spec = compute_pool._capacity_reservation(load(cdk_context(**overrides)))
    if target is None:
        assert spec is None
        return
    assert spec is not None and spec.capacity_reservation_target is not None
    chosen = spec.capacity_reservation_target
    assert (chosen.capacity_reservation_id, chosen.capacity_reservation_resource_group_arn) == (
        target
    )
    assert spec.capacity_reservation_preference == preference


def test_nodes_block_imds_from_containers_and_refuse_privileged_ones_unless_allowed():
    """ECS_AWSVPC_BLOCK_IMDS keeps multi-node jobs' containers from the instance role;
    ECS_DISABLE_PRIVILEGED keeps a privileged job submitted past the launcher off the nodes
    (amazon-ecs-agent README), unless the stack allows privileged containers."""
    assert cluster.agent_settings(load(cdk_context())) == {
        "ECS_AWSVPC_BLOCK_IMDS": "true",
        "ECS_DISABLE_PRIVILEGED": "true",
    }
    allowed = load(cdk_context(allow_privileged="true"))
    assert cluster.agent_settings(allowed) == {"ECS_AWSVPC_BLOCK_IMDS": "true"}


def test_without_fsx_the_user_data_is_the_agent_settings_alone():
    message = email.message_from_string(cluster.node_user_data(load(cdk_context()), None))
    (part,) = message.get_payload()
    assert part.get_content_type() == "text/x-shellscript"
    assert part.get_payload().splitlines() == [
        "#!/bin/bash",
        "echo ECS_AWSVPC_BLOCK_IMDS=true >> /etc/ecs/ecs.config",
        "echo ECS_DISABLE_PRIVILEGED=true >> /etc/ecs/ecs.config",
    ]


def test_queue_names_follow_the_pool_and_the_fair_share_mode():
    """A queue cannot gain or lose a fair-share policy (CreateJobQueue), so each mode has a
    queue name of its own; the default pool's queue keeps the single-pool stacks' name."""
    shared = load(cdk_context(env="prod", **POOLS, stack_name="Team"))
    pools = {k: v for k, v in POOLS.items() if not k.startswith(("share_", "compute_res"))}
    plain = load(cdk_context(env="prod", **pools, fair_share="false"))
    assert [compute_pool.job_queue_name(plain, p) for p in plain.pool_list] == [
        "EfaBatch-jobs",
        "EfaBatch-cpu",
        "EfaBatch-debug",
        "EfaBatch-ondemand",
    ]
    assert compute_pool.job_queue_name(plain) == "EfaBatch-jobs"
    assert [compute_pool.job_queue_name(shared, p) for p in shared.pool_list] == [
        "Team-jobs-fairshare",
        "Team-cpu-fairshare",
        "Team-debug-fairshare",
        "Team-ondemand-fairshare",
    ]


def test_nodes_carry_the_cluster_tag_a_console_name_and_the_users_tags():
    config = load(cdk_context(env="prod", **POOLS, stack_name="Team", tags='{"team": "ml"}'))
    default, cpu = config.pool("train"), config.pool("cpu")
    assert compute_pool.node_tags(config, default) == {
        "efa-batch:cluster": "Team",
        "Name": "Team node",
        "team": "ml",
    }
    assert compute_pool.node_tags(config, cpu)["Name"] == "Team cpu node"
    assert [compute_pool.pool_construct_id(p) for p in config.pool_list] == [
        "PoolTrain",
        "PoolCpu",
        "PoolDebug",
        "PoolOndemand",
    ]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {},
            [
                ("CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY", 14400),
                ("MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE", 600),
                ("MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT", 600),
            ],
        ),
        (
            {"capacity_wait_minutes": "0"},
            [
                ("MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE", 600),
                ("MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT", 600),
            ],
        ),
        ({"capacity_wait_minutes": "0", "misconfigured_wait_minutes": "0"}, []),
    ],
)
def test_a_job_stuck_at_the_head_of_the_queue_is_cancelled_after_its_wait(overrides, expected):
    """Each wait cancels the RUNNABLE reasons it times (Batch user guide,
    job_stuck_in_runnable_time_limit_actions.html); 0 turns them off."""
    actions = compute_pool._time_limit_actions(load(cdk_context(**overrides)))
    assert {(a.state, a.action) for a in actions} <= {("RUNNABLE", "CANCEL")}
    assert [(a.reason, a.max_time_seconds) for a in actions] == expected
