"""Synthesize the CDK app in this process (aws-cdk-lib on Node.js, seconds per app) and keep
the cloud assembly on disk: the tests synthesize once per configuration, the benchmarks once
per run. Every synth here is the one ``cdk synth`` makes: cdk-nag's AwsSolutions pack on
(``infra.app.create_app``) and an error annotation on any stack a failure."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devenv.processes import allowed
from infra.config import ClusterConfig

if TYPE_CHECKING:
    import aws_cdk as cdk
    from aws_cdk import cx_api


class SynthError(RuntimeError):
    """The CDK CLI would refuse the assembly (error annotations on its stacks)."""


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


def synth_checked(app: cdk.App) -> cx_api.CloudAssembly:
    """``app.synth()`` (which raises ValidationFailed on an unacknowledged cdk-nag finding),
    then what the CDK CLI does with the assembly: an error annotation on any stack fails
    ``cdk synth`` and ``cdk deploy`` unless ``--ignore-errors`` ("Ignores synthesis errors,
    which will likely produce an invalid output", ``cdk --help``)."""
    from aws_cdk import cx_api

    assembly = app.synth()
    errors = [
        f"{message.id}: {message.entry.data}"
        for stack in assembly.stacks
        for message in stack.messages
        if message.level == cx_api.SynthesisMessageLevel.ERROR
    ]
    if errors:
        raise SynthError("cdk synth would fail: " + "; ".join(errors))
    return assembly


def synth_app(context: dict[str, Any], outdir: Path) -> tuple[cx_api.CloudAssembly, ClusterConfig]:
    """The app of ``context`` synthesized into ``outdir`` as ``cdk synth`` would."""
    allowed("cdk")
    from infra.app import create_app

    app, config, _ = create_app(context, outdir=str(outdir))
    return synth_checked(app), config


def synthesize(context: dict[str, Any], outdir: Path) -> Synthesized:
    _, config = synth_app(context, outdir)
    return Synthesized(outdir, config)
