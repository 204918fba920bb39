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


# p5 in an EC2 Capacity Block, two nodes kept warm (the block is paid for either way).
CAPACITY_BLOCK = {"capacity_block_id": "cr-0123456789abcdef0", "min_nodes": "2"}


@pytest.fixture(scope="session")
def synth_capacity_block(tmp_path_factory):
    from tests.infra_synth import synthesize

    return synthesize(
        cdk_context(env="prod", **CAPACITY_BLOCK), tmp_path_factory.mktemp("cdk-capacity-block")
    )


IMPORTED_VPC = {
    "vpc_id": "vpc-0123456789abcdef0",
    "subnet_id": "subnet-0123456789abcdef0",
    "default_security_group_id": "sg-0123456789abcdef0",
}


@pytest.fixture(scope="session")
def synth_imported(tmp_path_factory):
    from tests.infra_synth import synthesize

    return synthesize(cdk_context(**IMPORTED_VPC), tmp_path_factory.mktemp("cdk-imported"))


@pytest.fixture(scope="session")
def docker_engine(tmp_path_factory):
    from tests.support.docker_engine import DockerEngine
    from tests.support.processes import required_or_skip

    try:
        engine = DockerEngine.start(tmp_path_factory.mktemp("dockerd"))
    except (FileNotFoundError, RuntimeError) as exc:
        required_or_skip(f"Docker engine unavailable: {exc}")
    yield engine
    engine.stop()


def _registry(tmp_path_factory, user=None):
    from tests.support.processes import required_or_skip
    from tests.support.registry_server import RegistryServer

    try:
        return RegistryServer.start(tmp_path_factory.mktemp("registry"), user)
    except (FileNotFoundError, RuntimeError) as exc:
        required_or_skip(f"registry unavailable: {exc}")


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    server = _registry(tmp_path_factory)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def auth_registry(tmp_path_factory):
    server = _registry(tmp_path_factory, ("ci", "s3cret"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def busybox_base(docker_engine, registry):
    """REGISTRY/base:1, a busybox image pushed with Docker (absent from our own code path)."""
    from tests.support.images import push_busybox_base

    repository = f"{registry.host}/base"
    push_busybox_base(docker_engine.client(), repository)
    return f"{repository}:1"
