"""The request builder, a pure function from (job spec, cluster) to boto3 keyword arguments
(launcher/job/jobdef.py ``build``, with the checks of launcher/job/validation.py and the
container of launcher/job/container.py, environment.py and volumes.py that it composes): every
variable a node gets, each node group's own image, command and GPUs, the container settings a
job asks for (ulimits, tmpfs, privileged, FSx), the retry rules and the refusals word for word.
How a definition is read back is in test_node_ranges.py and test_resumption.py. Many of the
field-by-field assertions were added where mutation testing (``make mutation``) found a change
to the request builder that no test noticed."""

from __future__ import annotations

import dataclasses

import pytest

from devenv.clusters import cluster_info
from launcher.errors import UsageError
from launcher.job import jobdef, jobspec
from launcher.job.container import ulimits
from launcher.job.jobspec import JobSpec, Mount, NodeGroup, Secret, Tmpfs, Ulimit
from launcher.job.node_ranges import node_ranges
from launcher.job.options import make_spec
from launcher.job.validation import share_matches, validate
from launcher.stack.outputs import PoolInfo
from launcher.stack.secrets import SecretRef
from tests.support.service_model import assert_valid

FSX = "fs-0aaaabbbbccccdddd"
NCCL = {
    "FI_PROVIDER": "efa",
    "NCCL_SOCKET_IFNAME": "^lo,docker,veth,ecs",
    "NCCL_DEBUG": "INFO",
    "NCCL_DEBUG_SUBSYS": "INIT,NET",
    "NCCL_DEBUG_FILE": "/tmp/launcher-nccl/%h.%p.log",
}


def spec(**kwargs) -> JobSpec:
    """A two-node job unless told otherwise (``nodes=1`` is a container job, built apart)."""
    values = {
        "name": "train",
        "command": ("python", "train.py"),
        "image": "repo@sha256:ab",
        "nodes": 2,
    }
    return JobSpec(**(values | kwargs))


def container(requests: jobdef.Requests) -> dict:
    """The one node range's container of a multi-node job."""
    (node_range,) = requests.register["nodeProperties"]["nodeRangeProperties"]
    assert node_range["targetNodes"] == "0:"
    return node_range["container"]


def env_of(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["environment"]}


def gpus_of(container: dict) -> str | None:
    return next((r["value"] for r in container["resourceRequirements"] if r["type"] == "GPU"), None)


def refusal(job: JobSpec, cluster=None) -> str:
    with pytest.raises(UsageError) as info:
        jobdef.build(job, cluster or cluster_info())
    return str(info.value)


def _container(spec: JobSpec, cluster=None) -> dict:
    """The container of any job of one node range, its definition checked by the service model."""
    requests = jobdef.build(spec, cluster or cluster_info())
    assert_valid("batch", "RegisterJobDefinition", requests.register)
    ((_, container),) = node_ranges(requests.register)
    return container


# --- the two requests and the definition's name ----------------------------------------------


@pytest.mark.parametrize("instance_type", ["p4d.24xlarge", "p5.48xlarge", "c5n.18xlarge"])
def test_requests_are_valid_for_the_batch_service_model(instance_type):
    requests = jobdef.build(
        spec(
            mounts=(
                Mount("bind", "/scratch", "/scratch"),
                Mount("device", "/dev/fuse", "/dev/fuse", permissions=("READ",)),
            ),
            timeout_seconds=3600,
            tags=(("team", "ml"),),
        ),
        cluster_info(instance_type, fair_share=True),
    )
    assert_valid("batch", "RegisterJobDefinition", requests.register)
    assert_valid("batch", "SubmitJob", requests.submit)


def test_multinode_definition_pins_the_instance_type_and_the_main_node():
    requests = jobdef.build(spec(nodes=3), cluster_info())
    props = requests.register["nodeProperties"]
    assert requests.register["type"] == "multinode"
    assert (props["numNodes"], props["mainNode"]) == (3, 0)
    assert container(requests)["instanceType"] == "p4d.24xlarge"
    assert requests.register["platformCapabilities"] == ["EC2"]


def test_a_one_node_job_of_one_group_runs_that_groups_image_and_command():
    """A one-node job is a container job: its container is its one group's, its rendezvous is
    its own host, and it names no instance type (Batch: "shouldn't be provided")."""
    job = spec(
        nodes=1, groups=(NodeGroup(0, 0, image="repo@sha256:ef", command=("python", "y.py")),)
    )
    requests = jobdef.build(job, cluster_info("c5n.18xlarge"))
    container = requests.register["containerProperties"]
    assert container["image"] == "repo@sha256:ef"
    assert container["command"][3:] == ["launcher", "python", "y.py"]
    assert env_of(container)["LAUNCHER_MAIN_ADDR"] == "127.0.0.1"
    assert "instanceType" not in container
    assert "nodeOverrides" not in requests.submit


def test_definition_name_is_a_content_hash():
    a = jobdef.build(spec(), cluster_info())
    b = jobdef.build(spec(tags=(("x", "y"),)), cluster_info())  # tags go on the job only
    c = jobdef.build(spec(env=(("A", "1"),)), cluster_info())
    assert a.register == b.register
    assert a.register["jobDefinitionName"] != c.register["jobDefinitionName"]
    assert a.register["jobDefinitionName"].startswith("efa-batch-")


def test_the_definition_name_is_the_content_whatever_the_key_order():
    a = jobdef.definition_name({"type": "container", "image": "i"})
    b = jobdef.definition_name({"image": "i", "type": "container"})
    assert a == b
    assert len(a) == len("efa-batch-") + 32


def test_dry_run_output_names_both_requests():
    requests = jobdef.build(spec(nodes=2), cluster_info())
    assert requests.as_dict() == {
        "registerJobDefinition": requests.register,
        "submitJob": requests.submit,
    }


# --- what each node runs: its group's image, command, GPUs and variables ----------------------


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


def test_efa_environment_defaults_per_type_and_user_overrides():
    env = env_of(container(jobdef.build(spec(), cluster_info("p5.48xlarge"))))
    assert env["FI_PROVIDER"] == "efa"
    assert env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert not any(k.startswith("RDMAV_FORK_SAFE") for k in env)
    env = env_of(container(jobdef.build(spec(), cluster_info("g5.48xlarge"))))
    assert "FI_EFA_USE_DEVICE_RDMA" not in env  # no GPUDirect RDMA on g5
    env = env_of(container(jobdef.build(spec(env=(("NCCL_DEBUG", "INFO"),)), cluster_info())))
    assert env["NCCL_DEBUG"] == "INFO"


def test_efa_off_passes_no_devices_and_no_efa_environment():
    requests = jobdef.build(spec(efa="off"), cluster_info())
    assert "devices" not in container(requests)["linuxParameters"]
    assert "FI_PROVIDER" not in env_of(container(requests))


def test_rendezvous_prelude_wraps_the_command():
    c = container(
        jobdef.build(spec(command=("python", "train.py", "--lr", "1e-4")), cluster_info())
    )
    assert c["command"][:2] == ["/bin/sh", "-c"]
    assert c["command"][3:] == ["launcher", "python", "train.py", "--lr", "1e-4"]
    env = env_of(container(jobdef.build(spec(), cluster_info())))
    assert env["LAUNCHER_MAIN_PORT"] == "29500"
    assert env["LAUNCHER_NNODES"] == "2"


def test_torchrun_convenience():
    c = container(jobdef.build(spec(torchrun=True, gpus_per_node=4), cluster_info()))
    assert c["command"][4:] == [
        "torchrun",
        "--nnodes=2",
        "--nproc-per-node=4",
        "python",
        "train.py",
    ]


def test_torchrun_on_a_cpu_node_runs_one_process():
    container = jobdef.build(spec(nodes=2, torchrun=True), cluster_info("c5n.18xlarge")).register[
        "nodeProperties"
    ]["nodeRangeProperties"][0]["container"]
    assert container["command"][4:7] == ["torchrun", "--nnodes=2", "--nproc-per-node=1"]


# --- resources, devices, ulimits and shared memory --------------------------------------------


def test_resources_come_from_the_catalog_with_headroom():
    c = container(jobdef.build(spec(), cluster_info()))
    resources = {r["type"]: r["value"] for r in c["resourceRequirements"]}
    assert resources == {
        "VCPU": "96",
        "MEMORY": "1120665",  # 95% of 1152 GiB, rounded down: AWS's 5% buffer
        "GPU": "8",
    }
    assert int(resources["MEMORY"]) <= 1152 * 1024 * 0.95


@pytest.mark.parametrize(("instance_type", "count"), [("p4d.24xlarge", 4), ("p5.48xlarge", 32)])
def test_every_efa_interface_is_a_device(instance_type, count):
    c = container(jobdef.build(spec(), cluster_info(instance_type)))
    devices = c["linuxParameters"]["devices"]
    assert [d["hostPath"] for d in devices] == [f"/dev/infiniband/uverbs{i}" for i in range(count)]
    assert all(d["containerPath"] == d["hostPath"] for d in devices)
    assert {tuple(d["permissions"]) for d in devices} == {("READ", "WRITE", "MKNOD")}


def test_ulimits_and_shared_memory():
    c = container(jobdef.build(spec(), cluster_info()))
    ulimits = {u["name"]: (u["softLimit"], u["hardLimit"]) for u in c["ulimits"]}
    assert ulimits["memlock"] == (-1, -1)
    assert ulimits["stack"] == (67108864, 67108864)
    assert ulimits["nofile"][0] >= 65536
    mem = next(int(r["value"]) for r in c["resourceRequirements"] if r["type"] == "MEMORY")
    assert c["linuxParameters"]["sharedMemorySize"] == mem // 4
    c = container(jobdef.build(spec(shm_mib=65536), cluster_info()))
    assert c["linuxParameters"]["sharedMemorySize"] == 65536


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
    job = spec(nodes=1, ulimits=(Ulimit("nofile", 65536, 65536),))
    assert ulimits(job) == [
        {"name": "memlock", "softLimit": -1, "hardLimit": -1},
        {"name": "stack", "softLimit": 67108864, "hardLimit": 67108864},
        {"name": "nofile", "softLimit": 65536, "hardLimit": 65536},
    ]


def test_ulimits_replace_the_launchers_of_the_same_name_and_add_others():
    """Ulimit names are Batch's fifteen ("core | cpu | ... | stack", Batch API, Ulimit); a job's
    nofile replaces the launcher's, nproc joins them, memlock stays unlimited for EFA."""
    spec = make_spec(["x"], image="i", ulimits={"nofile": "65536", "nproc": "4096:8192"})
    limits = {u["name"]: (u["softLimit"], u["hardLimit"]) for u in _container(spec)["ulimits"]}
    assert limits == {
        "memlock": (-1, -1),
        "stack": (67108864, 67108864),
        "nofile": (65536, 65536),
        "nproc": (4096, 8192),
    }


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("nofile=10:5", "soft limit must not exceed the hard limit"),
        ("files=10", "NAME one of core, cpu"),
        ("nofile=lots", "integers 0-2147483647, or unlimited"),
    ],
)
def test_bad_ulimits_say_what_is_allowed(flag, message):
    with pytest.raises(UsageError, match=message):
        jobspec.parse_ulimit(flag)


def test_memlock_stays_unlimited_with_efa():
    spec = make_spec(["x"], image="i", ulimits={"memlock": "1024"})
    with pytest.raises(UsageError, match="memlock stays unlimited with EFA on"):
        jobdef.build(spec, cluster_info())
    off = make_spec(["x"], image="i", efa="off", ulimits={"memlock": "1024"})
    assert {"name": "memlock", "softLimit": 1024, "hardLimit": 1024} in _container(
        off, cluster_info(efa=False)
    )["ulimits"]


@pytest.mark.parametrize("limit", ["1024:unlimited", "0:unlimited", "65536:1048576"])
def test_memlock_stays_unlimited_soft_and_hard_with_efa(limit):
    """Both limits, not the hard one alone: the kernel enforces the soft limit ("The soft limit
    is the value that the kernel enforces for the corresponding resource", setrlimit(2)), so
    memlock=1024:unlimited caps what EFA may pin whatever the hard limit, and libfabric fails
    ("EFA registers (pins) memory for RDMA: without an unlimited memlock, libfabric fails",
    launcher.job.container.ULIMITS).
    Refused before anything is registered; with EFA off the limits are the user's."""
    spec = make_spec(["x"], image="i", ulimits={"memlock": limit})
    with pytest.raises(UsageError) as info:
        jobdef.build(spec, cluster_info())
    assert str(info.value) == (
        "--ulimit memlock: EFA pins the memory it registers, so memlock stays unlimited with "
        "EFA on (or pass --efa off)"
    )
    soft, hard = (-1 if v == "unlimited" else int(v) for v in limit.split(":"))
    off = make_spec(["x"], image="i", efa="off", ulimits={"memlock": limit})
    assert {"name": "memlock", "softLimit": soft, "hardLimit": hard} in _container(
        off, cluster_info(efa=False)
    )["ulimits"]
    unlimited = make_spec(["x"], image="i", ulimits={"memlock": "unlimited"})
    assert {"name": "memlock", "softLimit": -1, "hardLimit": -1} in _container(unlimited)["ulimits"]


def test_privileged_only_where_the_stack_allows_it():
    """The nodes run with ECS_DISABLE_PRIVILEGED=true unless the stack sets allow_privileged
    (amazon-ecs-agent README), so the launcher refuses before anything is submitted."""
    spec = make_spec(["x"], image="i", privileged=True)
    with pytest.raises(UsageError, match="does not run privileged containers"):
        jobdef.build(spec, cluster_info())
    assert _container(spec, cluster_info(allow_privileged=True))["privileged"] is True
    assert "privileged" not in _container(make_spec(["x"], image="i"))


# --- file systems: EFS, FSx for Lustre, tmpfs ---------------------------------------------------


def test_efs_through_the_access_point_with_tls_and_iam():
    c = container(jobdef.build(spec(), cluster_info()))
    (efs,) = [v for v in c["volumes"] if "efsVolumeConfiguration" in v]
    assert efs["efsVolumeConfiguration"] == {
        "fileSystemId": "fs-0123456789abcdef0",
        "transitEncryption": "ENABLED",
        "authorizationConfig": {"accessPointId": "fsap-0123456789abcdef0", "iam": "ENABLED"},
    }
    assert c["mountPoints"][0] == {
        "sourceVolume": "efs",
        "containerPath": "/mnt/efs",
        "readOnly": False,
    }
    c = container(jobdef.build(spec(mounts=(Mount("efs", "/data"),)), cluster_info()))
    assert c["mountPoints"][0]["containerPath"] == "/data"


def test_efs_is_at_its_default_path_unless_an_efs_mount_moves_it():
    """A bind mount is not the EFS mount: LAUNCHER_EFS stays where EFS is."""
    requests = jobdef.build(
        spec(nodes=2, mounts=(Mount("bind", "/scratch", "/s"),)), cluster_info()
    )
    (node_range,) = requests.register["nodeProperties"]["nodeRangeProperties"]
    assert env_of(node_range["container"])["LAUNCHER_EFS"] == "/mnt/efs"


def test_fsx_is_the_nodes_mount_bound_into_every_job():
    """Nodes mount FSx for Lustre at /fsx at boot (infra/lustre.py); a job binds the host path
    (a host volume, Batch API Host.sourcePath), at /fsx unless --mount type=fsx,dst= says."""
    with_fsx = cluster_info(fsx_file_system_id="fs-0123456789abcdef0")
    container = _container(make_spec(["x"], image="i"), with_fsx)
    assert {"name": "fsx", "host": {"sourcePath": "/fsx"}} in container["volumes"]
    assert {"sourceVolume": "fsx", "containerPath": "/fsx", "readOnly": False} in container[
        "mountPoints"
    ]
    moved = make_spec(["x"], image="i", mounts=(jobspec.parse_mount("type=fsx,dst=/data,ro"),))
    container = _container(moved, with_fsx)
    assert {"sourceVolume": "fsx", "containerPath": "/data", "readOnly": True} in container[
        "mountPoints"
    ]
    assert {"name": "LAUNCHER_FSX", "value": "/data"} in container["environment"]
    with pytest.raises(UsageError, match="has no FSx for Lustre file system"):
        jobdef.build(moved, cluster_info())
    assert "fsx" not in {v["name"] for v in _container(make_spec(["x"], image="i"))["volumes"]}


def test_tmpfs_is_linux_parameters_and_must_fit_in_memory():
    """linuxParameters.tmpfs takes containerPath and size in MiB (Batch API, Tmpfs)."""
    spec = make_spec(["x"], image="i", tmpfs={"/scratch": "8g"})
    assert _container(spec)["linuxParameters"]["tmpfs"] == [
        {"containerPath": "/scratch", "size": 8192}
    ]
    with pytest.raises(UsageError, match="tmpfs lives in memory"):
        jobdef.build(make_spec(["x"], image="i", tmpfs={"/big": "4t"}), cluster_info())
    with pytest.raises(UsageError, match="DST an absolute path"):
        jobspec.parse_tmpfs("scratch:1g")


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
        spec(nodes=1, mounts=mounts, tmpfs=tmpfs)
    assert str(info.value) == message


# --- roles, logs, tags, fair share, retries ---------------------------------------------------


def test_roles_and_logs_come_from_the_cluster():
    cluster = cluster_info()
    c = container(jobdef.build(spec(name="bert"), cluster))
    assert c["jobRoleArn"] == cluster.job_role_arn
    assert c["executionRoleArn"] == cluster.execution_role_arn
    assert c["logConfiguration"] == {
        "logDriver": "awslogs",
        "options": {
            "awslogs-group": cluster.log_group_name,
            "awslogs-region": "us-east-1",
            "awslogs-stream-prefix": "bert",
        },
    }


def test_submit_propagates_tags_and_fair_share():
    requests = jobdef.build(
        spec(tags=(("team", "ml"),), share_id="nlp", priority=7), cluster_info(fair_share=True)
    )
    assert requests.submit["propagateTags"] is True
    assert requests.submit["tags"] == {"efa-batch:stack": "EfaBatch", "team": "ml"}
    assert requests.submit["shareIdentifier"] == "nlp"
    assert requests.submit["schedulingPriorityOverride"] == 7
    assert requests.submit["jobDefinition"] == requests.register["jobDefinitionName"]


def test_a_share_prefix_matches_its_whole_prefix():
    """``team*`` weighs team-a and team itself; ``teax`` is another team."""
    assert share_matches("team-a", "team*")
    assert share_matches("team", "team*")
    assert not share_matches("teax", "team*")
    assert not share_matches("tx", "team*")


def test_retry_on_node_loss_only_and_timeout():
    requests = jobdef.build(spec(attempts=5, timeout_seconds=5400), cluster_info())
    assert requests.register["retryStrategy"] == {
        "attempts": 5,
        "evaluateOnExit": [
            {"onStatusReason": "Host EC2*", "action": "RETRY"},
            {"onExitCode": "75", "action": "RETRY"},
            {"onExitCode": "79", "action": "RETRY"},
            {"onReason": "*", "action": "EXIT"},
        ],
    }
    assert requests.register["timeout"] == {"attemptDurationSeconds": 5400}


@pytest.mark.parametrize(
    ("outcome", "again"),
    [
        ({"status_reason": "Host EC2 (instance i-0a) terminated.", "exit_code": None}, True),
        ({"status_reason": "Essential container in task exited", "exit_code": 75}, True),
        ({"status_reason": "Essential container in task exited", "exit_code": 1}, False),
        ({"status_reason": "Essential container in task exited", "exit_code": 137}, False),
    ],
)
def test_the_retry_rules_as_batch_reads_them(outcome, again):
    """A host loss or a lost worker (exit 75 from the prelude) is retried; an application
    error is not. Batch's evaluation order: the first entry that matches decides."""
    from launcher.job import retry

    strategy = jobdef.build(spec(attempts=3), cluster_info()).register["retryStrategy"]
    assert retry.retries(strategy, 1, reason=None, **outcome) is again
    assert retry.retries(strategy, 3, reason=None, **outcome) is False  # attempts used up
    assert (
        retry.action({"evaluateOnExit": []}, status_reason="x", reason=None, exit_code=1) == "RETRY"
    )


# --- refusals: what the cluster cannot run, word for word ---------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "cluster_kwargs", "fragment"),
    [
        ({"nodes": 5}, {}, "EfaBatch runs at most 4 p4d.24xlarge nodes"),
        ({"gpus_per_node": 9}, {}, "--gpus-per-node 9: p4d.24xlarge has 8 GPUs"),
        ({"efa": "require"}, {"efa": False}, "--efa require: EfaBatch has no EFA interfaces"),
        ({"priority": 3}, {}, "has no fair-share scheduling policy"),
        ({"share_id": "a"}, {}, "has no fair-share scheduling policy"),
        ({"shm_mib": 10**8}, {}, "--shm-size 100000000MiB: must be below"),
        ({"mounts": (Mount("efs", "/a"), Mount("efs", "/b"))}, {}, "one mount point"),
    ],
)
def test_requests_the_cluster_cannot_run_are_refused(kwargs, cluster_kwargs, fragment):
    with pytest.raises(UsageError) as info:
        jobdef.build(spec(**kwargs), cluster_info(**cluster_kwargs))
    assert fragment in str(info.value)


def test_the_gpus_a_node_has_are_allowed_and_one_more_is_refused():
    jobdef.build(spec(nodes=1, gpus_per_node=8), cluster_info())
    assert refusal(spec(nodes=1, gpus_per_node=9)) == "--gpus-per-node 9: p4d.24xlarge has 8 GPUs"
    group = NodeGroup(0, 0, gpus_per_node=9)
    assert refusal(spec(nodes=2, groups=(group, NodeGroup(1, 1)))) == (
        "--gpus-per-node 9: p4d.24xlarge has 8 GPUs"
    )


def test_checking_a_spec_against_the_cluster_checks_each_groups_gpus():
    """``Cluster.spec`` (launcher.api) refuses with validate() alone, before an image is built
    or uploaded: a group asking for more GPUs than a node has must not pass it."""
    job = spec(nodes=2, groups=(NodeGroup(0, 0, gpus_per_node=9), NodeGroup(1, 1)))
    with pytest.raises(UsageError) as info:
        validate(job, cluster_info())
    assert str(info.value) == "--gpus-per-node 9: p4d.24xlarge has 8 GPUs"


def test_shared_memory_and_tmpfs_must_stay_below_the_nodes_memory():
    memory = cluster_info().memory_mib_per_node
    assert refusal(spec(nodes=1, shm_mib=memory)) == (
        f"--shm-size {memory}MiB: must be below the node's {memory} MiB of job memory"
    )
    assert refusal(spec(nodes=1, tmpfs=(Tmpfs("/scratch", memory),))) == (
        f"--tmpfs: {memory} MiB in all; must be below the node's {memory} MiB of job memory "
        "(tmpfs lives in memory)"
    )


def test_other_refusals_are_one_whole_line():
    assert refusal(spec(nodes=1, mounts=(Mount("fsx", "/lustre"),))) == (
        "--mount type=fsx: EfaBatch has no FSx for Lustre file system "
        "(deploy with -c fsx_lustre='{...}')"
    )
    assert refusal(spec(nodes=1, privileged=True)) == (
        "--privileged: EfaBatch does not run privileged containers "
        "(deploy with -c allow_privileged=true: containers then get root on their node)"
    )
    secret = Secret("WANDB_API_KEY", SecretRef.parse("other/wandb"), "other/wandb")
    assert refusal(spec(nodes=1, secrets=(secret,))) == (
        "--secret WANDB_API_KEY=other/wandb: EfaBatch lets jobs read only secrets under its "
        "job_secrets: team/, ssm:/team/"
    )
    no_grants = dataclasses.replace(cluster_info(), job_secrets=())
    assert refusal(spec(nodes=1, secrets=(secret,)), no_grants) == (
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
