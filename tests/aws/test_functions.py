"""Python functions on the emulated stack (``Cluster.remote`` on AWS): the payload lands in the
stack's function bucket under the caller's prefix, the job that reads it is the one submitted
(and the one the dry run shows), and the result comes back through S3.

moto's Batch starts no container: the job is held, and ``moto_gaps.run_job_commands`` plays its
nodes on this machine, the runner reading and writing the emulator's S3 as a node would.
"""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from devenv import moto_gaps
from devenv.emulator import ACCOUNT, REGION
from launcher import Cluster
from launcher.errors import UsageError
from launcher.node.function import FUNCTION_ENV, GATHER_ENV, RUNNER
from launcher.stack.outputs import OutputKey


@pytest.fixture(scope="module")
def stack(moto_server, synth_default):
    moto_server.reset()
    return moto_server.deploy(synth_default.outdir, synth_default.stack_names)["EfaBatch"]


@pytest.fixture
def cluster(stack, moto_server, monkeypatch, tmp_path):
    for key, value in moto_server.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return Cluster.from_stack("EfaBatch")


def add(a: int, b: int) -> dict[str, int]:
    import os

    return {"sum": a + b, "rank": int(os.environ["LAUNCHER_NODE_RANK"])}


def objects(moto_server, bucket: str) -> list[str]:
    found = moto_server.client("s3").list_objects_v2(Bucket=bucket, Prefix="functions/")
    return sorted(o["Key"] for o in found.get("Contents", []))


def submitted_environment(moto_server, job_id: str) -> dict[str, str]:
    return {
        e["name"]: e["value"]
        for r in moto_gaps.node_overrides(ACCOUNT, REGION, job_id)["nodePropertyOverrides"]
        for e in r["containerOverrides"]["environment"]
    }


def test_a_call_sends_its_payload_to_the_stacks_bucket_and_reads_every_ranks_value_back(
    cluster, stack, moto_server, python_base
):
    bucket = stack[OutputKey.FUNCTION_BUCKET.value]
    call = cluster.remote(add, nodes=2, image=python_base, ranks="all").submit(2, b=3)
    # The payload is in the stack's place, under the prefix of a stack without teams.
    (payload,) = objects(moto_server, bucket)
    assert payload.startswith("functions/") and payload.endswith("/payload")
    call_id = payload.split("/")[1]
    assert len(call_id) == 32 and int(call_id, 16) >= 0
    assert call.location == f"s3://{bucket}/functions/{call_id}/"
    body = moto_server.client("s3").get_object(Bucket=bucket, Key=payload)["Body"].read()
    with zipfile.ZipFile(io.BytesIO(body)) as bundle:
        names = bundle.namelist()
        assert json.loads(bundle.read("meta.json"))["cloudpickle"]
    assert {"meta.json", "call.pkl", "cloudpickle/__init__.py"} <= set(names)
    # The job reads it: every node is told where, and runs the runner.
    env = submitted_environment(moto_server, call.job_id)
    assert env[FUNCTION_ENV] == call.location and env[GATHER_ENV] == "all"
    job = moto_server.client("batch").describe_jobs(jobs=[call.job_id])["jobs"][0]
    assert job["status"] == "RUNNABLE"
    command = moto_gaps.node_container(ACCOUNT, REGION, call.job_id)["command"]
    assert command[-3:] == ["python3", "-c", RUNNER]
    # Its nodes run (played here); the values come back, and the call's objects go.
    assert moto_gaps.run_job_commands(ACCOUNT, REGION, call.job_id, moto_server.env) == 0
    assert call.result(timeout=30, poll=0.2) == [{"sum": 5, "rank": 0}, {"sum": 5, "rank": 1}]
    assert objects(moto_server, bucket) == []


def test_a_second_call_reuses_the_job_definition(cluster, moto_server, python_base):
    """The call's location travels in the submit's overrides, not the definition, which is
    named by its content (launcher.job.jobdef): one definition serves every call."""
    remote = cluster.remote(add, image=python_base)
    first, second = remote.submit(1, 2), remote.submit(3, 4)
    batch = moto_server.client("batch")
    jobs = batch.describe_jobs(jobs=[first.job_id, second.job_id])["jobs"]
    assert jobs[0]["jobDefinition"] == jobs[1]["jobDefinition"]
    assert first.location != second.location
    for call in (first, second):
        moto_gaps.run_job_commands(ACCOUNT, REGION, call.job_id, moto_server.env)
    assert [first.result(timeout=30, poll=0.2)["sum"], second.result(timeout=30)["sum"]] == [3, 7]


def test_the_dry_run_shows_the_job_that_would_read_the_payload_and_sends_nothing(
    cluster, stack, moto_server, python_base
):
    bucket = stack[OutputKey.FUNCTION_BUCKET.value]
    before = moto_server.client("batch").list_jobs(
        jobQueue=stack[OutputKey.JOB_QUEUE_ARN.value],
        filters=[{"name": "AFTER_CREATED_AT", "values": ["0"]}],
    )["jobSummaryList"]
    document = cluster.remote(add, nodes=2, image=python_base).dryrun(1, 2)
    location = document["payload"]["location"]
    assert location.startswith(f"s3://{bucket}/functions/") and location.endswith("/payload")
    assert document["payload"]["bytes"] > 0
    ranges = document["submitJob"]["nodeOverrides"]["nodePropertyOverrides"]
    told = {e["name"]: e["value"] for r in ranges for e in r["containerOverrides"]["environment"]}
    assert told[FUNCTION_ENV] + "payload" == location
    assert objects(moto_server, bucket) == []
    after = moto_server.client("batch").list_jobs(
        jobQueue=stack[OutputKey.JOB_QUEUE_ARN.value],
        filters=[{"name": "AFTER_CREATED_AT", "values": ["0"]}],
    )["jobSummaryList"]
    assert len(after) == len(before)


def test_a_stack_deployed_before_the_bucket_asks_for_a_deploy_before_anything_is_sent(
    cluster, moto_server, stack, python_base
):
    import dataclasses

    old = Cluster(dataclasses.replace(cluster.info, function_bucket=None), cluster.aws)
    with pytest.raises(UsageError) as raised:
        old.remote(add, image=python_base).submit(1, 2)
    assert str(raised.value) == (
        "stack EfaBatch has no bucket for Python functions (it was deployed before them): "
        "deploy it again with cdk deploy, or call locally with cluster.local()"
    )
