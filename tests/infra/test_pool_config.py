"""Pools in the configuration and in the outputs contract, without a synth: each wrong setting
of a pool, its fallback or the queues' fair share is refused in one line naming it (word for
word, and both ends of each range load), each pool's view of the configuration, and the launcher
reads every pool a stack describes. The whole-line refusals and the ends of the ranges were added
where mutation testing (``make mutation``) found changes to infra/pool_config.py's checks that
no test noticed."""

from __future__ import annotations

import json

import pytest

from devenv.clusters import cluster_info
from infra.config import ConfigError, load
from launcher.errors import UsageError
from launcher.stack import catalog
from launcher.stack.cluster import from_stack
from launcher.stack.outputs import OutputKey
from tests.conftest import POOLS, cdk_context
from tests.support.config_refusal import refusal

CPU_SPOT = {"instance_type": "c7i.4xlarge", "max_nodes": 8, "spot": True}
FAIR = {"fair_share": "true"}
SPOT_WHY = (
    "a Spot pool runs single-node jobs only: multi-node parallel jobs aren't supported on Spot "
    "Instances (Batch API, ComputeResource.type; Batch user guide, mnp-ce.html)"
)


def config(**overrides):
    return load(cdk_context(**overrides))


def pools(**settings) -> str:
    return json.dumps(settings)


def weights(**teams) -> str:
    return json.dumps(teams)


def test_the_top_level_keys_are_the_default_pool():
    c = config()
    (pool,) = c.pool_list
    assert (pool.name, pool.default, pool.settings.instance_type, pool.efa) == (
        "default",
        True,
        c.instance_type,
        True,
    )
    assert c.for_pool(pool) == c


def test_pools_from_cdk_json_and_from_the_command_line_agree():
    as_json = config(env="prod", **POOLS)
    as_object = config(env="prod", **{**POOLS, "pools": json.loads(POOLS["pools"])})
    assert as_json.pools == as_object.pools
    assert [p.name for p in as_json.pool_list] == ["train", "cpu", "debug", "ondemand"]
    assert as_json.share_weights == {"vision": 1.0, "nlp": 0.5, "eval*": 2.0}


def test_efa_follows_the_type_and_spot_when_unset():
    c = config(
        pools={
            "cpu": CPU_SPOT,
            "big": {"instance_type": "c7i.48xlarge"},
            "small": {"instance_type": "g5.xlarge"},
        }
    )
    assert {p.name: p.efa for p in c.pool_list} == {
        "default": True,
        "big": True,
        "cpu": False,
        "small": False,
    }


def test_each_pools_view_has_its_own_fallback_and_no_pools():
    """What each pool's compute environment and queue are built from (infra/compute_pool.py)."""
    config = load(
        cdk_context(
            fallback="b",
            pools=pools(
                b={"instance_type": "p4d.24xlarge"},
                c={"instance_type": "p4d.24xlarge", "fallback": "b", "max_nodes": 3},
            ),
        )
    )
    views = {p.name: config.for_pool(p) for p in config.pool_list}
    assert {n: (v.fallback, dict(v.pools), v.max_nodes) for n, v in views.items()} == {
        "default": ("b", {}, 2),
        "b": (None, {}, 4),
        "c": ("b", {}, 3),
    }


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"pools": {"cpu": {**CPU_SPOT, "instance_type": "c7i.48xlarge", "efa": True}}},
            "pools.cpu.efa: true with spot; a Spot pool runs single-node jobs only: multi-node "
            "parallel jobs aren't supported on Spot Instances",
        ),
        (
            {"pools": {"cpu": {**CPU_SPOT, "capacity_reservation_id": "cr-0123456789abcdef0"}}},
            "pools.cpu.capacity_reservation_id: with spot",
        ),
        (
            {"pools": {"cpu": CPU_SPOT}, "fallback": "cpu"},
            "fallback: pool cpu has c7i.4xlarge, not p4d.24xlarge",
        ),
        (
            {
                "pools": {"spot": {**CPU_SPOT, "instance_type": "p4d.24xlarge", "efa": False}},
                "efa": False,
                "fallback": "spot",
            },
            "fallback: pool spot is Spot, and multi-node parallel jobs aren't supported",
        ),
        ({"fallback": "nowhere"}, "fallback: 'nowhere' is not another pool"),
        (
            {"pools": {"default": {"instance_type": "g5.xlarge"}}},
            "pools.default: the top-level keys (instance_type, max_nodes, ...) describe the "
            "default pool",
        ),
        ({"pools": {"GPU": {"instance_type": "g5.xlarge"}}}, "pools: 'GPU' is malformed"),
        ({"pools": {"gpu": {"max_nodes": 2}}}, "pools.gpu.instance_type: missing"),
        ({"pools": {"gpu": {"instance_type": "g5.xlarge", "nodes": 2}}}, "pools.gpu.nodes"),
        (
            {"pools": {"gpu": {"instance_type": "g5.xlarge", "efa": True}}},
            "pools.gpu.instance_type: g5.xlarge has no EFA; set pools.gpu.efa=false",
        ),
        (
            {"pools": {"gpu": {"instance_type": "g5.xlarge", "min_nodes": 3, "max_nodes": 2}}},
            "pools.gpu.min_nodes: 3; allowed: 0-2",
        ),
        (
            {"pools": {"gpu": {"instance_type": "g5.xlarge", "capacity_block_id": "cr-1"}}},
            "pools.gpu.capacity_block_id: 'cr-1' is malformed",
        ),
        ({"share_weights": {"vision": 1}}, "share_weights: a fair-share setting; set fair_share"),
        ({"fair_share": True, "share_weights": {"a-b": 1}}, "share_weights: 'a-b' is malformed"),
        (
            {"fair_share": True, "share_weights": {"vision": 0}},
            "share_weights: vision=0.0; allowed weights: 0.0001-999.9999",
        ),
        (
            {"fair_share": True, "share_weights": {"team*": 1, "team1": 1}},
            "share_weights: team1 overlaps team*",
        ),
        ({"fair_share": True, "share_decay_seconds": 604801}, "share_decay_seconds: 604801"),
        ({"fair_share": True, "compute_reservation": 100}, "compute_reservation: 100"),
    ],
)
def test_wrong_pool_settings_are_refused_naming_the_key(overrides, message):
    with pytest.raises(ConfigError) as caught:
        config(**overrides)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            {"share_decay_seconds": "604801", **FAIR},
            "share_decay_seconds: 604801; allowed: 0-604800 (AWS Batch "
            "FairsharePolicy.shareDecaySeconds; 0 is the 600 s minimum)",
        ),
        (
            {"compute_reservation": "100", **FAIR},
            "compute_reservation: 100; allowed: 0-99 (AWS Batch "
            "FairsharePolicy.computeReservation, a percentage)",
        ),
        (
            {"share_weights": json.dumps({f"t{i}": 1 for i in range(501)}), **FAIR},
            "share_weights: 501 share identifiers; a queue has at most 500 "
            "(CreateJobQueue.schedulingPolicyArn)",
        ),
        (
            {"share_weights": weights(**{"bad-team": 1}), **FAIR},
            "share_weights: 'bad-team' is malformed; expected share identifiers of 1-255 "
            "letters and digits, optionally ending in * (a prefix), as keys",
        ),
        (
            {"share_weights": weights(team=0), **FAIR},
            "share_weights: team=0.0; allowed weights: 0.0001-999.9999 (AWS Batch "
            "ShareAttributes.weightFactor; lower gets more)",
        ),
        (
            {"share_weights": weights(**{"team*": 1, "team2": 1}), **FAIR},
            "share_weights: team2 overlaps team*; the identifiers of a fair-share policy can't "
            "overlap (ShareAttributes.shareIdentifier)",
        ),
        (
            {"share_weights": weights(team=1)},
            "share_weights: a fair-share setting; set fair_share=true (or leave it out)",
        ),
        (
            {"pools": pools(spot={"instance_type": "c5n.18xlarge", "spot": True, "efa": True})},
            f"pools.spot.efa: true with spot; {SPOT_WHY}, and EFA serves those",
        ),
        (
            {
                "pools": pools(
                    spot={
                        "instance_type": "c5n.18xlarge",
                        "spot": True,
                        "capacity_reservation_id": "cr-0123456789abcdef0",
                    }
                )
            },
            "pools.spot.capacity_reservation_id: with spot; Spot Instances do not launch into "
            "Capacity Reservations or Capacity Blocks",
        ),
        (
            {
                "pools": pools(
                    spot={"instance_type": "c5n.18xlarge", "spot": True, "placement_group": "pg1"}
                )
            },
            f"pools.spot.placement_group: 'pg1' with spot; {SPOT_WHY}, and a cluster placement "
            "group serves those: use auto or none",
        ),
        (
            {"pools": pools(Bad={"instance_type": "c5n.18xlarge"})},
            "pools: 'Bad' is malformed; expected pool names of 1-24 lower-case letters, digits "
            "and hyphens, starting with a letter",
        ),
        (
            {"default_pool": "Bad"},
            "default_pool: 'Bad' is malformed; expected pool names of 1-24 lower-case letters, "
            "digits and hyphens, starting with a letter",
        ),
        (
            {"fallback": "nope", "pools": pools(b={"instance_type": "p4d.24xlarge"})},
            "fallback: 'nope' is not another pool; allowed: b",
        ),
        (
            {
                "pools": pools(
                    a={"instance_type": "p4d.24xlarge"},
                    b={"instance_type": "p4d.24xlarge", "fallback": "zz"},
                )
            },
            "pools.b.fallback: 'zz' is not another pool; allowed: default, a",
        ),
        (
            {"fallback": "b", "pools": pools(b={"instance_type": "p5.48xlarge"})},
            "fallback: pool b has p5.48xlarge, not p4d.24xlarge; a queue's multi-node jobs are "
            "sized for one instance type (Batch: all node groups use the same instance type)",
        ),
        (
            {"fallback": "b", "pools": pools(b={"instance_type": "p4d.24xlarge", "efa": False})},
            "fallback: pool b has EFA off, this pool on; a job's devices must exist on both",
        ),
        (
            {
                "efa": "false",
                "pools": pools(a={"instance_type": "p4d.24xlarge", "fallback": "default"}),
            },
            "pools.a.fallback: pool default has EFA off, this pool on; a job's devices must "
            "exist on both",
        ),
        (
            {
                "fallback": "b",
                "pools": pools(
                    b={"instance_type": "p4d.24xlarge", "fallback": "c"},
                    c={"instance_type": "p4d.24xlarge"},
                ),
            },
            "fallback: pool b has a fallback of its own; one step only (a queue takes at most "
            "three compute environments, CreateJobQueue)",
        ),
        (
            {
                "efa": "false",
                "fallback": "b",
                "pools": pools(b={"instance_type": "p4d.24xlarge", "spot": True, "efa": False}),
            },
            "fallback: pool b is Spot, and multi-node parallel jobs aren't supported on Spot "
            "Instances (Batch API, ComputeResource.type)",
        ),
    ],
)
def test_a_pool_or_fair_share_refusal_is_one_whole_line(overrides, line):
    """``cdk synth`` stops with this line: the pool's key, the value and what is allowed, all
    of it (a guard against a refusal that names the wrong key or loses its advice)."""
    assert refusal(**overrides) == line


def test_a_bad_fallback_of_a_later_pool_is_found_after_pools_without_one():
    """The default pool names no fallback; pool b's is checked all the same."""
    line = refusal(
        pools=pools(
            a={"instance_type": "p4d.24xlarge"},
            b={"instance_type": "p4d.24xlarge", "fallback": "a", "efa": False},
        )
    )
    assert (
        line == "pools.b.fallback: pool a has EFA on, this pool off; a job's devices must "
        "exist on both"
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {"share_decay_seconds": "0", **FAIR},
        {"share_decay_seconds": "604800", **FAIR},
        {"compute_reservation": "99", **FAIR},
        {"share_weights": weights(a=0.0001, b=999.9999), **FAIR},
        {"share_weights": json.dumps({f"t{i}": 1 for i in range(500)}), **FAIR},
        {
            "pools": pools(
                spot={"instance_type": "c5n.18xlarge", "spot": True, "placement_group": "none"}
            )
        },
    ],
)
def test_both_ends_of_every_pool_and_fair_share_range_load(overrides):
    """What AWS takes, the stack takes: an end of a range refused is a cluster that cannot be
    configured as the user needs."""
    load(cdk_context(**overrides))


def test_the_catalog_has_cpu_types_with_efa_on_the_largest_only():
    for family, gib in (("c7i", 2), ("m7i", 4), ("r7i", 8)):
        sizes = {n: t for n, t in catalog.CATALOG.items() if n.startswith(family + ".")}
        assert len(sizes) == 11
        assert all(t.gpus == 0 and t.memory_gib == t.vcpus * gib for t in sizes.values())
        assert {n for n, t in sizes.items() if t.efa_capable} == {
            f"{family}.48xlarge",
            f"{family}.metal-48xl",
        }


# --- the outputs contract ------------------------------------------------------------------------


def _stack(**values):
    outputs = {k.value: k.example for k in OutputKey}
    outputs.update(values)
    return {
        "StackName": "EfaBatch",
        "StackStatus": "UPDATE_COMPLETE",
        "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()],
    }


def test_a_pool_view_submits_to_that_pool_and_keeps_the_rest():
    info = from_stack(_stack())
    assert info.pool_names == ("default", "cpu") and info.pool(None) is info
    cpu = info.pool("cpu")
    assert (cpu.pool_name, cpu.job_queue_name, cpu.instance_type, cpu.vcpus_per_node) == (
        "cpu",
        "EfaBatch-cpu",
        "c7i.4xlarge",
        16,
    )
    assert (cpu.gpus_per_node, cpu.efa_interfaces, cpu.current_pool.spot) == (0, 0, True)
    assert cpu.job_queue_arn.endswith("job-queue/EfaBatch-cpu")
    assert (cpu.repository_uri, cpu.job_role_arn) == (info.repository_uri, info.job_role_arn)
    assert cpu.pool("default").job_queue_name == info.job_queue_name


def test_an_unknown_pool_is_refused_naming_the_pools():
    with pytest.raises(UsageError, match="has no pool 'gpu'; its pools: default, cpu"):
        from_stack(_stack()).pool("gpu")


def test_the_pools_output_parses_what_cdk_renders():
    """CDK's JSON leaves out null values (no fallback); malformed pools are refused."""
    pools = json.loads(OutputKey.POOLS.example)
    for p in pools:
        p.pop("fallback")
    info = from_stack(_stack(Pools=json.dumps(pools)))
    assert [p.fallback for p in info.pools] == [None, None]
    with pytest.raises(UsageError, match="output Pools is malformed"):
        from_stack(_stack(Pools=json.dumps([{"name": "x"}])))
    with pytest.raises(UsageError, match="output Pools is not JSON"):
        from_stack(_stack(Pools="default"))


@pytest.mark.parametrize(
    ("version", "advice"),
    [
        ("4", "redeploy the infra of this launcher's version"),
        ("6", "upgrade the launcher to the infra's version"),
    ],
)
def test_a_stack_of_another_schema_says_which_side_to_update(version, advice):
    with pytest.raises(UsageError, match=f"schema version {version}; .*: {advice}"):
        from_stack(_stack(SchemaVersion=version))


def test_the_fixture_cluster_describes_its_default_pool():
    info = cluster_info("g5.xlarge", efa=False, max_nodes=2)
    assert info.current_pool.instance_type == "g5.xlarge"
    assert (info.current_pool.max_nodes, info.current_pool.efa_interfaces) == (2, 0)


def test_a_cluster_info_survives_asdict_as_another_process_gets_it():
    import dataclasses

    from launcher.stack.cluster import ClusterInfo

    info = from_stack(_stack())
    again = ClusterInfo(**json.loads(json.dumps(dataclasses.asdict(info))))
    assert (again.pools, again.share_identifiers) == (info.pools, info.share_identifiers)
    assert again.pool("cpu").job_queue_name == "EfaBatch-cpu"
