"""The real `launcher` console script against a moto server over HTTP, with the real stack."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time

import pytest

from devenv import moto_gaps
from devenv.emulator import ACCOUNT, REGION
from launcher.stack.outputs import DEFAULT_STACK_NAME
from tests.support.service_model import assert_valid

LAUNCHER = shutil.which("launcher") or os.path.join(os.path.dirname(os.sys.executable), "launcher")
IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/base@sha256:" + "a" * 64


@pytest.fixture(scope="module")
def cluster(moto_server, synth_default):
    moto_server.reset()
    moto_server.deploy(synth_default.outdir, synth_default.stack_names)
    return moto_server


def launcher(server, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "LAUNCHER_STACK"}
    full_env.update({**server.env, **(env or {})})
    return subprocess.run(
        [LAUNCHER, *args], env=full_env, capture_output=True, text=True, timeout=120, check=False
    )


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, result.stderr
    return result


def state(server) -> tuple[int, int]:
    """(job definitions, jobs) in the account: what a refused command must leave unchanged."""
    batch = server.client("batch")
    definitions = batch.describe_job_definitions()["jobDefinitions"]
    jobs = batch.list_jobs(
        jobQueue="EfaBatch-jobs", filters=[{"name": "AFTER_CREATED_AT", "values": ["0"]}]
    )
    return len(definitions), len(jobs["jobSummaryList"])


def submit(server, *extra: str) -> subprocess.CompletedProcess:
    return launcher(
        server,
        "run",
        "--no-workspace",
        "--image",
        IMAGE,
        "--nodes",
        "2",
        *extra,
        "--",
        "python",
        "train.py",
        "--epochs",
        "1",
    )


def test_outputs_discovers_the_cluster_from_one_stack_name(cluster):
    data = json.loads(ok(launcher(cluster, "outputs", "-o", "json")).stdout)
    assert data["stack_name"] == DEFAULT_STACK_NAME
    assert data["job_queue_name"] == "EfaBatch-jobs"
    assert data["efa_interfaces"] == 4 and data["gpus_per_node"] == 8
    text = ok(launcher(cluster, "outputs")).stdout
    assert text.splitlines()[0] == f"stack     {DEFAULT_STACK_NAME} (us-east-1)"
    assert "fsap-" not in text
    assert text.endswith("every value (ARNs, ids): launcher outputs --all\n")
    every = ok(launcher(cluster, "outputs", "--all")).stdout
    assert "access_point_id" in every and "fsap-" in every
    # Readable values, not Python's: an empty list or mapping is "-", pairs are key=value.
    assert "[]" not in every and "{" not in every and "None" not in every
    assert re.search(r"^pull_through_cache +ecr-public=public\.ecr\.aws$", every, re.M)


def test_dryrun_prints_valid_requests_and_changes_nothing(cluster):
    before = state(cluster)
    result = ok(submit(cluster, "--dryrun", "--env", "NCCL_DEBUG=INFO", "--timeout", "90m"))
    requests = json.loads(result.stdout)
    assert set(requests) == {"registerJobDefinition", "submitJob"}
    assert_valid("batch", "RegisterJobDefinition", requests["registerJobDefinition"])
    assert_valid("batch", "SubmitJob", requests["submitJob"])
    assert requests["registerJobDefinition"]["timeout"] == {"attemptDurationSeconds": 5400}
    assert state(cluster) == before


def test_run_status_describe_logs_then_resubmit_registers_nothing(cluster):
    first = ok(submit(cluster))
    job_id = first.stdout.strip().splitlines()[-1]
    assert "registered job definition" in first.stderr
    definitions, _ = state(cluster)

    assert ok(launcher(cluster, "status", job_id)).stdout.split()[2] == "RUNNABLE"
    described = json.loads(ok(launcher(cluster, "describe", job_id, "-o", "json")).stdout)
    assert (described["nodes"], described["state"]) == (2, "RUNNABLE")
    assert [n["index"] for n in described["node_status"]] == [0, 1]
    text = ok(launcher(cluster, "describe", job_id)).stdout
    assert "RUNNABLE" in text and "node 1" in text

    moto_gaps.run_job(
        ACCOUNT,
        REGION,
        job_id,
        success=True,
        node_logs={0: ["rank 0 ready", "loss 0.5"], 1: ["rank 1 ready"]},
    )
    assert ok(launcher(cluster, "status", job_id)).stdout.split()[2] == "SUCCEEDED"
    logs = ok(launcher(cluster, "logs", job_id)).stdout.splitlines()
    assert sorted(logs) == ["[node 0] loss 0.5", "[node 0] rank 0 ready", "[node 1] rank 1 ready"]
    assert logs.index("[node 0] rank 0 ready") < logs.index("[node 0] loss 0.5")  # per node
    assert ok(launcher(cluster, "logs", job_id, "--node", "1")).stdout == "rank 1 ready\n"
    assert ok(launcher(cluster, "logs", job_id, "--since", "10m", "-f")).stdout.count("\n") == 3

    second = ok(submit(cluster))
    assert "reusing job definition" in second.stderr
    assert state(cluster)[0] == definitions


def submit_image(server, image: str) -> str:
    result = ok(
        launcher(server, "run", "--no-workspace", "--image", image, "--nodes", "2", "--", "true")
    )
    return result.stdout.strip().splitlines()[-1]


def test_resubmit_reuses_the_definition_and_the_first_jobs_checkpoint_directory(
    cluster, busybox_base
):
    first = submit_image(cluster, busybox_base)
    moto_gaps.run_job(ACCOUNT, REGION, first, success=False)
    definitions, _ = state(cluster)

    second = ok(launcher(cluster, "resubmit", first)).stdout.strip().splitlines()[-1]
    third = ok(launcher(cluster, "resubmit", second)).stdout.strip().splitlines()[-1]

    assert state(cluster)[0] == definitions  # nothing registered
    batch = cluster.client("batch")
    jobs = {j["jobId"]: j for j in batch.describe_jobs(jobs=[first, second, third])["jobs"]}
    assert len({j["jobDefinition"] for j in jobs.values()}) == 1
    directory = f"/mnt/efs/checkpoints/{first}"
    for job_id in (second, third):
        overrides = moto_gaps.node_overrides(ACCOUNT, REGION, job_id)
        assert_valid(
            "batch",
            "SubmitJob",
            {"jobName": "x", "jobQueue": "q", "jobDefinition": "d", "nodeOverrides": overrides},
        )
        (node_range,) = overrides["nodePropertyOverrides"]
        assert node_range["targetNodes"] == "0:"  # as the definition names its range
        checkpoint, token = node_range["containerOverrides"]["environment"]
        assert checkpoint == {"name": "LAUNCHER_CHECKPOINT_DIR", "value": directory}
        assert token["name"] == "LAUNCHER_WATCH_TOKEN"  # the node watch's: new with each job
        assert jobs[job_id]["tags"]["efa-batch:checkpoint"] == directory


def test_resubmit_of_a_job_whose_image_expired_says_so_and_submits_nothing(
    cluster, docker_engine, registry
):
    """The repository's lifecycle policy expires workspace images by age: a resubmission
    after that would fail on every node pulling it; it is refused with the reason instead."""
    import requests

    from devenv.images import push_busybox_base

    repository = f"{registry.host}/expiring"
    push_busybox_base(docker_engine.client(), repository, "gone")
    head = requests.head(
        f"http://{registry.host}/v2/expiring/manifests/gone",
        headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
        timeout=10,
    )
    digest = head.headers["Docker-Content-Digest"]
    job = submit_image(cluster, f"{repository}@{digest}")
    requests.delete(f"http://{registry.host}/v2/expiring/manifests/{digest}", timeout=10)
    before = state(cluster)
    result = launcher(cluster, "resubmit", job)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert f"its image {repository}@{digest} is no longer in its repository" in line
    assert state(cluster) == before


def test_cancel_fails_the_job_and_refuses_a_finished_one(cluster):
    job_id = ok(submit(cluster)).stdout.strip().splitlines()[-1]
    assert "cancelled" in ok(launcher(cluster, "cancel", job_id)).stderr
    line = ok(launcher(cluster, "status", job_id)).stdout
    assert "FAILED (cancelled with launcher cancel)" in line
    again = launcher(cluster, "cancel", job_id)
    assert again.returncode == 2
    assert "already FAILED" in again.stderr


def test_list_shows_active_jobs_and_all_with_all(cluster):
    active_id = ok(submit(cluster)).stdout.strip().splitlines()[-1]
    active = ok(launcher(cluster, "list")).stdout
    everything = json.loads(ok(launcher(cluster, "list", "--all", "-o", "json")).stdout)
    assert active_id in active
    assert "SUCCEEDED" not in active and "FAILED" not in active
    statuses = {j["state"] for j in everything}
    assert {"RUNNABLE", "SUCCEEDED", "FAILED"} <= statuses


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--nodes", "3"], "--nodes 3: EfaBatch runs at most 2"),
        (["--env", "BROKEN"], "--env 'BROKEN': expected NAME=VALUE"),
        (["--mount", "type=nfs,dst=/x"], "unknown type 'nfs'"),
        (["--timeout", "30s"], "--timeout '30s': AWS Batch needs at least 60 seconds"),
        (["--retries", "11"], "--retries 11: allowed 1-10"),
        (["--priority", "5"], "has no fair-share scheduling policy"),
        (["--gpus-per-node", "9"], "p4d.24xlarge has 8 GPUs"),
        (["--nodes", "0"], "--nodes 0: a job needs at least 1 node"),
        # Batch fails a job with more than 50 tags, the launcher's two included (SubmitJob).
        ([a for i in range(49) for a in ("--tag", f"k{i}=v")], "exceed AWS Batch's 50 per job"),
        (["--share-id", "a b"], "--share-id 'a b': use 1-255 letters and digits"),
        (["--efa", "require", "--gpus-per-node", "9"], "p4d.24xlarge has 8 GPUs"),
        # The stack decides what jobs may read and run (its job_secrets, allow_privileged).
        (["--secret", "TOKEN=team/token"], "lets jobs read only secrets under its job_secrets"),
        (["--secret", "TOKEN"], "expected NAME=SECRET"),
        (["--privileged"], "does not run privileged containers"),
        (["--mount", "type=fsx,dst=/data"], "has no FSx for Lustre file system"),
        (["--ulimit", "nofile=9:1"], "the soft limit must not exceed the hard limit"),
        (["--tmpfs", "/scratch"], "expected DST:SIZE"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_submits_nothing(cluster, args, fragment):
    before = state(cluster)
    result = submit(cluster, *args)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("launcher: error: ") and fragment in line
    assert result.stdout == ""
    assert state(cluster) == before


def test_unknown_stack_and_unknown_job(cluster):
    result = launcher(cluster, "--stack", "Nope", "outputs")
    assert result.returncode == 2
    assert "stack Nope not found in us-east-1" in result.stderr
    result = launcher(cluster, "status", "00000000-0000-0000-0000-000000000000")
    assert result.returncode == 2
    assert "no such job" in result.stderr
    debug = launcher(cluster, "--debug", "status", "00000000-0000-0000-0000-000000000000")
    assert "Traceback" in debug.stderr


def test_stack_from_the_environment_variable(cluster):
    result = launcher(cluster, "outputs", env={"LAUNCHER_STACK": "Missing"})
    assert result.returncode == 2
    assert "stack Missing not found" in result.stderr
    assert ok(
        launcher(cluster, "--stack", "EfaBatch", "outputs", env={"LAUNCHER_STACK": "Missing"})
    )


def test_aws_failure_exits_1_with_the_failed_call(cluster):
    result = launcher(
        cluster, "outputs", env={"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_MAX_ATTEMPTS": "1"}
    )
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("launcher: error: nothing answers at http://127.0.0.1:9, the AWS ")


def test_run_follow_streams_every_node_and_exits_with_the_job(cluster):
    before = {j["job_id"] for j in json.loads(ok(launcher(cluster, "list", "-o", "json")).stdout)}
    env = {k: v for k, v in os.environ.items() if k != "LAUNCHER_STACK"} | cluster.env
    args = ["run", "--no-workspace", "--image", IMAGE, "--nodes", "2", "--follow", "--", "x"]
    follower = subprocess.Popen(
        [LAUNCHER, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        for _ in range(100):
            listed = json.loads(ok(launcher(cluster, "list", "-o", "json")).stdout)
            new = [j["job_id"] for j in listed if j["job_id"] not in before]
            if new:
                break
            time.sleep(0.2)
        (job_id,) = new
        moto_gaps.run_job(
            ACCOUNT,
            REGION,
            job_id,
            success=False,
            node_logs={0: ["main says hi"], 1: ["worker says hi"]},
        )
        out, err = follower.communicate(timeout=60)
    finally:
        follower.kill()
    assert follower.returncode == 1  # the job failed
    assert out.strip().splitlines()[-1] == job_id
    assert "[node 0] main says hi" in err and "[node 1] worker says hi" in err
    assert f"{job_id} x FAILED" in err


def test_forty_eight_tags_are_accepted(cluster):
    tags = [a for i in range(48) for a in ("--tag", f"k{i}=v")]
    requests = json.loads(ok(submit(cluster, "--dryrun", *tags)).stdout)
    assert len(requests["submitJob"]["tags"]) == 49  # with the stack's own; resubmit adds one


def test_status_says_why_a_job_waits_and_what_to_do(cluster):
    job_id = ok(submit(cluster)).stdout.strip().splitlines()[-1]
    reason = (
        "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - Service cannot fulfill the capacity requested "
        "for instance type [p4d.24xlarge]"
    )
    moto_gaps.block_job(ACCOUNT, REGION, job_id, reason)
    line, advice = ok(launcher(cluster, "status", job_id)).stdout.splitlines()
    assert line.endswith(f"RUNNABLE ({reason})")
    assert advice.startswith("  what to do: waiting for EC2 capacity")
    assert "what to do" in ok(launcher(cluster, "describe", job_id)).stdout


def _ended_with_75(server, main_lines: list[str], worker: dict) -> str:
    """A 2-node job whose one attempt ended with 75 on its main node (whose log holds
    ``main_lines``) and with ``worker`` ({"code": ..., "reason": ...}) on node 1; its id."""
    job_id = ok(submit(server)).stdout.strip().splitlines()[-1]
    moto_gaps.start_job(ACCOUNT, REGION, job_id)
    moto_gaps.put_node_lines(ACCOUNT, REGION, job_id, {0: main_lines})
    hosts = {n: f"arn:aws:ecs:{REGION}:{ACCOUNT}:container-instance/c/{n}" for n in range(2)}
    codes = {0: 75, **({1: worker["code"]} if "code" in worker else {})}
    reasons = {1: worker["reason"]} if "reason" in worker else None
    moto_gaps.end_attempt_on_hosts(
        ACCOUNT, REGION, job_id, hosts, codes, retry=False, reasons=reasons
    )
    return job_id


def _node_1(server, job_id: str) -> tuple[str, dict, str, dict]:
    """status's text and JSON, describe's text and JSON."""
    return (
        ok(launcher(server, "status", job_id)).stdout,
        json.loads(ok(launcher(server, "status", job_id, "-o", "json")).stdout),
        ok(launcher(server, "describe", job_id)).stdout,
        json.loads(ok(launcher(server, "describe", job_id, "-o", "json")).stdout),
    )


def test_a_forged_lost_nodes_line_is_shown_as_the_main_nodes_claim(cluster):
    """Issue 43 (8). The main node's log stream is written by the job's own code (and by
    anyone allowed logs:PutLogEvents on the job log group: the nodes' instance role, which
    single-node jobs reach through IMDS), so its lost-nodes line is the main node's claim. Here
    it names node 1, whose record says it ran to its own end (exit 143): status and describe
    say so as the main node's words, and describe's row for node 1 as its record has it."""
    forged = "launcher: node(s) 1 lost: ending with exit code 75 so that the job is tried again"
    job_id = _ended_with_75(cluster, ["training", forged], {"code": 143})

    status, status_json, text, described = _node_1(cluster, job_id)

    said = "the main node's log says node(s) 1 lost (its own words: their records do not say so)"
    assert f"  nodes: {said}\n" in status
    assert status_json["lost_nodes"] == described["lost_nodes"] == said
    assert re.search(r"^node 1 +FAILED, exit 143$", text, re.M), text
    assert re.search(rf"^lost nodes +{re.escape(said)}$", text, re.M), text
    assert [n["fate"] for n in described["node_status"]] == [None, None]


def test_a_node_its_record_says_lost_is_named_with_no_log_line(cluster):
    """Issue 43 (8). Node 1's record (JOB#1) says its host went ("Host EC2 (instance ...)
    terminated.", ECS's stoppedReason as Batch gives it), with no exit code of its own, and the
    main node's log names nobody: status and describe name node 1 lost, from its record."""
    reason = "Host EC2 (instance i-0abc12345def67890) terminated."
    job_id = _ended_with_75(cluster, ["training"], {"reason": reason})

    status, status_json, text, described = _node_1(cluster, job_id)

    said = "node(s) 1 lost (their hosts went, by their records)"
    assert f"  nodes: {said}\n" in status
    assert status_json["lost_nodes"] == described["lost_nodes"] == said
    assert re.search(rf"^node 1 +FAILED, lost: {re.escape(reason)}$", text, re.M), text
    assert [n["fate"] for n in described["node_status"]] == [None, "lost"]
