"""Synthesize the CDK app in this process (aws-cdk-lib on Node.js, seconds per app) and keep
the cloud assembly on disk: the tests synthesize once per configuration, the benchmarks once
per run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devenv.processes import allowed
from infra.config import ClusterConfig


@dataclass(frozen=True)
class Synthesized:
    outdir: Path
    config: ClusterConfig

    def template(self, suffix: str = "") -> dict[str, Any]:
        return self._read(self.config.stack_name + suffix)

    @property
    def stack_names(self) -> list[str]:
        name = self.config.stack_name
        return [f"{name}-Network", f"{name}-Storage", name]

    def templates(self) -> dict[str, dict[str, Any]]:
        return {n: self._read(n) for n in self.stack_names}

    def _read(self, stack_name: str) -> dict[str, Any]:
        template: dict[str, Any] = json.loads(
            (self.outdir / f"{stack_name}.template.json").read_text()
        )
        return template


def synthesize(context: dict[str, Any], outdir: Path) -> Synthesized:
    allowed("cdk")
    from infra.app import create_app

    app, config, _ = create_app(context, outdir=str(outdir))
    app.synth()  # raises if cdk-nag (AwsSolutions) has an unacknowledged finding
    return Synthesized(outdir, config)
