"""AWS calls and wall time of the launcher's commands against a moto server over HTTP.

Baselines from the same run: one bare boto3 DescribeJobs call for the commands, and a bare
``python -c pass`` for ``launcher --help`` start-up.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench.emulated import deployed
from bench.stats import median_seconds, table
from devenv import moto_gaps
from devenv.emulator import ACCOUNT, REGION
from launcher.api import Cluster, Job
from launcher.aws import follow
from launcher.aws.batch import BatchBackend
from launcher.aws.client import Aws
from launcher.job import jobdef
from launcher.job.jobspec import JobSpec

RUNS = 5
LIST_JOBS = 1000
IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/base@sha256:" + "b" * 64


def _measure(aws: Aws, fn) -> tuple[int, float]:
    """Calls of one execution, and the median wall time of RUNS executions."""
    before = aws.calls
    fn()
    calls = aws.calls - before
    return calls, median_seconds(fn, RUNS)


def run() -> str:
    with deployed():
        aws = Aws()
        cluster = Cluster.from_stack("EfaBatch", aws=aws).info
        rows = []

        raw = aws.session.client("batch")
        baseline = median_seconds(lambda: raw.describe_jobs(jobs=["none"]), RUNS)
        rows.append(["baseline: one bare boto3 DescribeJobs", 1, f"{baseline * 1000:.1f}", "1.0"])

        counter = iter(range(10**6))

        def new_run() -> str:
            spec = JobSpec(
                name="train",
                command=("python", "train.py", str(next(counter))),
                image=IMAGE,
                nodes=2,
            )
            return Cluster.from_stack("EfaBatch", aws=aws).run(spec=spec).job_id

        fixed = JobSpec(name="train", command=("python", "train.py"), image=IMAGE, nodes=2)
        again = follow.Hub()

        def repeated_run() -> str:
            return Cluster.from_stack("EfaBatch", aws=aws).run(spec=fixed).job_id

        repeated_run()  # registers once; every later run reuses it
        job_id = repeated_run()
        moto_gaps.run_job(
            ACCOUNT, REGION, job_id, success=True, node_logs={0: ["a"] * 50, 1: ["b"] * 50}
        )
        measured = {
            "run, new job definition": lambda: _measure(aws, new_run),
            "run, identical job (definition reused)": lambda: _measure(aws, repeated_run),
            "status": lambda: _measure(aws, lambda: Job(job_id, BatchBackend(aws)).status()),
            # Each read with a new process's budget (follow.Hub), as `launcher logs JOB` has:
            # its 3 calls start at once from the allowance.
            "logs, 2 nodes x 50 lines": lambda: _measure(
                aws, lambda: list(Job(job_id, BatchBackend(aws, logs=follow.Hub())).logs())
            ),
            # Read after read in one process: the process's limiter paces them at one call a
            # second once the allowance is spent (a loop of reads cannot flood the quota).
            "logs, the same, read after read in one process": lambda: _measure(
                aws, lambda: list(Job(job_id, BatchBackend(aws, logs=again)).logs())
            ),
        }
        for label, fn in measured.items():
            calls, seconds = fn()
            rows.append([label, calls, f"{seconds * 1000:.1f}", f"{seconds / baseline:.1f}"])

        batch = aws.session.client("batch")
        definition = jobdef.build(fixed, cluster).register["jobDefinitionName"]
        existing = len(BatchBackend(aws, cluster.job_queue_arn).list(include_finished=True))
        for i in range(LIST_JOBS - existing):
            batch.submit_job(
                jobName=f"bulk{i}", jobQueue=cluster.job_queue_arn, jobDefinition=definition
            )

        def list_all() -> int:
            listed = Cluster.from_stack("EfaBatch", aws=aws).list(all=True)
            assert len(listed) == LIST_JOBS, len(listed)
            return len(listed)

        calls, seconds = _measure(aws, list_all)
        rows.append(
            [
                f"list --all, {LIST_JOBS} jobs (complete)",
                calls,
                f"{seconds * 1000:.1f}",
                f"{seconds / baseline:.1f}",
            ]
        )

    rows.append(_list_with_teams(baseline))

    python = median_seconds(
        lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), RUNS
    )
    launcher = os.path.join(os.path.dirname(sys.executable), "launcher")
    help_time = median_seconds(
        lambda: subprocess.run([launcher, "--help"], check=True, capture_output=True), RUNS
    )
    startup = table(
        ["start-up", f"median of {RUNS} (ms)", "ratio to bare Python"],
        [
            ["python -c pass (baseline)", f"{python * 1000:.0f}", "1.0"],
            ["launcher --help", f"{help_time * 1000:.0f}", f"{help_time / python:.1f}"],
        ],
    )
    commands = table(
        [
            "command (library, in-process)",
            "AWS calls",
            f"median of {RUNS} (ms)",
            "ratio to baseline",
        ],
        rows,
    )
    return f"{commands}\n\n{startup}"


def _list_with_teams(baseline: float) -> list[object]:
    """``list --all`` of LIST_JOBS jobs on cdk.json's three-team stack, where the table shows
    each job's TEAM (its tag: one DescribeJobs per 100 jobs, since ListJobs gives no tags) and
    SHARE (ListJobs gives it)."""
    with deployed(env="teams"):
        aws = Aws()
        vision = Cluster.from_stack("EfaBatch", aws=aws, team="vision").info
        fixed = JobSpec(name="train", command=("python", "train.py"), image=IMAGE, nodes=2)
        requests = jobdef.build(fixed, vision)
        batch = aws.session.client("batch")
        batch.register_job_definition(**requests.register)
        for i in range(LIST_JOBS):
            batch.submit_job(**{**requests.submit, "jobName": f"bulk{i}"})

        def list_all() -> int:
            listed = Cluster.from_stack("EfaBatch", aws=aws).list(all=True)
            assert len(listed) == LIST_JOBS and listed[0].team == "vision", len(listed)
            return len(listed)

        calls, seconds = _measure(aws, list_all)
    label = f"list --all, {LIST_JOBS} jobs, a stack with teams (TEAM, SHARE)"
    return [label, calls, f"{seconds * 1000:.1f}", f"{seconds / baseline:.1f}"]


if __name__ == "__main__":
    start = time.time()
    print(run())
    print(f"\n({time.time() - start:.0f} s)")
