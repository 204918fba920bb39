"""Following a 64-node job's logs: CloudWatch Logs calls a second, and every line delivered.

A 64-node job runs in the emulated account (moto over HTTP, the real stack); while it runs,
each node writes 100 numbered lines into its own stream. Two followers read it at the same
time, to its end:

- the launcher (``Job.logs(follow=True)``: FilterLogEvents over all streams, paced);
- the baseline, what the launcher did before: GetLogEvents on each node's stream every 2 s,
  following nextForwardToken.

Reported per follower, as medians over RUNS runs: its mean calls a second (the requests after
the first, over the time from the first to the last), its peak (the most HTTP requests it sent
in any one-second window) and the lines delivered; and whether every node's lines arrived
complete, in order and once, in every run.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable

from bench.emulated import deployed
from bench.stats import table
from launcher.api import Cluster, Job
from launcher.aws import Aws
from launcher.batch import BatchBackend
from launcher.jobspec import JobSpec
from tests.support import moto_gaps
from tests.support.emulator import ACCOUNT, REGION

NODES = 64
LINES = 100  # per node
WRITE_SECONDS = 20.0  # the job writes its lines over this long, then ends
BASELINE_POLL = 2.0  # seconds between the baseline's rounds over the nodes
RUNS = 3
IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/base@sha256:" + "c" * 64


def _write(job_id: str) -> None:
    """The nodes: one line each per step, LINES steps over WRITE_SECONDS, then the end."""
    moto_gaps.start_job(ACCOUNT, REGION, job_id)
    for step in range(LINES):
        lines = {n: [f"node {n} line {step}"] for n in range(NODES)}
        moto_gaps.put_node_lines(ACCOUNT, REGION, job_id, lines)
        time.sleep(WRITE_SECONDS / LINES)
    moto_gaps.finish_job(ACCOUNT, REGION, job_id, success=True)


def _launcher_follower(job_id: str, aws: Aws, got: dict[int, list[str]]) -> None:
    # As `launcher logs -f JOB` does: the job by its id, no stack read.
    for line in Job(job_id, BatchBackend(aws)).logs(follow=True):
        got.setdefault(line.node, []).append(line.message)


def _baseline_follower(job_id: str, aws: Aws, got: dict[int, list[str]]) -> None:
    """GetLogEvents per node every BASELINE_POLL seconds until the job has ended and a last
    round is read: what following cost before FilterLogEvents."""
    batch, logs = aws.session.client("batch"), aws.session.client("logs")
    tokens: dict[int, str] = {}
    group = streams = None
    while True:
        job = batch.describe_jobs(jobs=[job_id])["jobs"][0]
        if streams is None and job["status"] not in ("SUBMITTED", "PENDING", "RUNNABLE"):
            container = job["nodeProperties"]["nodeRangeProperties"][0]["container"]
            group = container["logConfiguration"]["options"]["awslogs-group"]
            nodes = batch.describe_jobs(jobs=[f"{job_id}#{n}" for n in range(NODES)])["jobs"]
            streams = {
                int(r["jobId"].rsplit("#", 1)[1]): r["container"]["logStreamName"] for r in nodes
            }
        for node, stream in (streams or {}).items():
            kwargs = {"logGroupName": group, "logStreamName": stream, "startFromHead": True}
            if node in tokens:
                kwargs["nextToken"] = tokens[node]
            page = logs.get_log_events(**kwargs)
            tokens[node] = page["nextForwardToken"]
            got.setdefault(node, []).extend(e["message"] for e in page["events"])
        if job["status"] in ("SUCCEEDED", "FAILED"):
            return
        time.sleep(BASELINE_POLL)


def _peak(sent: list[float]) -> int:
    """The most requests in any one-second window [t, t + 1)."""
    return max((sum(1 for u in sent if t <= u < t + 1.0) for t in sent), default=0)


def _complete(got: dict[int, list[str]]) -> bool:
    return all(got.get(n) == [f"node {n} line {s}" for s in range(LINES)] for n in range(NODES))


def _one_run(cluster: Cluster) -> dict[str, tuple[float, int, int, bool]]:
    spec = JobSpec(name="bench-logs", command=("true",), image=IMAGE, nodes=NODES)
    job_id = cluster.run(spec=spec).job_id
    followers: dict[str, Callable] = {
        "launcher": _launcher_follower,
        "baseline": _baseline_follower,
    }
    results, threads = {}, []
    for name, fn in followers.items():
        got: dict[int, list[str]] = {}

        def target(fn=fn, got=got, name=name) -> None:
            aws, sent = Aws(), []
            # Every HTTP request the follower's clients send, retries included.
            aws.session.events.register("before-send", lambda **_: sent.append(time.monotonic()))
            fn(job_id, aws, got)
            rate = (len(sent) - 1) / (sent[-1] - sent[0])
            lines = sum(len(v) for v in got.values())
            results[name] = (rate, _peak(sent), lines, _complete(got))

        threads.append(threading.Thread(target=target))
    for t in threads:
        t.start()
    time.sleep(1.0)  # both followers are waiting when the job starts
    _write(job_id)
    for t in threads:
        t.join(timeout=300)
    return results


def run() -> str:
    with deployed(max_nodes=NODES):
        cluster = Cluster.from_stack("EfaBatch", aws=Aws())
        runs = [_one_run(cluster) for _ in range(RUNS)]
    rows = []
    for name, label in (
        ("baseline", f"baseline: GetLogEvents per node every {BASELINE_POLL:.0f} s"),
        ("launcher", "launcher logs -f (FilterLogEvents, all streams)"),
    ):
        rate = statistics.median(r[name][0] for r in runs)
        peak = statistics.median(r[name][1] for r in runs)
        lines = statistics.median(r[name][2] for r in runs)
        complete = all(r[name][3] for r in runs)
        rows.append(
            [
                label,
                f"{rate:.2f}",
                f"{peak:.0f}",
                f"{lines:.0f} of {NODES * LINES}",
                "yes" if complete else "no",
            ]
        )
    return table(
        [
            f"{NODES} nodes x {LINES} lines, written over {WRITE_SECONDS:.0f} s",
            f"mean calls/s (median of {RUNS})",
            "peak calls in any 1 s",
            "lines delivered",
            "every node complete, in order, once",
        ],
        rows,
    )


if __name__ == "__main__":
    start = time.time()
    print(run())
    print(f"\n({time.time() - start:.0f} s)")
