"""Job shapes: one node as a container job, arrays, dependencies; requests, limits, readers.
The refusals of launcher/job/shapes.py word for word, the ends of Batch's ranges and how
``describe`` shows a dependency are pinned where mutation testing (``make mutation``) found
changes to them that no test noticed."""

from __future__ import annotations

import pytest

from devenv.clusters import cluster_info
from launcher.api import make_spec
from launcher.aws.batch import BatchBackend, job_id_of, job_info
from launcher.errors import UsageError
from launcher.job import check, jobdef, shapes
from launcher.job.info import JobInfo, JobState
from launcher.job.jobspec import JobSpec, Mount
from launcher.job.node_ranges import groups_of, node_ranges
from launcher.job.resumption import checkpoint_dir
from launcher.job.shapes import MAX_DEPENDENCIES, Dependency, parse_after
from launcher.local.containers import container_name, is_local, local_id, node_container
from tests.support import cli
from tests.support.service_model import assert_valid

UUID = "0b5e4c1e-5f7a-4a57-9d2b-1c2d3e4f5a6b"
OTHER = "9f8e7d6c-5b4a-4321-8fed-cba987654321"
CHILD = "6f1c2d3e-0000-4000-8000-000000000001:3"  # an array child's job id: JOB:INDEX


def spec(**kwargs) -> JobSpec:
    values = {"name": "prep", "command": ("python", "prep.py"), "image": "repo@sha256:ab"}
    return JobSpec(**(values | kwargs))


def env_of(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["environment"]}


# --- one node --------------------------------------------------------------------------------


@pytest.mark.parametrize("instance_type", ["p4d.24xlarge", "p5.48xlarge", "c5n.18xlarge"])
def test_one_node_is_a_container_job_valid_for_the_service_model(instance_type):
    requests = jobdef.build(
        spec(
            mounts=(Mount("bind", "/scratch", "/scratch"),),
            timeout_seconds=3600,
            secrets=(),
            tags=(("team", "ml"),),
        ),
        cluster_info(instance_type, fair_share=True),
    )
    register = requests.register
    assert register["type"] == "container"
    assert "nodeProperties" not in register
    assert_valid("batch", "RegisterJobDefinition", register)
    assert_valid("batch", "SubmitJob", requests.submit)


def test_a_container_job_keeps_what_a_node_of_a_gang_gets():
    cluster = cluster_info("p5.48xlarge")
    one = jobdef.build(spec(), cluster).register["containerProperties"]
    gang = jobdef.build(spec(nodes=2), cluster).register["nodeProperties"]
    (node,) = [r["container"] for r in gang["nodeRangeProperties"]]
    # "This parameter isn't applicable to single-node container jobs" (ContainerProperties)
    assert "instanceType" not in one and node["instanceType"] == "p5.48xlarge"
    for key in ("image", "jobRoleArn", "executionRoleArn", "resourceRequirements", "ulimits"):
        assert one[key] == node[key]
    for key in ("volumes", "mountPoints", "logConfiguration"):
        assert one[key] == node[key]
    # EFA devices sit in the container's own linuxParameters (Batch user guide, efa.html:
    # "The location of the LinuxParameters member will be different for multi-node parallel
    # jobs and single-node container jobs").
    devices = one["linuxParameters"]["devices"]
    assert [d["hostPath"] for d in devices] == [f"/dev/infiniband/uverbs{i}" for i in range(32)]
    assert devices == node["linuxParameters"]["devices"]
    env, gang_env = env_of(one), env_of(node)
    assert env["LAUNCHER_MAIN_ADDR"] == "127.0.0.1"  # host network mode: the rendezvous is here
    assert env["LAUNCHER_NNODES"] == "1" and gang_env["LAUNCHER_NNODES"] == "2"
    # By default a gang's nodes require EFA (the fabric guard); one node only warns.
    assert env["LAUNCHER_EFA"] == "auto" and gang_env["LAUNCHER_EFA"] == "require"
    mine = ("LAUNCHER_MAIN_ADDR", "LAUNCHER_NNODES", "LAUNCHER_EFA")
    assert {k: v for k, v in env.items() if k not in mine} == {
        k: v for k, v in gang_env.items() if k not in mine
    }
    assert one["command"][:2] == ["/bin/sh", "-c"]  # the same prelude (no node watch: 1 node)


def test_user_env_still_wins_on_one_node():
    requests = jobdef.build(spec(env=(("LAUNCHER_MAIN_ADDR", "10.0.0.9"),)), cluster_info())
    assert env_of(requests.register["containerProperties"])["LAUNCHER_MAIN_ADDR"] == "10.0.0.9"


def test_readers_take_either_shape_apart():
    one = jobdef.build(spec(), cluster_info()).register
    ((bounds, container),) = node_ranges(one)
    assert bounds == (0, 0) and container is one["containerProperties"]
    assert [g.name for g in groups_of(one)] == ["main"]
    assert checkpoint_dir(one, "J") == "/mnt/efs/checkpoints/J"
    described = {"jobId": UUID, "container": container}  # DescribeJobs' shape of the same
    assert node_ranges(described) == [((0, 0), container)]


# --- arrays and dependencies -----------------------------------------------------------------


def test_array_and_dependencies_in_the_submit_request():
    requests = jobdef.build(
        spec(array_size=8, after=(Dependency(UUID), Dependency(OTHER, each=True))),
        cluster_info(),
    )
    submit = requests.submit
    assert submit["arrayProperties"] == {"size": 8}
    assert submit["dependsOn"] == [{"jobId": UUID}, {"jobId": OTHER, "type": "N_TO_N"}]
    assert_valid("batch", "SubmitJob", submit)
    plain = jobdef.build(spec(), cluster_info())
    # The definition is the job's; shape of submission only changes the submit request.
    assert plain.register == requests.register


def test_a_gang_may_wait_for_others():
    requests = jobdef.build(spec(nodes=2, after=(Dependency(UUID),)), cluster_info())
    assert requests.register["type"] == "multinode"
    assert requests.submit["dependsOn"] == [{"jobId": UUID}]
    assert_valid("batch", "SubmitJob", requests.submit)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"array_size": 1}, "--array 1: AWS Batch runs arrays of 2-10,000 children"),
        ({"array_size": 10_001}, "--array 10001: AWS Batch runs arrays of 2-10,000"),
        ({"array_size": 4, "nodes": 2}, "--array with --nodes 2: array jobs are single-node"),
        (
            {"after": tuple(Dependency(f"job{i}") for i in range(MAX_DEPENDENCIES + 1))},
            "--after: 21 jobs; AWS Batch lets a job wait for at most 20",
        ),
        ({"after": (Dependency(UUID), Dependency(UUID))}, "a job is named twice"),
        ({"after": (Dependency(UUID, each=True),)}, "it needs --array N on this job too"),
    ],
)
def test_shapes_batch_cannot_run_are_refused(kwargs, fragment):
    with pytest.raises(UsageError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        spec(**kwargs)


@pytest.mark.parametrize(
    ("size", "nodes", "line"),
    [
        (
            1,
            1,
            "--array 1: AWS Batch runs arrays of 2-10,000 children (Batch user guide, array "
            "jobs); for one job leave --array out",
        ),
        (
            10_001,
            1,
            "--array 10001: AWS Batch runs arrays of 2-10,000 children (Batch user guide, array "
            "jobs); for one job leave --array out",
        ),
        (
            4,
            2,
            "--array with --nodes 2: array jobs are single-node here (AWS documents no "
            "multi-node array jobs); submit one multi-node job per shard instead",
        ),
    ],
)
def test_array_refusals_are_one_whole_line(size, nodes, line):
    """The line the user reads, all of it: a guard against a refusal that loses its advice."""
    with pytest.raises(UsageError) as info:
        shapes.check_array(size, nodes)
    assert str(info.value) == line


@pytest.mark.parametrize("size", [shapes.ARRAY_MIN, shapes.ARRAY_MAX])
def test_the_ends_of_the_array_range_are_accepted(size):
    """2 and 10,000 children are what Batch takes: neither end may be refused."""
    shapes.check_array(size, 1)


def test_twenty_dependencies_and_ten_thousand_children_are_fine():
    after = tuple(Dependency(f"job{i}") for i in range(MAX_DEPENDENCIES))
    assert len(jobdef.build(spec(after=after), cluster_info()).submit["dependsOn"]) == 20
    assert spec(array_size=10_000).array_size == 10_000


def test_a_job_named_twice_in_after_is_one_whole_line():
    twice = (Dependency("a"), Dependency("a"))
    with pytest.raises(UsageError) as info:
        shapes.check_dependencies(twice, None)
    assert str(info.value) == "--after: a job is named twice; name each once"


def test_after_parses_ids_queues_and_each():
    assert parse_after(UUID) == Dependency(UUID)
    assert parse_after(f"{UUID}:each") == Dependency(UUID, each=True)
    assert parse_after(f"{UUID}:3") == Dependency(f"{UUID}:3")  # an array's child
    assert str(Dependency(UUID, each=True)) == f"{UUID}:each"
    with pytest.raises(UsageError, match="expected a job id"):
        parse_after(":each")


def test_each_is_read_from_the_end_of_a_job_id_that_has_colons():
    """An array child's id has a colon of its own (JOB:INDEX): ``:each`` is the last part,
    and the child's id stays whole."""
    assert shapes.parse_after(f"{CHILD}:each") == Dependency(CHILD, True)
    assert shapes.parse_after(CHILD) == Dependency(CHILD, False)


def test_the_api_takes_jobs_ids_and_each():
    from launcher.api import Job

    pre = Job(UUID, BatchBackend.__new__(BatchBackend))
    made = make_spec(["x"], image="i", array=3, after=[pre, f"{OTHER}:each"])
    assert made.array_size == 3
    assert made.after == (Dependency(UUID), Dependency(OTHER, each=True))
    assert make_spec(["x"], image="i", array=3, after=[pre.each()]).after[0].each
    with pytest.raises(UsageError, match="expected a Job, a job id or job.each"):
        make_spec(["x"], image="i", after=[3])


# --- reading jobs back -----------------------------------------------------------------------


def test_batch_array_parents_children_and_dependencies_read_back():
    parent = job_info(
        {
            "jobId": UUID,
            "jobName": "prep",
            "status": "PENDING",
            "arrayProperties": {
                "size": 8,
                "statusSummary": {"SUCCEEDED": 3, "RUNNING": 2, "RUNNABLE": 3},
            },
            "dependsOn": [{"jobId": OTHER, "type": "N_TO_N"}],
            "container": {"image": "i"},
        }
    )
    assert parent.is_array and parent.array_size == 8
    assert parent.children_line() == "3 RUNNABLE, 2 RUNNING, 3 SUCCEEDED"
    assert parent.depends_on == (f"{OTHER}:each",)
    child = job_info(
        {
            "jobId": f"{UUID}:5",
            "jobName": "prep",
            "status": "RUNNING",
            "arrayProperties": {"size": 8, "index": 5},
        }
    )
    assert (child.is_array, child.array_index) == (False, 5)
    assert parent.as_dict()["children"]["RUNNING"] == 2


@pytest.mark.parametrize(
    ("entry", "shown"),
    [
        ({"jobId": "j1"}, "j1"),
        ({"jobId": "j2", "type": "N_TO_N"}, "j2:each"),
        ({"type": "SEQUENTIAL"}, ""),  # an entry cut short names no job, not "None"
    ],
)
def test_dependencies_read_back_as_describe_shows_them(entry, shown):
    """``launcher describe`` shows a DescribeJobs dependsOn entry as --after takes it: a whole
    job without ``:each``."""
    assert str(Dependency.from_batch(entry)) == shown


def test_a_described_job_without_a_container_reads_as_an_empty_one():
    """Callers ask the container for its environment and image: an entry that has none is an
    empty container, never None."""
    assert shapes.single_container({"jobId": "j", "jobName": "x"}) == {}
    assert shapes.single_container({"container": {"image": "i"}}) == {"image": "i"}


def test_child_ids_are_job_ids_on_both_backends():
    backend = BatchBackend.__new__(BatchBackend)
    for handle in (UUID, f"{UUID}:7", f"{UUID}#1", f"myqueue:{UUID}", f"myqueue:{UUID}:7"):
        assert backend.owns(handle), handle
    assert job_id_of(f"myqueue:{UUID}:7") == f"{UUID}:7"
    assert job_id_of(f"myqueue:{UUID}") == UUID
    assert not backend.owns("local-0b5e4c1e:3")
    local = "local-0b5e4c1e-5f7a-4a57-9d2b-1c2d3e4f5a6b"
    assert local_id(f"q:{local}:3") == f"{local}:3" and is_local(f"{local}:3")
    assert local_id(UUID) is None
    names = {container_name(f"{local}:{i}", 1, 0) for i in range(3)}
    assert len(names) == 3 and all(":" not in n for n in names)


def test_local_children_get_batch_array_variables_and_single_job_ids():
    container = jobdef.build(spec(), cluster_info()).register["containerProperties"]
    run = node_container(
        container,
        job_id="local-abc:2",
        job_name="prep",
        queue="q",
        node=0,
        nodes=1,
        efs_dir="/e",
        infiniband=False,
        gpus=False,
        single=True,
        array=(2, 4),
    )
    env = run["environment"]
    assert env["AWS_BATCH_JOB_ID"] == "local-abc:2"
    assert (env["AWS_BATCH_JOB_ARRAY_INDEX"], env["AWS_BATCH_JOB_ARRAY_SIZE"]) == ("2", "4")
    # Batch sets the node variables for multi-node jobs only (job_env_vars.html).
    assert "AWS_BATCH_JOB_NUM_NODES" not in env and "AWS_BATCH_JOB_NODE_INDEX" not in env


def test_check_on_one_node_explains_imds_instead_of_failing():
    lines = [
        "LAUNCHER_CHECK node=0 job_role=ok",
        "LAUNCHER_CHECK node=0 imds=reachable",
    ]
    one = {r.check: r for r in check.evaluate(lines, 1, cluster_info()).nodes[0]}
    assert one["imds"].status == check.NA and "host network mode" in one["imds"].detail
    two = check.evaluate(
        [*lines, *(line.replace("node=0", "node=1") for line in lines)], 2, cluster_info()
    )
    assert {r.check: r for r in two.nodes[0]}["imds"].status == check.FAIL


def test_check_spec_on_one_node_is_a_container_job():
    cluster = cluster_info()
    requests = jobdef.build(check.spec(cluster, 1, "img", 29500, 600), cluster)
    assert requests.register["type"] == "container"
    assert_valid("batch", "RegisterJobDefinition", requests.register)


def test_status_line_of_a_waiting_job():
    info = JobInfo(UUID, "train", JobState.PENDING, depends_on=(OTHER,))
    assert not info.is_array and info.depends_on == (OTHER,)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--array", "1"], "--array 1: AWS Batch runs arrays of 2-10,000 children"),
        (["--array", "4", "--nodes", "2"], "--array with --nodes 2: array jobs are single-node"),
        ([a for i in range(21) for a in ("--after", f"job{i}")], "wait for at most 20"),
        (["--after", f"{UUID}:each"], "it needs --array N on this job too"),
        (["--array", "3", "--follow"], "--follow with --array: each child has its own logs"),
    ],
)
def test_bad_shapes_exit_2_with_one_line_before_any_stack_is_read(args, fragment, tmp_path):
    result = cli.launcher(
        "--stack",
        "NoSuchStack",
        "run",
        "--no-workspace",
        "--image",
        "img",
        *args,
        "--",
        "true",
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "AWS_DEFAULT_REGION": "us-east-1"},
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("launcher: error: ") and fragment in line
    assert result.stdout == ""


def test_advice_for_a_dependant_whose_dependency_failed_and_for_a_failed_array():
    from launcher.aws.explain import ARRAY_ADVICE, DEPENDENCY_ADVICE, explain

    never_ran = JobInfo(UUID, "eval", JobState.FAILED, reason="anything", depends_on=(OTHER,))
    assert explain(never_ran) == DEPENDENCY_ADVICE
    ran = JobInfo(UUID, "eval", JobState.FAILED, attempts=1, depends_on=(OTHER,))
    assert explain(ran) != DEPENDENCY_ADVICE
    array = JobInfo(UUID, "prep", JobState.FAILED, array_size=4, children={"FAILED": 1})
    assert explain(array) == ARRAY_ADVICE.format(job=UUID)
    assert f"`launcher logs {UUID} --index K`" in explain(array)


def test_a_single_node_jobs_group_keeps_its_torchx_role_name():
    described = {
        "jobId": UUID,
        "jobName": "prep",
        "status": "RUNNING",
        "container": {"image": "i", "environment": [{"name": "LAUNCHER_GROUP", "value": "prep"}]},
    }
    (group,) = job_info(described).groups
    assert (group.name, group.first, group.last, group.image) == ("prep", 0, 0, "i")
