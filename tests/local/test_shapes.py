"""Job shapes on the local Docker engine: one node, arrays, and jobs that wait for others."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from devenv.clusters import cluster_info
from launcher import local
from launcher.errors import UsageError
from launcher.job import jobdef
from launcher.job.info import CANCEL_REASON
from launcher.job.jobspec import JobSpec
from launcher.job.shapes import Dependency
from launcher.local.supervisor import ARRAY_REASON, CONCURRENCY_ENV
from tests.support import cli


@pytest.fixture
def env(docker_engine, tmp_path, monkeypatch):
    # LocalBackend, its Store and the supervisors it starts read these from the environment.
    monkeypatch.setenv("DOCKER_HOST", docker_engine.host)
    monkeypatch.setenv("LAUNCHER_LOCAL_STATE", str(tmp_path / "state"))
    monkeypatch.setenv(CONCURRENCY_ENV, "2")
    (tmp_path / "efs").mkdir()
    return {
        **os.environ,
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_LOCAL_STATE": str(tmp_path / "state"),
    }


def efs(env) -> Path:
    return Path(env["LAUNCHER_LOCAL_STATE"]).parent / "efs"


def start(env, image: str, script: str, network: str | None = None, **kwargs) -> str:
    """A job the CLI would build, started through the library."""
    spec = JobSpec(
        name=kwargs.pop("name", "shape"),
        command=("sh", "-c", script),
        image=image,
        efa="off",
        **kwargs,
    )
    requests = jobdef.build(spec, cluster_info(efa=False))
    return local.LocalBackend("q", str(efs(env)), network=network).schedule(requests)


def wait(job_id: str, timeout: float = 90):
    return local.LocalBackend().wait(job_id, timeout=timeout)


def launcher(env, *args: str) -> subprocess.CompletedProcess:
    return cli.launcher(*args, env=env, timeout=120)


def no_job_containers(docker_engine) -> bool:
    client = docker_engine.client()
    return client.containers.list(all=True, filters={"label": local.LABEL}) == []


def test_one_node_runs_as_a_container_job(env, busybox_base, docker_engine):
    job_id = start(
        env, busybox_base, 'echo "id=$AWS_BATCH_JOB_ID nodes=${AWS_BATCH_JOB_NUM_NODES:-unset}"'
    )
    record = local.Store().load(job_id)
    assert record.single_node and record.nodes == 1
    job = wait(job_id)
    assert job.state == "SUCCEEDED", job.reason
    lines = [line.message for line in local.LocalBackend().log_iter(job_id)]
    assert lines == [f"id={job_id} nodes=unset"]  # Batch's single-job variables, no node ones
    assert no_job_containers(docker_engine)


def test_an_array_runs_every_child_with_its_index_a_few_at_a_time(env, busybox_base):
    out = efs(env)
    script = (
        'i=$AWS_BATCH_JOB_ARRAY_INDEX; mkdir -p "$LAUNCHER_EFS/running/$i"; '
        'ls "$LAUNCHER_EFS/running" | wc -l >> "$LAUNCHER_EFS/at-once"; sleep 1; '
        'echo "child $i of $AWS_BATCH_JOB_ARRAY_SIZE"; rmdir "$LAUNCHER_EFS/running/$i"'
    )
    job_id = start(env, busybox_base, script, array_size=5)
    time.sleep(1.5)
    running = local.LocalBackend().describe(job_id)
    assert running.state == "PENDING"  # an array's parent stays PENDING while children run
    assert sum(running.children.values()) == 5
    job = wait(job_id)
    assert job.state == "SUCCEEDED", job.reason
    assert job.children == {"SUCCEEDED": 5}
    counts = [int(n) for n in (out / "at-once").read_text().split()]
    assert len(counts) == 5 and max(counts) <= 2  # LAUNCHER_LOCAL_ARRAY_CONCURRENCY=2

    status = launcher(env, "status", job_id)
    assert status.returncode == 0, status.stderr
    assert "children: 5 SUCCEEDED (of 5)" in status.stdout
    logs = launcher(env, "logs", job_id, "--index", "3")
    assert logs.stdout == "[node 0] child 3 of 5\n", logs.stderr
    whole = launcher(env, "logs", job_id)
    assert whole.returncode == 2 and "pass --index 0-4" in whole.stderr
    beyond = launcher(env, "logs", job_id, "--index", "5")
    assert beyond.returncode == 2 and "has children 0-4" in beyond.stderr
    listed = local.LocalBackend().list(include_finished=True)
    assert [j.job_id for j in listed] == [job_id]  # children are listed through the parent


def test_a_failed_child_fails_the_array_and_the_others_run(env, busybox_base):
    job_id = start(env, busybox_base, '[ "$AWS_BATCH_JOB_ARRAY_INDEX" != 1 ]', array_size=3)
    job = wait(job_id)
    assert (job.state, job.reason) == ("FAILED", ARRAY_REASON.format(failed=1, size=3))
    assert job.children == {"SUCCEEDED": 2, "FAILED": 1}
    assert wait(f"{job_id}:1").exit_code == 1


def test_a_dependant_waits_in_pending_then_runs(env, busybox_base):
    first = start(env, busybox_base, 'sleep 3; echo made > "$LAUNCHER_EFS/made"', name="pre")
    second = start(env, busybox_base, 'cat "$LAUNCHER_EFS/made"', after=(Dependency(first),))
    time.sleep(1)
    waiting = local.LocalBackend().describe(second)
    assert (waiting.state, waiting.depends_on) == ("PENDING", (first,))
    status = launcher(env, "status", second).stdout
    assert f"waiting for: {first} (RUNNING)" in status
    assert wait(second).state == "SUCCEEDED"
    assert wait(first).stopped_at <= local.LocalBackend().describe(second).started_at
    assert [line.message for line in local.LocalBackend().log_iter(second)] == ["made"]


def test_a_failed_dependency_fails_the_dependant_without_running_it(env, busybox_base):
    first = start(env, busybox_base, "exit 4", name="pre")
    second = start(env, busybox_base, "echo never", after=(Dependency(first),))
    third = start(env, busybox_base, "echo never", after=(Dependency(second),))
    for job_id in (second, third):
        job = wait(job_id)
        assert job.state == "FAILED" and job.reason.startswith("Dependency "), job.reason
        assert job.attempts == 0 and job.started_at is None
    assert first in wait(second).reason and second in wait(third).reason


def test_each_pairs_array_children_index_by_index(env, busybox_base):
    produce = start(
        env,
        busybox_base,
        'i=$AWS_BATCH_JOB_ARRAY_INDEX; sleep $((2 - i)); echo "shard $i" > "$LAUNCHER_EFS/s$i"',
        array_size=3,
        name="produce",
    )
    consume = start(
        env,
        busybox_base,
        'cat "$LAUNCHER_EFS/s$AWS_BATCH_JOB_ARRAY_INDEX"',
        array_size=3,
        after=(Dependency(produce, each=True),),
    )
    assert wait(consume).state == "SUCCEEDED"
    for i in range(3):
        lines = [line.message for line in local.LocalBackend().log_iter(f"{consume}:{i}")]
        assert lines == [f"shard {i}"]
    with pytest.raises(UsageError, match="an array of 3; ':each' pairs"):
        start(env, busybox_base, "true", array_size=2, after=(Dependency(produce, each=True),))


def test_unknown_dependencies_are_refused_before_anything_starts(env, busybox_base):
    with pytest.raises(UsageError, match="no such local job"):
        start(env, busybox_base, "true", after=(Dependency("local-0000aaaa"),))
    with pytest.raises(UsageError, match="not a local job id"):
        start(
            env,
            busybox_base,
            "true",
            after=(Dependency("0b5e4c1e-5f7a-4a57-9d2b-1c2d3e4f5a6b"),),
        )
    assert local.LocalBackend().list(include_finished=True) == []


def test_cancel_ends_an_array_and_a_waiting_job(env, busybox_base, docker_engine):
    array = start(env, busybox_base, "sleep 600", array_size=3)
    waiting = start(env, busybox_base, "true", after=(Dependency(array),))
    time.sleep(2)
    child = launcher(env, "cancel", f"{array}:0")
    assert child.returncode == 0, child.stderr
    assert wait(f"{array}:0", timeout=30).reason == CANCEL_REASON
    assert local.LocalBackend().describe(array).state == "PENDING"  # the others run on
    assert launcher(env, "cancel", array).returncode == 0
    job = wait(array, timeout=60)
    assert (job.state, job.reason) == ("FAILED", CANCEL_REASON)
    assert job.children == {"FAILED": 3}
    dependant = wait(waiting, timeout=30)
    assert dependant.state == "FAILED" and array in dependant.reason
    assert no_job_containers(docker_engine)


def test_cancel_of_a_waiting_job_needs_no_wait(env, busybox_base):
    first = start(env, busybox_base, "sleep 600", name="long")
    second = start(env, busybox_base, "true", after=(Dependency(first),))
    assert local.LocalBackend().cancel(second).state == "PENDING"
    assert (wait(second, timeout=10).reason) == CANCEL_REASON
    local.LocalBackend().cancel(first)
    wait(first, timeout=30)


@pytest.fixture(scope="module")
def stack(moto_server, synth_default):
    moto_server.reset()
    return moto_server.deploy(synth_default.outdir, synth_default.stack_names)["EfaBatch"]


def test_a_three_step_pipeline_through_the_api(
    stack, moto_server, env, busybox_base, monkeypatch, docker_engine
):
    """The README's pipeline: preprocess (one node) -> train (2 nodes) -> evaluate."""
    from launcher import Cluster
    from tests.support.processes import rendezvous_port

    for key, value in moto_server.env.items():
        monkeypatch.setenv(key, value)
    cluster = Cluster.from_stack().local(efs(env))
    pre = cluster.run(["sh", "-c", 'sleep 2; echo 3 > "$LAUNCHER_EFS/epochs"'], image=busybox_base)
    train = cluster.run(
        ["sh", "-c", 'echo "trained $(cat "$LAUNCHER_EFS/epochs") epochs" > "$LAUNCHER_EFS/m"'],
        nodes=2,
        image=busybox_base,
        after=[pre],
        rendezvous_port=rendezvous_port(),
    )
    evaluate = cluster.run(["sh", "-c", 'cat "$LAUNCHER_EFS/m"'], image=busybox_base, after=[train])
    assert evaluate.status().state == "PENDING"
    done = evaluate.wait(timeout=120, poll=0.5)
    assert done.state == "SUCCEEDED", done.reason
    # (beside the prelude's EFA warning on stderr, busybox having no libfabric: the two
    # streams' lines may come in either order under load)
    assert "trained 3 epochs" in [line.message for line in evaluate.logs()]
    assert train.status().nodes == 2 and pre.status().nodes == 1
    assert no_job_containers(docker_engine)


def test_an_unknown_job_to_wait_for_exits_2_before_anything_is_built(
    stack, moto_server, env, busybox_base, tmp_path
):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "x.py").write_text("print(1)\n")
    for missing in ("local-00000000-0000-0000-0000-000000000000", "no-such-job"):
        result = launcher(
            {**env, **moto_server.env},
            "run",
            "--local",
            "--image",
            busybox_base,
            "--workspace",
            str(workspace),
            "--after",
            missing,
            "--",
            "true",
        )
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("launcher: error: ") and missing in line
    assert local.LocalBackend().list(include_finished=True) == []


def test_a_resubmitted_single_node_job_stays_single_node(env, busybox_base):
    first = start(env, busybox_base, 'echo "$AWS_BATCH_JOB_ID $LAUNCHER_CHECKPOINT_DIR"')
    assert wait(first).state == "SUCCEEDED"
    again, checkpoint = local.LocalBackend().resubmit(first)
    assert wait(again).state == "SUCCEEDED"
    assert local.Store().load(again).single_node
    lines = [line.message for line in local.LocalBackend().log_iter(again)]
    assert lines == [f"{again} {checkpoint}"] and checkpoint.endswith(first)


def test_a_resubmitted_array_resumes_each_child_in_its_own_directory(env, busybox_base):
    """Each child of the first run kept its checkpoints under its own job id (PARENT:K); the
    resubmission's children go on in those directories, not in one they would share."""
    script = 'echo "$AWS_BATCH_JOB_ARRAY_INDEX" >> "$LAUNCHER_CHECKPOINT_DIR/runs"'
    first = start(env, busybox_base, script, array_size=2)
    assert wait(first).state == "SUCCEEDED"
    again, checkpoint = local.LocalBackend().resubmit(first)
    assert wait(again).state == "SUCCEEDED"
    assert checkpoint.endswith(f"/checkpoints/{first}")
    root = efs(env) / "checkpoints"
    for k in (0, 1):
        assert (root / f"{first}:{k}" / "runs").read_text() == f"{k}\n{k}\n"
    assert not (root / first).exists() and not (root / again).exists()


@pytest.mark.parametrize(("network", "ports"), [(None, 1), ("host", 3)])
def test_array_children_running_at_once_never_meet_on_a_port(env, busybox_base, network, ports):
    """On Batch each child has a node to itself. Here each has a network of its own, so the
    job's one rendezvous port serves them all; on this machine's network (--local-network
    host) they would share it, so a child's torchrun (MASTER_PORT from LAUNCHER_MAIN_PORT)
    gets a port of its own."""
    script = 'echo "$LAUNCHER_MAIN_PORT $MASTER_PORT"; sleep 1'
    job_id = start(env, busybox_base, script, array_size=3, network=network)
    assert wait(job_id).state == "SUCCEEDED"
    found = []
    for k in range(3):
        ((main, master),) = [
            line.message.split() for line in local.LocalBackend().log_iter(f"{job_id}:{k}")
        ]
        assert main == master
        found.append(main)
    assert len(set(found)) == ports
