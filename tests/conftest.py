"""Session-wide fixtures: one synth per configuration, one moto server, real subprocesses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# jsii prints a large banner per process on Node.js 20 unless told the major version is known.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION", "20")


def cdk_context(**overrides) -> dict:
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    context.update(overrides)
    return context


@pytest.fixture(scope="session")
def moto_server():
    from tests.support.emulator import MotoServer

    server = MotoServer.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def synth_default(tmp_path_factory):
    from tests.infra_synth import synthesize

    return synthesize(cdk_context(), tmp_path_factory.mktemp("cdk-default"))


@pytest.fixture(scope="session")
def synth_p5(tmp_path_factory):
    from tests.infra_synth import synthesize

    return synthesize(cdk_context(env="prod"), tmp_path_factory.mktemp("cdk-p5"))
