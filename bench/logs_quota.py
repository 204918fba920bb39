"""Ten people following one 64-node job, each on their own machine, within the account's quota.

Each follower stands for one person's ``launcher logs -f``: its own AWS session and its own
``follow.Hub`` (its process's limiter), sharing nothing with the others but the account's
quota of 5 FilterLogEvents calls a second, which ``devenv.quota.QuotaProxy`` puts in front
of the emulator (a token bucket of 5 a second, one second's burst; the calls beyond it
answered ThrottlingException, HTTP 400, as CloudWatch Logs does). moto enforces no quota.

In each run one 64-node job writes a numbered line per node every second for WRITE_SECONDS,
then ends, while four groups follow it at the same time, each through a proxy of its own
(an account of its own, so the groups do not take each other's quota):

- ten followers with ``launcher.aws.pacing`` as it was (the baseline: the spacing doubles per
  throttle and halves per success), loaded from git at ``BEFORE``;
- ten followers with ``launcher.aws.pacing`` as it is (additive increase, multiplicative
  decrease);
- one follower alone with each, for its latency when nobody throttles it.

Reported per group, as medians over RUNS runs: FilterLogEvents calls and the share of them
throttled; while the lines were written, the calls the account accepted a second, and those
each follower sent a second (its pace); the lines delivered and whether every follower got every
line complete, in order and once, in every run; and the latency from a line written (its
step's lines put into the emulator) to a follower's iterator yielding it, median and 95th
percentile over every line of every follower.
"""

from __future__ import annotations

import functools
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.emulated import ROOT, deployed
from bench.stats import table
from devenv import moto_gaps
from devenv.emulator import ACCOUNT, REGION
from devenv.quota import QuotaProxy, TokenBucket
from launcher.api import Cluster, Job
from launcher.aws import follow, pacing
from launcher.aws.batch import BatchBackend
from launcher.aws.client import Aws
from launcher.job.jobspec import JobSpec

NODES = 64
FOLLOWERS = 10
WRITE_SECONDS = 60  # a line per node a second, this long
QUOTA = 5.0  # FilterLogEvents a second per account and Region
RUNS = 3
BEFORE = "82d8a87c116410731e32870ab7346e3c803c61f5"  # the last commit with the old policy
IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/base@sha256:" + "c" * 64


def pacing_before() -> ModuleType:
    """launcher/aws/pacing.py as of BEFORE (halve the spacing per success), as a module."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{BEFORE}:launcher/aws/pacing.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="pacing-before-")) / "pacing_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("pacing_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pacing_before"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def aws_through(url: str) -> Aws:
    """An ``Aws`` whose clients all go to ``url`` (an account's proxy), not the environment's
    endpoint."""
    aws = Aws()
    aws.session.client = functools.partial(aws.session.client, endpoint_url=url)  # type: ignore[method-assign]
    return aws


@dataclass
class Group:
    """Followers through one account's proxy, each with its own limiter."""

    proxy: QuotaProxy
    limiters: list[Any]  # pacing.Limiter, as it is or as it was
    got: list[list[tuple[float, int, str]]] = field(default_factory=list)  # (when, node, line)

    def threads(self, job_id: str) -> list[threading.Thread]:
        self.proxy.reset()
        self.got = [[] for _ in self.limiters]

        def read(i: int) -> None:
            hub = follow.Hub(self.limiters[i])
            job = Job(job_id, BatchBackend(aws_through(self.proxy.url), logs=hub))
            for line in job.logs(follow=True):
                self.got[i].append((time.monotonic(), line.node, line.message))

        return [threading.Thread(target=read, args=(i,)) for i in range(len(self.limiters))]


@dataclass(frozen=True)
class Figures:
    calls: int  # FilterLogEvents calls the account received
    throttled: float  # share of them refused
    accepted_rate: float  # accepted FilterLogEvents a second while the lines were written
    pace: float  # FilterLogEvents a follower sent a second, then
    lines: int
    complete: bool
    latency: float  # median seconds from a line written to a follower yielding it
    latency_p95: float


def _figures(group: Group, written: dict[int, float]) -> Figures:
    filters = [s for s in group.proxy.seen if s.operation == "FilterLogEvents"]
    refused = sum(1 for s in filters if s.throttled)
    start, end = written[0], written[0] + WRITE_SECONDS
    during = [s for s in filters if start <= s.at < end]
    delays = sorted(
        when - written[int(line.rsplit(" ", 1)[1])] for got in group.got for when, _, line in got
    )
    expected = {n: [f"node {n} line {s}" for s in range(WRITE_SECONDS)] for n in range(NODES)}
    complete = all(
        {n: [line for _, m, line in got if m == n] for n in range(NODES)} == expected
        and len(got) == NODES * WRITE_SECONDS
        for got in group.got
    )
    return Figures(
        calls=len(filters),
        throttled=refused / len(filters) if filters else 0.0,
        accepted_rate=sum(1 for s in during if not s.throttled) / WRITE_SECONDS,
        pace=len(during) / WRITE_SECONDS / len(group.limiters),
        lines=sum(len(got) for got in group.got),
        complete=complete,
        latency=statistics.median(delays),
        latency_p95=delays[int(0.95 * (len(delays) - 1))],
    )


def _one_run(cluster: Cluster, groups: dict[str, Group]) -> dict[str, Figures]:
    spec = JobSpec(name="bench-logs-quota", command=("true",), image=IMAGE, nodes=NODES)
    job_id = cluster.run(spec=spec).job_id
    threads = [t for group in groups.values() for t in group.threads(job_id)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # every follower is waiting when the job starts
    moto_gaps.start_job(ACCOUNT, REGION, job_id)
    written: dict[int, float] = {}  # step -> when its lines were put
    start = time.monotonic()
    for step in range(WRITE_SECONDS):
        lines = {n: [f"node {n} line {step}"] for n in range(NODES)}
        written[step] = time.monotonic()
        moto_gaps.put_node_lines(ACCOUNT, REGION, job_id, lines)
        time.sleep(max(0.0, start + step + 1 - time.monotonic()))
    moto_gaps.finish_job(ACCOUNT, REGION, job_id, success=True)
    for t in threads:
        t.join(timeout=600)
    return {name: _figures(group, written) for name, group in groups.items()}


def run() -> str:
    before = pacing_before()
    with deployed(max_nodes=NODES) as server:
        cluster = Cluster.from_stack("EfaBatch", aws=Aws())

        def account() -> QuotaProxy:
            return QuotaProxy(server.url, TokenBucket(rate=QUOTA, burst=QUOTA))

        runs = []
        for _ in range(RUNS):
            # Fresh limiters and accounts each run: ten people starting to follow.
            groups = {
                "ten-before": Group(account(), [before.Limiter() for _ in range(FOLLOWERS)]),
                "ten-now": Group(account(), [pacing.Limiter() for _ in range(FOLLOWERS)]),
                "one-before": Group(account(), [before.Limiter()]),
                "one-now": Group(account(), [pacing.Limiter()]),
            }
            runs.append(_one_run(cluster, groups))
            for group in groups.values():
                group.proxy.stop()

    def median(name: str, attr: str) -> float:
        return statistics.median(getattr(r[name], attr) for r in runs)

    def row(name: str, label: str, followers: int, baseline: str) -> list[str]:
        ratio = statistics.median(r[name].latency / r[baseline].latency for r in runs)
        return [
            label,
            f"{median(name, 'calls'):.0f}",
            f"{100 * median(name, 'throttled'):.1f}%",
            f"{median(name, 'accepted_rate'):.2f}",
            f"{median(name, 'pace'):.2f}",
            f"{median(name, 'lines'):.0f} of {followers * NODES * WRITE_SECONDS}",
            "yes" if all(r[name].complete for r in runs) else "no",
            f"{median(name, 'latency'):.2f}",
            f"{median(name, 'latency_p95'):.2f}",
            "1.0" if name == baseline else f"{ratio:.2f}",
        ]

    return table(
        [
            f"{NODES} nodes, a line each a second for {WRITE_SECONDS} s; quota "
            f"{QUOTA:.0f} FilterLogEvents/s (median of {RUNS})",
            "FilterLogEvents calls",
            "throttled",
            "accepted calls/s, all followers",
            "calls/s per follower",
            "lines delivered",
            "every follower complete, in order, once",
            "latency, median (s)",
            "latency, 95th percentile (s)",
            "median latency, ratio to baseline (median of the runs' ratios)",
        ],
        [
            row(
                "ten-before",
                f"baseline: {FOLLOWERS} followers, halve on success",
                FOLLOWERS,
                "ten-before",
            ),
            row("ten-now", f"{FOLLOWERS} followers, additive increase", FOLLOWERS, "ten-before"),
            row("one-before", "baseline: 1 follower alone, halve on success", 1, "one-before"),
            row("one-now", "1 follower alone, additive increase", 1, "one-before"),
        ],
    )


if __name__ == "__main__":
    began = time.time()
    print(run())
    print(f"\n({time.time() - began:.0f} s)")
