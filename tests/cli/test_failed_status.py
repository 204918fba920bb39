"""`launcher status` of a failed AWS job shows its exit code and what it means, not ECS's
"Essential container in task exited", and describe and `-o json` agree (the moto server plays
Batch: devenv.moto_gaps ends a job's attempt with each node's exit code)."""

from __future__ import annotations

import json
import re

import pytest

from devenv import moto_gaps
from tests.cli.test_commands import ACCOUNT, REGION, launcher, ok, submit


@pytest.fixture(scope="module")
def cluster(moto_server, synth_default):
    moto_server.reset()
    moto_server.deploy(synth_default.outdir, synth_default.stack_names)
    return moto_server


def ended(server, codes: dict[int, int]) -> str:
    """A 2-node job whose one attempt ended with ``codes`` (node -> exit code); its id."""
    job_id = ok(submit(server)).stdout.strip().splitlines()[-1]
    moto_gaps.start_job(ACCOUNT, REGION, job_id)
    moto_gaps.put_node_lines(ACCOUNT, REGION, job_id, {0: ["loss is nan"]})
    hosts = {n: f"arn:aws:ecs:{REGION}:{ACCOUNT}:container-instance/c/{n}" for n in codes}
    moto_gaps.end_attempt_on_hosts(ACCOUNT, REGION, job_id, hosts, codes, retry=False)
    return job_id


def test_status_shows_the_exit_code_and_json_has_it(cluster):
    job_id = ended(cluster, {0: 3, 1: 0})
    out = ok(launcher(cluster, "status", job_id)).stdout
    assert out.splitlines()[0] == f"{job_id} train FAILED (exit code 3)", out
    status = json.loads(ok(launcher(cluster, "status", job_id, "-o", "json")).stdout)
    assert (status["state"], status["exit_code"]) == ("FAILED", 3)
    assert {"reason", "last_exit_code", "node_status", "what_to_do"} <= set(status)  # kept
    assert status["reason"] is None or not status["reason"].startswith("exit code"), status
    text = ok(launcher(cluster, "describe", job_id)).stdout
    assert re.search(r"^status +FAILED \(exit code 3\)$", text, re.M), text
    described = json.loads(ok(launcher(cluster, "describe", job_id, "-o", "json")).stdout)
    assert described["exit_code"] == 3


def test_a_multi_node_jobs_exit_code_is_its_main_nodes(cluster):
    """Batch decides a multi-node job by its main node: "The final job status (SUCCEEDED or
    FAILED) is determined by the final job status of the main node", and the job's own
    exit information is filled in from the main node's (AWS Batch user guide, "Multi-node
    parallel jobs", multi-node-parallel-jobs.html). So the job's exit code is node 0's (1
    here), as DescribeJobs gives it; a worker's own code (3) is on its row in describe. (The
    node prelude gives the main node a failed worker's code when the node watch stopped the
    main node's command: tests/node/test_watch.py.)"""
    job_id = ended(cluster, {0: 1, 1: 3})
    line = ok(launcher(cluster, "status", job_id)).stdout.splitlines()[0]
    assert line == f"{job_id} train FAILED (exit code 1)"
    text = ok(launcher(cluster, "describe", job_id)).stdout
    assert re.search(r"^status +FAILED \(exit code 1\)$", text, re.M), text
    assert re.search(r"^node 1 +FAILED, exit 3$", text, re.M), text


def test_a_command_not_found_reads_as_such(cluster):
    job_id = ended(cluster, {0: 127, 1: 127})
    line = ok(launcher(cluster, "status", job_id)).stdout.splitlines()[0]
    assert line == f"{job_id} train FAILED (exit code 127: the command was not found in the image)"
