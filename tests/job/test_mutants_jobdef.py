"""The request builder, field by field: every variable a node gets, each node group's own
image, command and GPUs, the refusals word for word, and the job definition readers the local
backend and ``resume`` use (the mutants ``make mutation`` found alive in launcher/job/jobdef.py)."""

from __future__ import annotations

import dataclasses

import pytest

from devenv.clusters import cluster_info
from launcher.errors import UsageError
from launcher.job import jobdef
from launcher.job.jobspec import JobSpec, Mount, NodeGroup, Secret, Tmpfs, Ulimit
from launcher.job.shapes import is_single
from launcher.stack.outputs import PoolInfo
from launcher.stack.secrets import SecretRef

FSX = "fs-0aaaabbbbccccdddd"
NCCL = {
    "FI_PROVIDER": "efa",
    "NCCL_SOCKET_IFNAME": "^lo,docker,veth,ecs",
    "NCCL_DEBUG": "INFO",
    "NCCL_DEBUG_SUBSYS": "INIT,NET",
    "NCCL_DEBUG_FILE": "/tmp/launcher-nccl/%h.%p.log",
}


def spec(**kwargs) -> JobSpec:
    values = {"name": "train", "command": ("python", "train.py"), "image": "repo@sha256:ab"}
    return JobSpec(**(values | kwargs))


def env_of(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["environment"]}


def gpus_of(container: dict) -> str | None:
    return next((r["value"] for r in container["resourceRequirements"] if r["type"] == "GPU"), None)


def refusal(job: JobSpec, cluster=None) -> str:
    with pytest.raises(UsageError) as info:
        jobdef.build(job, cluster or cluster_info())
    return str(info.value)


def test_each_node_group_gets_its_own_image_command_gpus_and_variables():
    """A two-group job (a parameter server and its trainers) on p5 with EFA, restarts, EFS
    and FSx: every variable of each group's container, as the prelude and NCCL read them."""
    job = spec(
        name="pipe",
        nodes=4,
        restarts=True,
        mounts=(Mount("efs", "/data"), Mount("fsx", "/lustre", readonly=True)),
        groups=(
            NodeGroup(
                0,
                0,
                image="repo@sha256:cd",
                command=("python", "serve.py"),
                gpus_per_node=2,
                env=(("ROLE", "ps"),),
                name="server",
            ),
            NodeGroup(1, 3, name="trainers"),
        ),
    )
    requests = jobdef.build(job, cluster_info("p5.48xlarge", fsx_file_system_id=FSX))
    server, trainers = requests.register["nodeProperties"]["nodeRangeProperties"]
    common = NCCL | {
        "FI_EFA_USE_DEVICE_RDMA": "1",
        "LAUNCHER_EFA": "require",
        "LAUNCHER_EFA_DEVICES": "32",
        "LAUNCHER_EFS": "/data",
        "LAUNCHER_INSTANCE_TYPE": "p5.48xlarge",
        "LAUNCHER_FSX": "/lustre",
        "LAUNCHER_MAIN_PORT": "29500",
        "LAUNCHER_NNODES": "4",
        "LAUNCHER_RESTARTS": "on",
    }
    assert (server["targetNodes"], trainers["targetNodes"]) == ("0:0", "1:3")
    assert env_of(server["container"]) == common | {
        "LAUNCHER_GPUS_PER_NODE": "2",
        "LAUNCHER_GROUP": "server",
        "LAUNCHER_GROUP_FIRST_NODE": "0",
        "ROLE": "ps",
    }
    assert env_of(trainers["container"]) == common | {
        "LAUNCHER_GPUS_PER_NODE": "8",
        "LAUNCHER_GROUP": "trainers",
        "LAUNCHER_GROUP_FIRST_NODE": "1",
    }
    assert server["container"]["image"] == "repo@sha256:cd"
    assert server["container"]["command"][3:] == ["launcher", "python", "serve.py"]
    assert trainers["container"]["image"] == "repo@sha256:ab"
    assert trainers["container"]["command"][3:] == ["launcher", "python", "train.py"]
    assert (gpus_of(server["container"]), gpus_of(trainers["container"])) == ("2", "8")
    assert server["container"]["mountPoints"] == [
        {"sourceVolume": "efs", "containerPath": "/data", "readOnly": False},
        {"sourceVolume": "fsx", "containerPath": "/lustre", "readOnly": True},
    ]
    assert requests.register["propagateTags"] is True


def test_a_job_without_groups_names_none_and_a_read_only_efs_stays_read_only():
    requests = jobdef.build(
        spec(nodes=2, mounts=(Mount("efs", "/data", readonly=True),)), cluster_info()
    )
    (node_range,) = requests.register["nodeProperties"]["nodeRangeProperties"]
    env = env_of(node_range["container"])
    assert "LAUNCHER_GROUP" not in env and "LAUNCHER_GROUP_FIRST_NODE" not in env
    assert "LAUNCHER_RESTARTS" not in env
    assert node_range["container"]["mountPoints"][0]["readOnly"] is True


def test_a_one_node_job_of_one_group_runs_that_groups_image_and_command():
    """A one-node job is a container job: its container is its one group's, its rendezvous is
    its own host, and it names no instance type (Batch: "shouldn't be provided")."""
    job = spec(groups=(NodeGroup(0, 0, image="repo@sha256:ef", command=("python", "y.py")),))
    requests = jobdef.build(job, cluster_info("c5n.18xlarge"))
    container = requests.register["containerProperties"]
    assert container["image"] == "repo@sha256:ef"
    assert container["command"][3:] == ["launcher", "python", "y.py"]
    assert env_of(container)["LAUNCHER_MAIN_ADDR"] == "127.0.0.1"
    assert "instanceType" not in container
    assert "nodeOverrides" not in requests.submit


def test_efs_is_at_its_default_path_unless_an_efs_mount_moves_it():
    """A bind mount is not the EFS mount: LAUNCHER_EFS stays where EFS is."""
    requests = jobdef.build(
        spec(nodes=2, mounts=(Mount("bind", "/scratch", "/s"),)), cluster_info()
    )
    (node_range,) = requests.register["nodeProperties"]["nodeRangeProperties"]
    assert env_of(node_range["container"])["LAUNCHER_EFS"] == "/mnt/efs"


def test_torchrun_on_a_cpu_node_runs_one_process():
    container = jobdef.build(spec(nodes=2, torchrun=True), cluster_info("c5n.18xlarge")).register[
        "nodeProperties"
    ]["nodeRangeProperties"][0]["container"]
    assert container["command"][4:7] == ["torchrun", "--nnodes=2", "--nproc-per-node=1"]


def test_shared_memory_of_a_type_the_catalog_does_not_know_is_a_quarter_of_its_memory():
    """A stack of an instance type newer than the launcher's catalog still gets /dev/shm: a
    whole number of MiB, a quarter of the job's memory."""
    cluster = dataclasses.replace(
        cluster_info("c5n.18xlarge"), instance_type="c9z.64xlarge", memory_mib_per_node=1001
    )
    container = jobdef.build(spec(nodes=2, efa="off"), cluster).register["nodeProperties"][
        "nodeRangeProperties"
    ][0]["container"]
    assert container["linuxParameters"]["sharedMemorySize"] == 250


def test_a_jobs_ulimit_takes_the_place_of_the_launchers_own():
    """One nofile entry, where the launcher's stood: Batch refuses a name given twice."""
    job = spec(ulimits=(Ulimit("nofile", 65536, 65536),))
    assert jobdef.ulimits(job) == [
        {"name": "memlock", "softLimit": -1, "hardLimit": -1},
        {"name": "stack", "softLimit": 67108864, "hardLimit": 67108864},
        {"name": "nofile", "softLimit": 65536, "hardLimit": 65536},
    ]


def test_the_definition_name_is_the_content_whatever_the_key_order():
    a = jobdef.definition_name({"type": "container", "image": "i"})
    b = jobdef.definition_name({"image": "i", "type": "container"})
    assert a == b
    assert len(a) == len("efa-batch-") + 32


# --- refusals, word for word ------------------------------------------------------------------


def test_the_gpus_a_node_has_are_allowed_and_one_more_is_refused():
    jobdef.build(spec(gpus_per_node=8), cluster_info())
    assert refusal(spec(gpus_per_node=9)) == "--gpus-per-node 9: p4d.24xlarge has 8 GPUs"
    group = NodeGroup(0, 0, gpus_per_node=9)
    assert refusal(spec(nodes=2, groups=(group, NodeGroup(1, 1)))) == (
        "--gpus-per-node 9: p4d.24xlarge has 8 GPUs"
    )


def test_checking_a_spec_against_the_cluster_checks_each_groups_gpus():
    """``Cluster.spec`` (launcher.api) refuses with validate() alone, before an image is built
    or uploaded: a group asking for more GPUs than a node has must not pass it."""
    job = spec(nodes=2, groups=(NodeGroup(0, 0, gpus_per_node=9), NodeGroup(1, 1)))
    with pytest.raises(UsageError) as info:
        jobdef.validate(job, cluster_info())
    assert str(info.value) == "--gpus-per-node 9: p4d.24xlarge has 8 GPUs"


def test_shared_memory_and_tmpfs_must_stay_below_the_nodes_memory():
    memory = cluster_info().memory_mib_per_node
    assert refusal(spec(shm_mib=memory)) == (
        f"--shm-size {memory}MiB: must be below the node's {memory} MiB of job memory"
    )
    assert refusal(spec(tmpfs=(Tmpfs("/scratch", memory),))) == (
        f"--tmpfs: {memory} MiB in all; must be below the node's {memory} MiB of job memory "
        "(tmpfs lives in memory)"
    )


def test_other_refusals_are_one_whole_line():
    assert refusal(spec(mounts=(Mount("fsx", "/lustre"),))) == (
        "--mount type=fsx: EfaBatch has no FSx for Lustre file system "
        "(deploy with -c fsx_lustre='{...}')"
    )
    assert refusal(spec(privileged=True)) == (
        "--privileged: EfaBatch does not run privileged containers "
        "(deploy with -c allow_privileged=true: containers then get root on their node)"
    )
    secret = Secret("WANDB_API_KEY", SecretRef.parse("other/wandb"), "other/wandb")
    assert refusal(spec(secrets=(secret,))) == (
        "--secret WANDB_API_KEY=other/wandb: EfaBatch lets jobs read only secrets under its "
        "job_secrets: team/, ssm:/team/"
    )
    no_grants = dataclasses.replace(cluster_info(), job_secrets=())
    assert refusal(spec(secrets=(secret,)), no_grants) == (
        "--secret WANDB_API_KEY=other/wandb: EfaBatch lets jobs read only secrets under its "
        "job_secrets: none"
    )


def spot_cluster():
    """A stack whose default pool is Spot, beside an On-Demand pool of 2 nodes."""
    info = cluster_info("c5n.18xlarge", max_nodes=8, efa=False)
    spot = dataclasses.replace(info.current_pool, spot=True, max_nodes=8)
    small = dataclasses.replace(info.current_pool, name="small", max_nodes=2, spot=False)
    assert isinstance(spot, PoolInfo)
    return dataclasses.replace(info, pools=(spot, small))


def test_a_gang_on_spot_names_the_pools_that_take_it_or_says_none_does():
    cluster = spot_cluster()
    where = f"pool {cluster.pool_name} of EfaBatch"
    assert refusal(spec(nodes=2, efa="off"), cluster) == (
        f"--nodes 2: {where} runs Spot Instances, where AWS Batch runs no multi-node job; "
        "use --pool small, or --nodes 1 (--array N for many single nodes)"
    )
    assert refusal(spec(nodes=3, efa="off"), cluster) == (
        f"--nodes 3: {where} runs Spot Instances, where AWS Batch runs no multi-node job; "
        "no pool of it takes a gang, or --nodes 1 (--array N for many single nodes)"
    )


def test_a_share_prefix_matches_its_whole_prefix():
    """``team*`` weighs team-a and team itself; ``teax`` is another team."""
    assert jobdef.share_matches("team-a", "team*")
    assert jobdef.share_matches("team", "team*")
    assert not jobdef.share_matches("teax", "team*")
    assert not jobdef.share_matches("tx", "team*")


# --- reading definitions back: the local backend, resume, describe -------------------------------

COPY = {
    "jobDefinitionName": "copy",
    "type": "container",
    "parameters": {"src": "a", "dst": "b"},
    "containerProperties": {
        "image": "copier",
        "command": ["copy", "Ref::src", "Ref::dst", "Ref::missing", "--Ref::src", "--in-dst"],
        "environment": [{"name": "A", "value": "1"}],
    },
    "retryStrategy": {"attempts": 2},
}


def test_a_container_job_runs_as_one_node_with_its_parameters_in_the_command():
    """Batch replaces Ref::NAME with the submitted parameter, else the definition's default,
    and leaves an unknown one as it is (the local backend runs copy jobs this way)."""
    assert jobdef.as_one_node(COPY, {"dst": "c"}) == {
        "jobDefinitionName": "copy",
        "type": "container",
        "parameters": {"src": "a", "dst": "b"},
        "retryStrategy": {"attempts": 2},
        "nodeProperties": {
            "numNodes": 1,
            "mainNode": 0,
            "nodeRangeProperties": [
                {
                    "targetNodes": "0:",
                    "container": {
                        "image": "copier",
                        "command": ["copy", "a", "c", "Ref::missing", "--Ref::src", "--in-dst"],
                        "environment": [{"name": "A", "value": "1"}],
                    },
                }
            ],
        },
    }
    no_parameters = {k: v for k, v in COPY.items() if k != "parameters"}
    bare = {"type": "container", "containerProperties": {"image": "i"}}
    assert jobdef.as_one_node(no_parameters, {})["nodeProperties"]["nodeRangeProperties"][0][
        "container"
    ]["command"] == ["copy", "Ref::src", "Ref::dst", "Ref::missing", "--Ref::src", "--in-dst"]
    assert jobdef.as_one_node(bare, {})["nodeProperties"]["nodeRangeProperties"][0][
        "container"
    ] == {"image": "i", "command": []}
    multinode = jobdef.build(spec(nodes=2), cluster_info()).register
    assert jobdef.as_one_node(multinode, {}) is multinode


def gang() -> dict:
    return {
        "nodeProperties": {
            "numNodes": 4,
            "mainNode": 0,
            "nodeRangeProperties": [
                {"targetNodes": "0:0", "container": {"image": "ps", "environment": []}},
                {
                    "targetNodes": "1:",
                    "container": {"image": "w", "environment": [{"name": "B", "value": "0"}]},
                },
            ],
        }
    }


def test_overrides_reach_the_node_ranges_they_name_as_batch_applies_them():
    submit = {
        "nodeOverrides": {
            "nodePropertyOverrides": [
                {
                    "targetNodes": "1:",
                    "containerOverrides": {
                        "environment": [{"name": "B", "value": "1"}, {"name": "A", "value": "2"}]
                    },
                },
                {"targetNodes": "0:0"},
            ]
        }
    }
    result = jobdef.with_overrides(gang(), submit)
    ps, workers = result["nodeProperties"]["nodeRangeProperties"]
    assert ps["container"]["environment"] == []
    assert workers["container"]["environment"] == [
        {"name": "A", "value": "2"},
        {"name": "B", "value": "1"},
    ]
    assert jobdef.with_overrides(gang(), {}) == gang()


def test_a_container_jobs_overrides_reach_its_one_node():
    one = jobdef.as_one_node(COPY, {})
    submit = {"containerOverrides": {"environment": [{"name": "C", "value": "3"}]}}
    (node,) = jobdef.with_overrides(one, submit)["nodeProperties"]["nodeRangeProperties"]
    assert node["container"]["environment"] == [
        {"name": "A", "value": "1"},
        {"name": "C", "value": "3"},
    ]
    assert jobdef.with_overrides(one, {"containerOverrides": {}}) == one


def test_an_override_for_a_range_the_definition_lacks_is_one_whole_line():
    submit = {"nodeOverrides": {"nodePropertyOverrides": [{"targetNodes": "2:3"}]}}
    with pytest.raises(UsageError) as info:
        jobdef.with_overrides(gang(), submit)
    assert str(info.value) == (
        "nodeOverrides: targetNodes 2:3 is none of the job definition's node ranges (0:0, 1:)"
    )


def test_environment_goes_to_the_named_range_only_and_keeps_what_it_had():
    result = jobdef.with_environment(gang(), {"C": "9"}, "0:0")
    ps, workers = result["nodeProperties"]["nodeRangeProperties"]
    assert ps["container"]["environment"] == [{"name": "C", "value": "9"}]
    assert workers["container"]["environment"] == [{"name": "B", "value": "0"}]
    no_env = {"nodeProperties": {"nodeRangeProperties": [{"targetNodes": "0:", "container": {}}]}}
    (only,) = jobdef.with_environment(no_env, {"C": "9"})["nodeProperties"]["nodeRangeProperties"]
    assert only["container"]["environment"] == [{"name": "C", "value": "9"}]


def test_node_ranges_are_read_with_their_bounds():
    definition = gang()
    definition["nodeProperties"]["nodeRangeProperties"].insert(
        1, {"targetNodes": "2:2", "container": {}}
    )
    assert [bounds for bounds, _ in jobdef.node_ranges(definition)] == [(0, 0), (2, 2), (1, 3)]
    assert jobdef.node_ranges({"container": {"image": "i"}}) == [((0, 0), {"image": "i"})]
    # "If the starting range value is omitted (:n), then 0 is used" (Batch API, NodeRangeProperty)
    leading = {
        "nodeProperties": {
            "numNodes": 3,
            "nodeRangeProperties": [
                {"targetNodes": ":1", "container": {}},
                {"targetNodes": "2:", "container": {}},
            ],
        }
    }
    assert [bounds for bounds, _ in jobdef.node_ranges(leading)] == [(0, 1), (2, 2)]
    assert is_single({"container": {}})


def test_groups_read_back_by_name_or_by_their_nodes():
    """describe names a group by LAUNCHER_GROUP, else by its nodes; one range is "main"."""
    assert [g.name for g in jobdef.groups_of(gang())] == ["0-0", "1-3"]
    assert [g.name for g in jobdef.groups_of({"container": {"image": "i"}})] == ["main"]


@pytest.mark.parametrize(
    ("environment", "directory"),
    [
        (
            [{"name": "LAUNCHER_CHECKPOINT_DIR", "value": "/mnt/efs/checkpoints/first"}],
            "/mnt/efs/checkpoints/first",
        ),
        ([{"name": "LAUNCHER_EFS", "value": "/data"}], "/data/checkpoints/job-1"),
        ([], "/mnt/efs/checkpoints/job-1"),
    ],
)
def test_a_resubmission_continues_in_its_first_jobs_checkpoints(environment, directory):
    """``resume``: the directory the job's attempts used, and the tag that carries it on to the
    next resubmission."""
    job = {"container": {"environment": environment}, "tags": {"team": "ml"}}
    assert jobdef.checkpoint_dir(job, "job-1") == directory
    assert jobdef.resumption(job, "job-1") == (
        directory,
        {"team": "ml", "efa-batch:checkpoint": directory},
    )
    assert jobdef.checkpoint_dir({"container": {}}, "job-1") == "/mnt/efs/checkpoints/job-1"
    tagged = job | {"tags": {"efa-batch:checkpoint": "/x/checkpoints/0"}}
    assert jobdef.resumption(tagged, "job-2")[0] == "/x/checkpoints/0"


def test_dry_run_output_names_both_requests():
    requests = jobdef.build(spec(nodes=2), cluster_info())
    assert requests.as_dict() == {
        "registerJobDefinition": requests.register,
        "submitJob": requests.submit,
    }


@pytest.mark.parametrize(
    ("mounts", "tmpfs", "message"),
    [
        (
            (Mount("efs", "/data"), Mount("bind", "/data", src="/host/data")),
            (),
            "--mount: two of them use the path /data; give each its own",
        ),
        (
            (Mount("efs", "/scratch"),),
            (Tmpfs("/scratch", 1024),),
            "--mount and --tmpfs: two of them use the path /scratch; give each its own",
        ),
        (
            (),
            (Tmpfs("/t", 1), Tmpfs("/t", 2)),
            "--tmpfs: two of them use the path /t; give each its own",
        ),
    ],
)
def test_two_file_systems_at_one_path_are_refused_naming_the_flags_and_path(mounts, tmpfs, message):
    """A second file system at one path would hide the first: refused when the spec is made,
    naming the flags the user gave (not --tmpfs when there was none) and the path."""
    with pytest.raises(UsageError) as info:
        spec(mounts=mounts, tmpfs=tmpfs)
    assert str(info.value) == message
