"""Job shapes on the emulated AWS Batch: the real `launcher` console script over HTTP."""

from __future__ import annotations

import json

import pytest

from devenv.emulator import ACCOUNT, REGION
from tests.cli.test_commands import launcher, ok, state
from tests.support.service_model import assert_valid

IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/base@sha256:" + "a" * 64
MISSING = "00000000-0000-4000-8000-000000000000"


@pytest.fixture(scope="module")
def cluster(moto_server, synth_default):
    moto_server.reset()
    moto_server.deploy(synth_default.outdir, synth_default.stack_names)
    return moto_server


def run(server, *args: str):
    return launcher(server, "run", "--no-workspace", "--image", IMAGE, *args, "--", "true")


def job_of(result) -> str:
    return ok(result).stdout.strip().splitlines()[-1]


def test_shapes_are_submitted_as_built(cluster):
    batch = cluster.client("batch")
    single = job_of(run(cluster))
    array = job_of(run(cluster, "--array", "3", "--after", single))
    paired = job_of(run(cluster, "--array", "3", "--after", f"{array}:each"))
    gang = job_of(run(cluster, "--nodes", "2", "--after", array, "--after", paired))
    jobs = {j["jobId"]: j for j in batch.describe_jobs(jobs=[single, array, paired, gang])["jobs"]}
    definition = batch.describe_job_definitions(jobDefinitions=[jobs[single]["jobDefinition"]])[
        "jobDefinitions"
    ][0]
    assert definition["type"] == "container"
    assert jobs[array]["arrayProperties"]["size"] == 3
    assert jobs[array]["dependsOn"] == [{"jobId": single}]
    assert jobs[paired]["dependsOn"] == [{"jobId": array, "type": "N_TO_N"}]
    assert [d["jobId"] for d in jobs[gang]["dependsOn"]] == [array, paired]
    described = json.loads(ok(launcher(cluster, "describe", paired, "-o", "json")).stdout)
    assert described["array_size"] == 3 and described["depends_on"] == [f"{array}:each"]


def test_dryrun_of_an_array_that_waits(cluster):
    single = job_of(run(cluster))
    requests = json.loads(ok(run(cluster, "--array", "4", "--after", single, "--dryrun")).stdout)
    assert requests["submitJob"]["arrayProperties"] == {"size": 4}
    assert_valid("batch", "SubmitJob", requests["submitJob"])
    assert_valid("batch", "RegisterJobDefinition", requests["registerJobDefinition"])


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--after", MISSING], f"job {MISSING}: no such job"),
        (["--after", "local-00000000-0000-4000-8000-000000000000"], "not a job id of aws jobs"),
        (["--array", "3", "--after", "ARRAY:each"], "not a job id of aws jobs"),
        (["--array", "10001"], "--array 10001: AWS Batch runs arrays of 2-10,000"),
    ],
)
def test_bad_shapes_exit_2_and_submit_nothing(cluster, args, fragment):
    before = state(cluster)
    result = run(cluster, *args)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("launcher: error: ") and fragment in line
    assert state(cluster) == before


def test_each_on_an_array_of_another_size_exits_2(cluster):
    array = job_of(run(cluster, "--array", "3"))
    before = state(cluster)
    result = run(cluster, "--array", "4", "--after", f"{array}:each")
    assert result.returncode == 2
    assert "that job is an array of 3; ':each' pairs the children" in result.stderr
    assert state(cluster) == before


def test_status_counts_children_and_logs_index_reads_one_child(cluster):
    from devenv import moto_gaps

    array = job_of(run(cluster, "--array", "3"))
    moto_gaps.run_container_job(ACCOUNT, REGION, f"{array}:1", lambda _: (0, ["shard 1 done"]))
    status = ok(launcher(cluster, "status", array)).stdout
    assert "children: 2 RUNNABLE, 1 SUCCEEDED (of 3)" in status, status
    logs = ok(launcher(cluster, "logs", array, "--index", "1")).stdout
    assert logs == "[node 0] shard 1 done\n"
    whole = launcher(cluster, "logs", array)
    assert whole.returncode == 2 and "pass --index 0-2" in whole.stderr
    child = ok(launcher(cluster, "status", f"{array}:1")).stdout
    assert child.split()[:3] == [f"{array}:1", "true", "SUCCEEDED"]
    cancelled = ok(launcher(cluster, "cancel", array))
    assert "cancelled" in cancelled.stderr
