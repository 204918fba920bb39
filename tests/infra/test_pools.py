"""Compute pools on the synthesized stacks (issue 20): one launch template, compute environment
and queue per pool, the Capacity Block's on-demand fallback, a Spot pool, the upgrade from a
single-pool stack, and the deploy into moto read back by the launcher.

The variant (conftest ``POOLS``) is prod with four pools: ``train`` (the default pool, p5 in a
Capacity Block) with ``ondemand`` (p5 On-Demand) behind it, ``debug`` (one g5.xlarge GPU, no
EFA) and ``cpu`` (c7i on Spot). ``tests/infra/test_aws_rules.py`` holds each pool to every stack
rule; ``tests/infra/test_checks.py`` lints the variant with cfn-lint (and checkov), and the synth
itself runs cdk-nag.
"""

from __future__ import annotations

import copy
import json

import pytest

from infra.update_plan import of, plan
from launcher.stack.cluster import from_stack
from launcher.stack.outputs import OutputKey
from tests.conftest import ROOT, cdk_context
from tests.rules import compute_rules
from tests.rules.deployment import Deployment

pytestmark = pytest.mark.cdk  # every test synthesizes (the variant through its fixture)

PRE_POOLS = ROOT / "tests" / "fixtures" / "pre-pools"
CE = "AWS::Batch::ComputeEnvironment"
QUEUE = "AWS::Batch::JobQueue"
# What holds data or identity, or runs jobs: an upgrade must replace or remove none of it.
KEPT = (
    "AWS::EFS::FileSystem",
    "AWS::ECR::Repository",
    "AWS::IAM::Role",
    "AWS::EC2::Subnet",
    CE,
    QUEUE,
    "AWS::EC2::LaunchTemplate",
    "AWS::EC2::PlacementGroup",
    "AWS::Batch::SchedulingPolicy",
)


@pytest.fixture(scope="module")
def pools(synth_pools) -> Deployment:
    return Deployment(synth_pools.templates(), synth_pools.config)


def _pre_pools(name: str) -> dict[str, dict]:
    return {
        p.name.removesuffix(".template.json"): json.loads(p.read_text())
        for p in (PRE_POOLS / name).glob("*.template.json")
    }


def test_the_variant_has_the_pools_the_issue_names(synth_pools):
    by_name = {p.name: p for p in synth_pools.config.pool_list}
    assert list(by_name) == ["train", "cpu", "debug", "ondemand"]
    train, ondemand, debug, cpu = (by_name[n] for n in ("train", "ondemand", "debug", "cpu"))
    assert train.default and train.settings.capacity_block_id and train.efa
    assert train.fallback == "ondemand" and ondemand.settings.capacity_block_id is None
    assert ondemand.settings.instance_type == train.settings.instance_type and ondemand.efa
    assert debug.instance.gpus == 1 and not debug.efa and not debug.spot
    assert cpu.spot and not cpu.efa and cpu.instance.gpus == 0


def test_each_pool_has_its_own_launch_template_compute_environment_and_queue(pools):
    views = {p.name: pools.pool_deployment(p) for p in pools.cluster_config.pool_list}
    ces = {n: v.compute_environment.logical_id for n, v in views.items()}
    lts = {n: v.launch_template.logical_id for n, v in views.items()}
    queues = {n: v.job_queue.logical_id for n, v in views.items()}
    for found in (ces, lts, queues):
        assert len(set(found.values())) == 4, found
    # The default pool keeps the single-pool stacks' logical ids.
    assert (ces["train"], lts["train"], queues["train"]) == (
        "ComputeEnvironment",
        "LaunchTemplate",
        "JobQueue",
    )
    # The Capacity Block first, On-Demand after (ComputeEnvironmentOrder, ascending).
    order = views["train"].job_queue.props["ComputeEnvironmentOrder"]
    assert [(o["Order"], o["ComputeEnvironment"]["Ref"]) for o in order] == [
        (1, ces["train"]),
        (2, ces["ondemand"]),
    ]
    # A placement group for the one EFA pool outside a Capacity Block, and no other.
    (group,) = pools.of_type("AWS::EC2::PlacementGroup")
    placed = {
        n: v.compute_environment.props["ComputeResources"].get("PlacementGroup")
        for n, v in views.items()
    }
    assert placed == {
        "train": None,
        "ondemand": {"Ref": group.logical_id},
        "debug": None,
        "cpu": None,
    }
    # EFA interfaces on the EFA pools only; plain groups on the others.
    assert {n: len(v.interfaces) for n, v in views.items()} == {
        "train": 32,
        "ondemand": 32,
        "debug": 0,
        "cpu": 0,
    }
    cpu = views["cpu"].compute_environment.props["ComputeResources"]
    assert (cpu["Type"], cpu["AllocationStrategy"]) == ("SPOT", "SPOT_PRICE_CAPACITY_OPTIMIZED")
    assert "SpotIamFleetRole" not in cpu  # create-only, and only BEST_FIT needs it
    # Every pool's nodes block awsvpc containers from IMDS and take IMDSv2 only.
    for view in views.values():
        assert compute_rules.job_containers_cannot_reach_the_instance_role(view) == []


def test_the_fair_share_policy_carries_the_team_weights(pools):
    (policy,) = pools.of_type("AWS::Batch::SchedulingPolicy")
    fair = policy.props["FairsharePolicy"]
    assert fair["ShareDecaySeconds"] == 86400 and fair["ComputeReservation"] == 10
    assert fair["ShareDistribution"] == [
        {"ShareIdentifier": "eval*", "WeightFactor": 2},
        {"ShareIdentifier": "nlp", "WeightFactor": 0.5},
        {"ShareIdentifier": "vision", "WeightFactor": 1},
    ]
    policy_ref = {"Ref": policy.logical_id}
    for name in ("train", "ondemand", "debug", "cpu"):
        queue = pools.pool_deployment(name).job_queue
        assert queue.props["SchedulingPolicyArn"] == policy_ref
        assert queue.props["JobQueueName"].endswith("-fairshare")


def test_the_rules_catch_a_reversed_order_a_spot_fallback_and_a_shared_placement_group(pools):
    templates = copy.deepcopy(pools.templates)
    stack = pools.cluster_config.stack_name
    resources = templates[stack]["Resources"]
    train = pools.pool_deployment("train")
    order = resources[train.job_queue.logical_id]["Properties"]["ComputeEnvironmentOrder"]
    order[0]["Order"], order[1]["Order"] = 2, 1
    broken = Deployment(templates, pools.cluster_config, "train")
    assert compute_rules.job_queue_feeds_the_compute_environment(broken) == [
        "the queue does not feed exactly the pool's compute environment, then its fallback's"
    ]
    cpu = pools.pool_deployment("cpu").compute_environment.logical_id
    resources[cpu]["Properties"]["ComputeResources"]["Type"] = "EC2"
    assert compute_rules.compute_environment_runs_multi_node_jobs_in_one_placement_group(
        Deployment(templates, pools.cluster_config, "cpu")
    ) == ["not a MANAGED, ENABLED SPOT compute environment"]
    ondemand = pools.pool_deployment("ondemand").compute_environment.logical_id
    group = resources[ondemand]["Properties"]["ComputeResources"]["PlacementGroup"]
    resources[cpu]["Properties"]["ComputeResources"]["PlacementGroup"] = group
    assert "a placement group where none is wanted (a Capacity Block, no EFA, Spot, none)" in (
        compute_rules.compute_environment_runs_multi_node_jobs_in_one_placement_group(
            Deployment(templates, pools.cluster_config, "cpu")
        )
    )


# --- upgrading a single-pool stack ---------------------------------------------------------------


def _synth(tmp_path_factory, **context) -> dict[str, dict]:
    from devenv.synth import synth_app

    assembly, _ = synth_app(cdk_context(**context), tmp_path_factory.mktemp("pools-upgrade"))
    return {s.stack_name: s.template for s in assembly.stacks}


# What this version changes on every cluster besides pools, in place: the instance role loses
# AmazonSSMManagedInstanceCore for Session Manager's own statement (tests/rules/data_rules.py,
# instance_role_reads_no_data_or_secrets).
SINCE_POOLS = {
    ("AWS::IAM::Role", "update", ("ManagedPolicyArns",)),
    ("AWS::IAM::Policy", "add", ()),
}


def _since_pools(change) -> bool:
    if change.logical_id.startswith("FunctionPayloads"):
        # Every cluster gains the function bucket and its policy (infra/function_payloads.py)...
        return change.action == "add"
    if change.logical_id.startswith("JobRoleDefaultPolicy"):
        # ... and its job role the payloads' statement, in place.
        return (change.type, change.action, change.reasons) == (
            "AWS::IAM::Policy",
            "update",
            ("PolicyDocument.Statement",),
        )
    if change.logical_id.startswith("NodeReplacer"):
        # Every cluster gains the node replacer (infra/node_replacer.py): added, and the logs
        # key's policy names its log group, in place.
        return change.action == "add"
    if change.logical_id.startswith("LogsKey"):
        return (change.type, change.action, change.reasons) == (
            "AWS::KMS::Key",
            "update",
            ("KeyPolicy.Statement",),
        )
    return change.logical_id.startswith("InstanceRole") and (
        (change.type, change.action, change.reasons) in SINCE_POOLS
    )


def test_the_same_settings_change_no_resource(tmp_path_factory):
    """The top-level keys are the default pool: a single-pool stack's templates come out with
    the same resources (outputs aside: the schema version and the pools)."""
    for name, context in (("demo", {}), ("prod", {"env": "prod"})):
        changes = plan(_pre_pools(name), _synth(tmp_path_factory, **context))
        assert [c for c in changes if c.type != "Export" and not _since_pools(c)] == [], name


def test_adding_pools_to_a_deployed_cluster_replaces_nothing(synth_pools):
    """prod in a Capacity Block, as deployed before pools, gets three pools, a fallback and
    team weights: everything it had is updated in place, nothing is replaced or removed."""
    changes = plan(_pre_pools("prod-capacity-block"), synth_pools.templates())
    assert of(changes, "refuse", "replace", "remove") == []
    updated = {
        (c.type, c.logical_id): c.reasons for c in of(changes, "update") if not _since_pools(c)
    }
    assert set(updated) <= {
        (QUEUE, "JobQueue"),
        ("AWS::Batch::SchedulingPolicy", "FairSharePolicy"),
        (CE, "ComputeEnvironment"),
    }
    assert updated[(QUEUE, "JobQueue")] == ("ComputeEnvironmentOrder",)
    # min_nodes 2 -> 0 is a scaling update; nothing rolls the nodes of the running pool.
    assert all(
        r.startswith("ComputeResources.MinvCpus")
        for r in updated.get((CE, "ComputeEnvironment"), ())
    )
    added = {c.type for c in of(changes, "add") if not _since_pools(c)}
    assert added == {CE, QUEUE, "AWS::EC2::LaunchTemplate", "AWS::EC2::PlacementGroup"}
    assert [c for c in changes if c.type in KEPT and c.action in ("replace", "remove")] == []


# --- deployed into moto, read by the launcher ----------------------------------------------------


def _physical_ids(cf, stack: str, type_: str) -> dict[str, str]:
    resources = cf.describe_stack_resources(StackName=stack)["StackResources"]
    return {
        r["LogicalResourceId"]: r["PhysicalResourceId"]
        for r in resources
        if r["ResourceType"] == type_
    }


def test_pools_deploy_into_moto_and_the_launcher_reads_every_pool(synth_pools, moto_server, pools):
    config = synth_pools.config
    moto_server.reset()
    outputs = moto_server.deploy(synth_pools.outdir, synth_pools.stack_names)[config.stack_name]
    assert set(outputs) == {k.value for k in OutputKey}
    cf = moto_server.client("cloudformation")
    (stack,) = cf.describe_stacks(StackName=config.stack_name)["Stacks"]
    info = from_stack(stack)
    assert info.pool_name == "train" and info.pool_names == ("train", "cpu", "debug", "ondemand")
    assert info.share_identifiers == ("vision", "nlp", "eval*")

    batch = moto_server.client("batch")
    queues = {q["jobQueueName"]: q for q in batch.describe_job_queues()["jobQueues"]}
    ces = {
        c["computeEnvironmentArn"]: c
        for c in batch.describe_compute_environments()["computeEnvironments"]
    }
    for pool in info.pools:
        view = info.pool(pool.name)
        queue = queues[view.job_queue_name]
        assert view.job_queue_arn == queue["jobQueueArn"]
        first = min(queue["computeEnvironmentOrder"], key=lambda o: o["order"])
        resources = ces[first["computeEnvironment"]]["computeResources"]
        assert resources["instanceTypes"] == [view.instance_type]
        assert resources["maxvCpus"] == view.max_nodes * view.vcpus_per_node
        assert resources["type"] == ("SPOT" if pool.spot else "EC2")
        expected = config.pool(pool.name)
        assert (view.efa_interfaces, view.gpus_per_node) == (
            expected.efa_interfaces,
            expected.instance.gpus,
        )
    train = queues[info.job_queue_name]
    assert len(train["computeEnvironmentOrder"]) == 2
    assert info.job_queue_arn == info.pool("train").job_queue_arn


def test_a_change_to_one_pool_touches_that_pool_only(synth_pools, tmp_path_factory):
    """A pool's keys do to it what the top-level keys do to the default pool (infra/updates.py):
    another instance type rolls that pool's nodes in place; the other pools are untouched."""
    from tests.conftest import POOLS

    pools = json.loads(POOLS["pools"])
    pools["debug"]["instance_type"] = "g5.2xlarge"
    changed = _synth(tmp_path_factory, env="prod", **{**POOLS, "pools": json.dumps(pools)})
    changes = plan(synth_pools.templates(), changed)
    assert of(changes, "refuse", "replace", "remove", "add") == []
    debug = Deployment(synth_pools.templates(), synth_pools.config, "debug")
    assert {c.logical_id for c in changes if c.type != "Export"} == {
        debug.compute_environment.logical_id
    }
    (ce,) = [c for c in changes if c.type == CE]
    assert ce.reasons == ("ComputeResources.InstanceTypes", "ComputeResources.MaxvCpus")


def test_turning_fair_share_off_gives_every_pool_a_new_queue_and_keeps_the_old_ones(
    synth_pools, tmp_path_factory
):
    """Batch cannot remove a queue's fair-share policy: each pool's queue is replaced under its
    mode's name, and the old one is retained with its jobs (infra/compute_pool.py
    job_queue_name)."""
    from tests.conftest import POOLS

    fifo = {k: v for k, v in POOLS.items() if not k.startswith(("share_", "compute_"))}
    changes = plan(
        synth_pools.templates(), _synth(tmp_path_factory, env="prod", fair_share="false", **fifo)
    )
    assert of(changes, "refuse") == []
    replaced = of(changes, "replace")
    assert {c.type for c in replaced} == {QUEUE}
    assert len(replaced) == 4 and all(c.retained for c in replaced)
    assert [c for c in of(changes, "remove") if c.type != "AWS::Batch::SchedulingPolicy"] == []
