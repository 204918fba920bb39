"""The preflight's calls and wall time against a moto server over HTTP: `launcher check
--preflight` on a three-pool stack (the target: under 10 s), against `launcher outputs` (one
DescribeStacks) as the baseline of the same run, each a whole command (a new process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bench.emulated import deployed
from bench.stats import median_seconds, table
from launcher.api import Cluster
from launcher.aws.client import Aws

RUNS = 5
POOLS = {
    "cpu": {"instance_type": "c5n.18xlarge", "max_nodes": 4},
    "debug": {"instance_type": "g5.xlarge", "max_nodes": 2},
}


def _command(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "launcher", *args],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"launcher {' '.join(args)}: exit {done.returncode}: {done.stderr}")


def run() -> str:
    with deployed(pools=json.dumps(POOLS)):
        aws = Aws()
        cluster = Cluster.from_stack("EfaBatch", aws=aws)
        before = aws.calls
        report = cluster.preflight()
        calls = aws.calls - before
        assert report.passed, report.table()
        pools = len(cluster.info.pools)
        baseline = median_seconds(lambda: _command("outputs"), RUNS)
        preflight = median_seconds(lambda: _command("check", "--preflight"), RUNS)
        rows = [
            ["launcher outputs (baseline: one DescribeStacks)", 1, f"{baseline:.2f}", "1.0"],
            [
                f"launcher check --preflight, {pools} pools, {len(report.cluster)} rows",
                calls,
                f"{preflight:.2f}",
                f"{preflight / baseline:.1f}",
            ],
        ]
        return table(
            ["command (a new process)", "AWS calls", f"median of {RUNS} (s)", "ratio"], rows
        )


if __name__ == "__main__":
    print(run())
