"""Choosing a pool, without a stack: the job goes to the pool's queue with the pool's nodes,
and what the pool cannot run is refused in one line before any request exists."""

from __future__ import annotations

import dataclasses

import pytest

from devenv.clusters import cluster_info
from launcher.api import Cluster
from launcher.errors import UsageError
from launcher.job import jobdef
from launcher.job.jobspec import JobSpec
from launcher.job.validation import validate
from launcher.stack.cluster import ClusterInfo
from launcher.stack.outputs import PoolInfo
from tests.support.service_model import assert_valid

ARN = "arn:aws:batch:us-east-1:123456789012:job-queue/"


def pool(name: str, instance_type: str, max_nodes: int, **kwargs) -> PoolInfo:
    from launcher.stack import catalog

    it = catalog.CATALOG[instance_type]
    values = {
        "name": name,
        "queue_name": f"EfaBatch-{name}",
        "queue_arn": f"{ARN}EfaBatch-{name}",
        "instance_type": instance_type,
        "max_nodes": max_nodes,
        "gpus_per_node": it.gpus,
        "vcpus_per_node": it.vcpus,
        "memory_mib_per_node": it.usable_memory_mib,
        "efa_interfaces": it.efa_interfaces,
        "spot": False,
        "fallback": None,
    }
    return PoolInfo(**(values | kwargs))


def four_pools(share_identifiers: tuple[str, ...] = ()) -> ClusterInfo:
    """The pools of the issue (the tests' `POOLS` stack): an EFA pool in a Capacity Block with
    an On-Demand fallback, a small GPU pool, a CPU Spot pool."""
    info = cluster_info("p5.48xlarge", max_nodes=16, fair_share=True)
    pools = (
        pool("train", "p5.48xlarge", 16, fallback="ondemand"),
        pool("ondemand", "p5.48xlarge", 4),
        pool("debug", "g5.xlarge", 2, efa_interfaces=0),
        pool("cpu", "c7i.4xlarge", 32, spot=True, efa_interfaces=0),
    )
    return dataclasses.replace(
        info,
        pool_name="train",
        job_queue_name="EfaBatch-train",
        job_queue_arn=f"{ARN}EfaBatch-train",
        pools=pools,
        share_identifiers=share_identifiers,
    )


def spec(**kwargs) -> JobSpec:
    values = {"name": "prep", "command": ("python", "prep.py"), "image": "repo@sha256:ab"}
    return JobSpec(**(values | kwargs))


def resources(container: dict) -> dict[str, str]:
    return {r["type"]: r["value"] for r in container["resourceRequirements"]}


def test_a_job_goes_to_the_queue_and_nodes_of_the_pool_it_names():
    info = four_pools()
    cpu = jobdef.build(spec(pool="cpu"), info)
    assert cpu.submit["jobQueue"] == f"{ARN}EfaBatch-cpu"
    container = cpu.register["containerProperties"]
    assert resources(container) == {
        "VCPU": "16",
        "MEMORY": str(info.pool("cpu").memory_mib_per_node),
    }
    assert "devices" not in container.get("linuxParameters", {})  # no EFA on a CPU pool
    gang = jobdef.build(spec(pool="debug", nodes=2), info)
    (node,) = gang.register["nodeProperties"]["nodeRangeProperties"]
    assert node["container"]["instanceType"] == "g5.xlarge"
    assert resources(node["container"])["GPU"] == "1"
    default = jobdef.build(spec(nodes=2), info)  # no pool named: the default pool
    assert default.submit["jobQueue"] == f"{ARN}EfaBatch-train"
    for requests in (cpu, gang, default):
        assert_valid("batch", "RegisterJobDefinition", requests.register)
        assert_valid("batch", "SubmitJob", requests.submit | {"shareIdentifier": "x"})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"pool": "gpu"},
            "stack EfaBatch has no pool 'gpu'; its pools: train, ondemand, debug, cpu",
        ),
        (
            {"pool": "cpu", "nodes": 2},
            "--nodes 2: pool cpu of EfaBatch runs Spot Instances, where AWS Batch runs no "
            "multi-node job; use --pool train or ondemand or debug, or --nodes 1",
        ),
        (
            {"pool": "debug", "nodes": 3},
            "--nodes 3: pool debug of EfaBatch runs at most 2 g5.xlarge",
        ),
        ({"pool": "debug", "gpus_per_node": 2}, "--gpus-per-node 2: g5.xlarge has 1 GPUs"),
        ({"pool": "cpu", "gpus_per_node": 1}, "--gpus-per-node 1: c7i.4xlarge has 0 GPUs"),
        (
            {"pool": "cpu", "efa": "require"},
            "--efa require: EfaBatch has no EFA interfaces (c7i.4xlarge)",
        ),
        ({"pool": "ondemand", "nodes": 5}, "--nodes 5: pool ondemand of EfaBatch runs at most 4"),
    ],
)
def test_what_the_pool_cannot_run_is_refused_before_any_request(kwargs, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Cluster(four_pools()).dryrun(spec=spec(**kwargs))


def test_a_spot_pool_takes_one_node_jobs_and_arrays():
    info = four_pools()
    array = jobdef.build(spec(pool="cpu", array_size=100), info)
    assert array.register["type"] == "container"
    assert array.submit["arrayProperties"] == {"size": 100}
    assert array.submit["jobQueue"] == f"{ARN}EfaBatch-cpu"


def test_a_one_pool_stack_keeps_its_messages():
    with pytest.raises(UsageError, match="--nodes 5: EfaBatch runs at most 4 p4d.24xlarge nodes"):
        info = cluster_info("p4d.24xlarge", max_nodes=4)
        validate(spec(nodes=5), dataclasses.replace(info, pools=(info.current_pool,)))


TEAMS = ("vision", "nlp", "eval*")


@pytest.mark.parametrize(
    ("share_id", "refusal"),
    [
        ("vision", None),
        ("nlp", None),
        ("eval", None),  # the prefix itself starts with the prefix
        ("evalteam7", None),
        ("vison", "--share-id vison: the fair-share policy of EfaBatch weighs vision, nlp, eval*"),
        ("nlpx", "--share-id nlpx: the fair-share policy"),
        (None, "--share-id: the fair-share policy of EfaBatch weighs the teams vision, nlp, eval*"),
    ],
)
def test_a_share_id_is_one_the_policy_weighs(share_id, refusal):
    info = four_pools(TEAMS)
    job = spec(share_id=share_id, pool="cpu")
    if refusal is None:
        assert jobdef.build(job, info).submit["shareIdentifier"] == share_id
    else:
        with pytest.raises(UsageError, match=refusal.replace("*", r"\*")):
            jobdef.build(job, info)


def test_without_named_teams_any_share_id_runs_at_the_default_weight():
    info = four_pools()
    assert jobdef.build(spec(share_id="anyone"), info).submit["shareIdentifier"] == "anyone"
    assert jobdef.build(spec(), info).submit["shareIdentifier"] == "default"


def test_a_pool_view_keeps_where_jobs_run():
    cluster = Cluster(four_pools()).local("/tmp/efs-stand-in")
    cpu = cluster.in_pool("cpu")
    assert cpu.target.rehearsal and cpu.info.job_queue_name == "EfaBatch-cpu"
    assert cpu.target.jobs.queue == "EfaBatch-cpu"  # type: ignore[attr-defined]
    assert cluster.in_pool(None) is cluster and cluster.in_pool("train") is cluster
    assert cpu.platform == "linux/amd64"
    assert (
        Cluster(four_pools()).pool_of(dataclasses.replace(_job(), queue=f"{ARN}EfaBatch-debug"))
        == "debug"
    )


def _job():
    from launcher.job.info import JobInfo, JobState

    return JobInfo(job_id="j", name="n", state=JobState.RUNNING)


def test_a_check_of_a_pool_is_refused_like_a_job_before_anything_runs():
    with pytest.raises(UsageError, match="--nodes 2: pool cpu of EfaBatch runs Spot Instances"):
        Cluster(four_pools()).check(pool="cpu", nodes=2)
    with pytest.raises(UsageError, match="--share-id: the fair-share policy of EfaBatch weighs"):
        Cluster(four_pools(TEAMS)).check(pool="debug")
    with pytest.raises(UsageError, match="has no pool 'gpu'"):
        Cluster(four_pools()).check(pool="gpu")
