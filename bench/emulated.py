"""The stack deployed into a moto server over HTTP, for the benchmarks that call AWS."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from devenv.emulator import MotoServer
from devenv.synth import synthesize

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def deployed(**settings: object) -> Iterator[MotoServer]:
    """A moto server with the demo environment's stacks (``settings`` override cdk.json's
    context), its endpoint in the environment; stopped on exit."""
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    context = {**json.loads((ROOT / "cdk.json").read_text())["context"], **settings}
    server = MotoServer.start()
    try:
        os.environ.update(server.env)
        with tempfile.TemporaryDirectory() as out:
            synth = synthesize(context, Path(out))
            server.deploy(synth.outdir, synth.stack_names)
        yield server
    finally:
        server.stop()
