"""The request builder: a pure function from (job spec, cluster) to boto3 keyword arguments."""

from __future__ import annotations

import pytest

from devenv.clusters import cluster_info
from launcher.errors import UsageError
from launcher.job import jobdef, jobspec
from launcher.job.jobspec import JobSpec, Mount
from launcher.job.options import make_spec
from tests.support.service_model import assert_valid


def spec(**kwargs) -> JobSpec:
    values = {
        "name": "train",
        "command": ("python", "train.py"),
        "image": "repo@sha256:ab",
        "nodes": 2,
    }
    return JobSpec(**(values | kwargs))


def container(requests: jobdef.Requests) -> dict:
    (node_range,) = requests.register["nodeProperties"]["nodeRangeProperties"]
    assert node_range["targetNodes"] == "0:"
    return node_range["container"]


def env_of(requests: jobdef.Requests) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container(requests)["environment"]}


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


def test_efa_environment_defaults_per_type_and_user_overrides():
    env = env_of(jobdef.build(spec(), cluster_info("p5.48xlarge")))
    assert env["FI_PROVIDER"] == "efa"
    assert env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert not any(k.startswith("RDMAV_FORK_SAFE") for k in env)
    env = env_of(jobdef.build(spec(), cluster_info("g5.48xlarge")))
    assert "FI_EFA_USE_DEVICE_RDMA" not in env  # no GPUDirect RDMA on g5
    env = env_of(jobdef.build(spec(env=(("NCCL_DEBUG", "INFO"),)), cluster_info()))
    assert env["NCCL_DEBUG"] == "INFO"


def test_efa_off_passes_no_devices_and_no_efa_environment():
    requests = jobdef.build(spec(efa="off"), cluster_info())
    assert "devices" not in container(requests)["linuxParameters"]
    assert "FI_PROVIDER" not in env_of(requests)


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


def test_rendezvous_prelude_wraps_the_command():
    c = container(
        jobdef.build(spec(command=("python", "train.py", "--lr", "1e-4")), cluster_info())
    )
    assert c["command"][:2] == ["/bin/sh", "-c"]
    assert c["command"][3:] == ["launcher", "python", "train.py", "--lr", "1e-4"]
    env = env_of(jobdef.build(spec(), cluster_info()))
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


def test_submit_propagates_tags_and_fair_share():
    requests = jobdef.build(
        spec(tags=(("team", "ml"),), share_id="nlp", priority=7), cluster_info(fair_share=True)
    )
    assert requests.submit["propagateTags"] is True
    assert requests.submit["tags"] == {"efa-batch:stack": "EfaBatch", "team": "ml"}
    assert requests.submit["shareIdentifier"] == "nlp"
    assert requests.submit["schedulingPriorityOverride"] == 7
    assert requests.submit["jobDefinition"] == requests.register["jobDefinitionName"]


def test_definition_name_is_a_content_hash():
    a = jobdef.build(spec(), cluster_info())
    b = jobdef.build(spec(tags=(("x", "y"),)), cluster_info())  # tags go on the job only
    c = jobdef.build(spec(env=(("A", "1"),)), cluster_info())
    assert a.register == b.register
    assert a.register["jobDefinitionName"] != c.register["jobDefinitionName"]
    assert a.register["jobDefinitionName"].startswith("efa-batch-")


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


# --- container settings jobs ask for (issue: jobs that reach their data) -----------------------


def _container(spec: JobSpec, cluster=None) -> dict:
    requests = jobdef.build(spec, cluster or cluster_info())
    assert_valid("batch", "RegisterJobDefinition", requests.register)
    ((_, container),) = jobdef.node_ranges(requests.register)
    return container


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
    jobdef.ULIMITS).
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


def test_privileged_only_where_the_stack_allows_it():
    """The nodes run with ECS_DISABLE_PRIVILEGED=true unless the stack sets allow_privileged
    (amazon-ecs-agent README), so the launcher refuses before anything is submitted."""
    spec = make_spec(["x"], image="i", privileged=True)
    with pytest.raises(UsageError, match="does not run privileged containers"):
        jobdef.build(spec, cluster_info())
    assert _container(spec, cluster_info(allow_privileged=True))["privileged"] is True
    assert "privileged" not in _container(make_spec(["x"], image="i"))


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
