"""Following a 64-node job's logs: CloudWatch Logs calls a second, and every line delivered.

A 64-node job runs in the emulated account (moto over HTTP, the real stack); while it runs,
each node writes 100 numbered lines into its own stream over 20 s. Each run follows two such
jobs, one after the other, every follower reading its job to its end:

1. One follower each, at the same time: the launcher (``Job.logs(follow=True)``:
   FilterLogEvents over all streams, paced) and the baseline, what the launcher did before:
   GetLogEvents on each node's stream every 2 s, following nextForwardToken.
2. Several followers in one process, each group with its own ``follow.Hub`` (what a process
   has: its tails and its one limiter), at the same time: ``torchx log`` of a 64-replica role
   (a thread per node, each following its node) as the launcher does it now, and as before
   (each thread its own limiter, a fixed 1 s interval: its baseline); eight followers of every
   node; one follower. After its lines this job stays quiet for QUIET_SECONDS before it ends.

Reported per group, as medians over RUNS runs: its mean calls a second (every HTTP request its
clients sent, retries included, after the first, over the time from the first to the last),
of which FilterLogEvents; its peak (the most requests in any one-second window); its calls a
second while the job was quiet; the seconds from the job's end to its last follower's; the
lines delivered; and whether every follower got every line it asked for complete, in order
and once, in every run.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.emulated import deployed
from bench.stats import table
from devenv import moto_gaps
from devenv.emulator import ACCOUNT, REGION
from launcher.api import Cluster, Job
from launcher.aws import follow
from launcher.aws.batch import BatchBackend
from launcher.aws.client import Aws
from launcher.job.jobspec import JobSpec

NODES = 64
LINES = 100  # per node
WRITE_SECONDS = 20.0  # the job writes its lines over this long
QUIET_SECONDS = 30.0  # then, in the second part, stays running without a line this long
BASELINE_POLL = 2.0  # seconds between the baseline's rounds over the nodes
MANY = 8  # followers of every node in one process
RUNS = 3
IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/base@sha256:" + "c" * 64

Got = dict[int, list[str]]
Follower = Callable[[Aws, Got], None]


class Counted:
    """An ``Aws`` whose every HTTP request is recorded (time, operation) in ``sent``, which
    the runs swap; its clients made once, before any run, if ``warm``."""

    def __init__(self, warm: bool = False) -> None:
        self.aws, self.sent = Aws(), []
        self.aws.session.events.register("before-send", self._record)
        if warm:
            self.aws.client("batch")
            self.aws.client("logs")

    def _record(self, event_name: str, **_: object) -> None:
        self.sent.append((time.monotonic(), event_name.rsplit(".", 1)[-1]))


@dataclass
class Group:
    """Followers run together, as one process: each with its client, what each got."""

    followers: list[Follower]
    clients: list[Counted]
    wanted: list[list[int]]  # the nodes each follower asked for
    got: list[Got] = field(default_factory=list)
    done: float = 0.0  # when its last follower returned

    def threads(self) -> list[threading.Thread]:
        self.got = [{} for _ in self.followers]
        for client in self.clients:
            client.sent = []

        def run(i: int) -> None:
            self.followers[i](self.clients[i].aws, self.got[i])
            self.done = max(self.done, time.monotonic())

        return [threading.Thread(target=run, args=(i,)) for i in range(len(self.followers))]

    @property
    def sent(self) -> list[tuple[float, str]]:
        return sorted(s for client in self.clients for s in client.sent)


def _launcher(job_id: str, hub: follow.Hub, node: int | None = None) -> Follower:
    def read(aws: Aws, got: Got) -> None:
        # As `launcher logs -f JOB` does (the job by its id, no stack read), or a TorchX
        # replica thread (`Job.logs(node=K, follow=True)`); ``hub`` stands for the process.
        for line in Job(job_id, BatchBackend(aws, logs=hub)).logs(node=node, follow=True):
            got.setdefault(line.node, []).append(line.message)

    return read


def _baseline_follower(job_id: str) -> Follower:
    def read(aws: Aws, got: Got) -> None:
        """GetLogEvents per node every BASELINE_POLL seconds until the job has ended and a
        last round is read: what following cost before FilterLogEvents."""
        batch, logs = aws.session.client("batch"), aws.session.client("logs")
        tokens: dict[int, str] = {}
        group = streams = None
        while True:
            job = batch.describe_jobs(jobs=[job_id])["jobs"][0]
            if streams is None and job["status"] not in ("SUBMITTED", "PENDING", "RUNNABLE"):
                container = job["nodeProperties"]["nodeRangeProperties"][0]["container"]
                group = container["logConfiguration"]["options"]["awslogs-group"]
                ids = [f"{job_id}#{n}" for n in range(NODES)]
                records = batch.describe_jobs(jobs=ids)["jobs"]
                streams = {
                    int(r["jobId"].rsplit("#", 1)[1]): r["container"]["logStreamName"]
                    for r in records
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

    return read


def _write(job_id: str, quiet: float) -> tuple[float, float]:
    """The nodes: one line each per step, LINES steps over WRITE_SECONDS, ``quiet`` seconds
    without a line, then the end; (when the lines stopped, when the job ended)."""
    moto_gaps.start_job(ACCOUNT, REGION, job_id)
    for step in range(LINES):
        lines = {n: [f"node {n} line {step}"] for n in range(NODES)}
        moto_gaps.put_node_lines(ACCOUNT, REGION, job_id, lines)
        time.sleep(WRITE_SECONDS / LINES)
    stopped = time.monotonic()
    time.sleep(quiet)
    moto_gaps.finish_job(ACCOUNT, REGION, job_id, success=True)
    return stopped, time.monotonic()


def _peak(sent: list[float]) -> int:
    """The most requests in any one-second window [t, t + 1)."""
    return max((sum(1 for u in sent if t <= u < t + 1.0) for t in sent), default=0)


def _complete(group: Group) -> bool:
    return all(
        set(got) <= set(wanted)
        and all(got.get(n) == [f"node {n} line {s}" for s in range(LINES)] for n in wanted)
        for got, wanted in zip(group.got, group.wanted, strict=True)
    )


@dataclass(frozen=True)
class Figures:
    rate: float
    logs_rate: float
    peak: int
    quiet_rate: float
    after_end: float
    lines: int
    complete: bool


def _figures(group: Group, stopped: float, ended: float) -> Figures:
    sent = group.sent
    times = [t for t, _ in sent]
    span = times[-1] - times[0]
    quiet = [t for t in times if stopped <= t < ended]
    return Figures(
        rate=(len(times) - 1) / span,
        logs_rate=sum(1 for _, op in sent if op == "FilterLogEvents") / span,
        peak=_peak(times),
        quiet_rate=len(quiet) / (ended - stopped) if ended - stopped >= 1.0 else 0.0,
        after_end=group.done - ended,
        lines=sum(len(v) for got in group.got for v in got.values()),
        complete=_complete(group),
    )


def _follow_job(cluster: Cluster, groups: dict[str, Group], quiet: float) -> dict[str, Figures]:
    """One job followed to its end by every group at once."""
    spec = JobSpec(name="bench-logs", command=("true",), image=IMAGE, nodes=NODES)
    job_id = cluster.run(spec=spec).job_id
    made = {name: make(job_id) for name, make in groups.items()}
    threads = [t for group in made.values() for t in group.threads()]
    for t in threads:
        t.start()
    time.sleep(1.0)  # every follower is waiting when the job starts
    stopped, ended = _write(job_id, quiet)
    for t in threads:
        t.join(timeout=300)
    return {name: _figures(group, stopped, ended) for name, group in made.items()}


def _all_nodes() -> list[int]:
    return list(range(NODES))


def _single(make: Callable[[str], Follower], client: Counted) -> Callable[[str], Group]:
    return lambda job_id: Group([make(job_id)], [client], [_all_nodes()])


def _one_run(cluster: Cluster, warm: list[Counted]) -> dict[str, Figures]:
    figures = _follow_job(
        cluster,
        {
            "baseline": _single(_baseline_follower, Counted()),
            "launcher": _single(lambda j: _launcher(j, follow.Hub()), Counted()),
        },
        quiet=0.0,
    )

    def per_node(shared: bool) -> Callable[[str], Group]:
        def make(job_id: str) -> Group:
            one = follow.Hub()

            def hub() -> follow.Hub:
                # Before: each replica thread its own limiter, polling every second whatever
                # the job does (and its own client: ``warm``, made before the runs).
                return one if shared else follow.Hub(quiet=follow.Quiet(1.0, 1.0))

            followers = [_launcher(job_id, hub(), n) for n in range(NODES)]
            clients = [Counted() for _ in range(NODES)] if shared else warm
            return Group(followers, clients, [[n] for n in range(NODES)])

        return make

    def many(job_id: str) -> Group:
        hub = follow.Hub()
        followers = [_launcher(job_id, hub) for _ in range(MANY)]
        return Group(followers, [Counted() for _ in range(MANY)], [_all_nodes()] * MANY)

    figures |= _follow_job(
        cluster,
        {
            "per-node-before": per_node(shared=False),
            "per-node": per_node(shared=True),
            "many": many,
            "one": _single(lambda j: _launcher(j, follow.Hub()), Counted()),
        },
        quiet=QUIET_SECONDS,
    )
    return figures


def _median(runs: list[dict[str, Figures]], name: str, attr: str) -> float:
    return statistics.median(getattr(r[name], attr) for r in runs)


def run() -> str:
    with deployed(max_nodes=NODES):
        cluster = Cluster.from_stack("EfaBatch", aws=Aws())
        warm = [Counted(warm=True) for _ in range(NODES)]
        runs = [_one_run(cluster, warm) for _ in range(RUNS)]

    def row(name: str, label: str, baseline: str | None, lines: int, quiet: bool) -> list:
        rate = _median(runs, name, "rate")
        cells = [
            label,
            f"{rate:.2f}",
            f"{_median(runs, name, 'logs_rate'):.2f}",
            f"{_median(runs, name, 'peak'):.0f}",
        ]
        if quiet:
            cells.append(f"{_median(runs, name, 'quiet_rate'):.2f}")
        cells += [
            f"{_median(runs, name, 'after_end'):.0f}",
            f"{_median(runs, name, 'lines'):.0f} of {lines}",
            "yes" if all(r[name].complete for r in runs) else "no",
        ]
        if baseline is not None:
            ratio = rate / _median(runs, baseline, "rate")
            cells.append("1.0" if name == baseline else f"{ratio:.3f}")
        return cells

    mean = f"mean calls/s (median of {RUNS})"
    one = table(
        [
            f"{NODES} nodes x {LINES} lines, written over {WRITE_SECONDS:.0f} s",
            mean,
            "FilterLogEvents/s",
            "peak calls in any 1 s",
            "s from the job's end to the follower's",
            "lines delivered",
            "every node complete, in order, once",
        ],
        [
            row(
                "baseline",
                f"baseline: GetLogEvents per node every {BASELINE_POLL:.0f} s",
                None,
                NODES * LINES,
                False,
            ),
            row(
                "launcher",
                "launcher logs -f (FilterLogEvents, all streams)",
                None,
                NODES * LINES,
                False,
            ),
        ],
    )
    several = table(
        [
            f"followers in one process ({NODES} x {LINES} lines over {WRITE_SECONDS:.0f} s, "
            f"then {QUIET_SECONDS:.0f} s quiet)",
            mean,
            "FilterLogEvents/s",
            "peak calls in any 1 s",
            f"calls/s in the {QUIET_SECONDS:.0f} s quiet",
            "s from the job's end to the last follower's",
            "lines delivered",
            "every follower complete, in order, once",
            "mean calls/s, ratio to baseline",
        ],
        [
            row(
                "per-node-before",
                f"baseline: {NODES} followers, one per node, each its own limiter, "
                "every 1 s (torchx log before)",
                "per-node-before",
                NODES * LINES,
                True,
            ),
            row(
                "per-node",
                f"{NODES} followers, one per node (torchx log now)",
                "per-node-before",
                NODES * LINES,
                True,
            ),
            row(
                "many",
                f"{MANY} followers of every node",
                "per-node-before",
                MANY * NODES * LINES,
                True,
            ),
            row("one", "1 follower", "per-node-before", NODES * LINES, True),
        ],
    )
    return f"{one}\n\n{several}"


if __name__ == "__main__":
    start = time.time()
    print(run())
    print(f"\n({time.time() - start:.0f} s)")
