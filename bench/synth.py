"""Synth time of the CDK app against an empty CDK app (jsii start-up), medians of N runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.stats import median_seconds, table

ROOT = Path(__file__).resolve().parent.parent
EMPTY_APP = "import aws_cdk as cdk; cdk.App().synth()"


def _run(args: list[str]) -> None:
    with tempfile.TemporaryDirectory() as out:
        env = {
            **os.environ,
            "CDK_OUTDIR": out,
            # What the CDK CLI hands the app: cdk.json's context.
            "CDK_CONTEXT_JSON": json.dumps(json.loads((ROOT / "cdk.json").read_text())["context"]),
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        }
        subprocess.run(args, cwd=ROOT, env=env, check=True, capture_output=True)


def run(runs: int = 5) -> str:
    empty = median_seconds(lambda: _run([sys.executable, "-c", EMPTY_APP]), runs)
    app = median_seconds(lambda: _run([sys.executable, "-m", "infra.app"]), runs)
    return table(
        ["what", f"median of {runs} (s)", "ratio to empty app"],
        [
            ["empty CDK app (baseline: Python + jsii start-up)", f"{empty:.2f}", "1.00"],
            ["this app: 3 stacks + cdk-nag AwsSolutions", f"{app:.2f}", f"{app / empty:.2f}"],
        ],
    )


if __name__ == "__main__":
    print(run())
