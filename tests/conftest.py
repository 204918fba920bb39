"""Session-wide fixtures: one synth per configuration, one moto server, real subprocesses;
and the test tiers (tests/support/tiers.py): marks from fixtures, each test held to its marks."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from tests.support import tiers

ROOT = Path(__file__).resolve().parent.parent
pytest_plugins = ("pytester",)  # tests/project/test_tiers.py runs pytest on small projects
# jsii prints a large banner per process on Node.js 20 unless told the major version is known.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "20")
os.environ.setdefault("JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION", "20")


def pytest_configure(config):
    tiers.check_registered(config.getini("markers"))


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the marks added here
def pytest_collection_modifyitems(config, items):
    tiers.mark(items)
    items[:] = tiers.longest_files_first(items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with tiers.phase(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with tiers.phase(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    with tiers.phase(item):
        return (yield)


def cdk_context(**overrides) -> dict:
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    context.update(overrides)
    return context


def context_value(value) -> str:
    """A setting as `-c key=value` would give it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


_SYNTHESIZED: dict[str, dict[str, dict]] = {}


def synth_templates(tmp_path_factory, **overrides) -> dict[str, dict]:
    """The templates of the default environment with ``overrides`` (values as in cdk.json),
    synthesized once a session as ``cdk synth`` does (devenv.synth.synth_app: cdk-nag on, no
    error annotation):
    the day-2 plans start from the same settings many times."""
    from devenv.synth import synth_app

    key = json.dumps(overrides, sort_keys=True, default=list)
    if key not in _SYNTHESIZED:
        context = cdk_context(**{k: context_value(v) for k, v in overrides.items()})
        assembly, _ = synth_app(context, tmp_path_factory.mktemp("day2"))
        _SYNTHESIZED[key] = {s.stack_name: s.template for s in assembly.stacks}
    return copy.deepcopy(_SYNTHESIZED[key])


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory):
    """The launcher's cache (a default group found fine) in a directory of the session's own,
    for the launcher processes the tests start too: never the user's ~/.cache."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session")
def moto_server():
    from devenv.emulator import MotoServer

    server = MotoServer.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def synth_default(tmp_path_factory):
    from devenv.synth import synthesize

    return synthesize(cdk_context(), tmp_path_factory.mktemp("cdk-default"))


@pytest.fixture(scope="session")
def synth_p5(tmp_path_factory):
    from devenv.synth import synthesize

    return synthesize(cdk_context(env="prod"), tmp_path_factory.mktemp("cdk-p5"))


# p5 in an EC2 Capacity Block, two nodes kept warm (the block is paid for either way).
CAPACITY_BLOCK = {"capacity_block_id": "cr-0123456789abcdef0", "min_nodes": "2"}


@pytest.fixture(scope="session")
def synth_capacity_block(tmp_path_factory):
    from devenv.synth import synthesize

    return synthesize(
        cdk_context(env="prod", **CAPACITY_BLOCK), tmp_path_factory.mktemp("cdk-capacity-block")
    )


# prod with three more pools besides the default ("train": p5 in a Capacity Block): on-demand
# p5 behind the block (the default pool's fallback), a small GPU pool for debugging, and a CPU
# Spot pool for data preparation; fair share with per-team weights.
POOLS = {
    "capacity_block_id": "cr-0123456789abcdef0",
    "max_nodes": "16",
    "default_pool": "train",
    "fallback": "ondemand",
    "pools": json.dumps(
        {
            "ondemand": {"instance_type": "p5.48xlarge", "max_nodes": 4},
            "debug": {"instance_type": "g5.xlarge", "max_nodes": 2, "root_volume_gib": 100},
            "cpu": {"instance_type": "c7i.4xlarge", "max_nodes": 32, "spot": True},
        }
    ),
    "share_weights": json.dumps({"vision": 1, "nlp": 0.5, "eval*": 2}),
    "share_decay_seconds": "86400",
    "compute_reservation": "10",
}


@pytest.fixture(scope="session")
def synth_pools(tmp_path_factory):
    from devenv.synth import synthesize

    return synthesize(cdk_context(env="prod", **POOLS), tmp_path_factory.mktemp("cdk-pools"))


@pytest.fixture(scope="session")
def synth_teams(tmp_path_factory):
    """cdk.json's teams environment (vision, speech, llm)."""
    from tests.infra.teams_support import synth_teams as synthesized

    return synthesized(tmp_path_factory)


IMPORTED_VPC = {
    "vpc_id": "vpc-0123456789abcdef0",
    "subnet_id": "subnet-0123456789abcdef0",
    "default_security_group_id": "sg-0123456789abcdef0",
}


def secret_arn(name: str, region: str = "us-east-1", account: str = "123456789012") -> str:
    """A complete Secrets Manager ARN (with the six characters Secrets Manager appends)."""
    return f"arn:aws:secretsmanager:{region}:{account}:secret:{name}-AbCdEf"


# An imported VPC (a route out is the VPC owner's business) with registry credentials.
IMPORTED_SECRETS = {"registry_secrets": json.dumps({"nvcr.io": secret_arn("registry/ngc")})}


@pytest.fixture(scope="session")
def synth_imported(tmp_path_factory):
    from devenv.synth import synthesize

    return synthesize(
        cdk_context(**IMPORTED_VPC, **IMPORTED_SECRETS), tmp_path_factory.mktemp("cdk-imported")
    )


def _prod_secret(name: str) -> str:
    return secret_arn(name, "us-west-2", "210987654321")


# prod (us-west-2, NAT): every upstream the stack knows, registry credentials for copy jobs.
REGISTRIES = {
    "pull_through_cache": ",".join(
        [
            "ecr-public",
            "quay",
            "k8s",
            "dlc",
            f"docker-hub={_prod_secret('ecr-pullthroughcache/docker-hub')}",
            f"github-container-registry={_prod_secret('ecr-pullthroughcache/ghcr')}",
            f"gitlab-container-registry={_prod_secret('ecr-pullthroughcache/gitlab')}",
        ]
    ),
    "registry_secrets": json.dumps(
        {"nvcr.io": _prod_secret("registry/ngc"), "ghcr.io": _prod_secret("registry/ghcr")}
    ),
    "copy_max_vcpus": "32",
}


@pytest.fixture(scope="session")
def synth_registries(tmp_path_factory):
    from devenv.synth import synthesize

    return synthesize(
        cdk_context(env="prod", **REGISTRIES), tmp_path_factory.mktemp("cdk-registries")
    )


# demo with a KMS workspace repository and the Deep Learning Containers' cache rule.
KMS_REPOSITORY = {"repository_encryption": "kms", "pull_through_cache": "ecr-public,dlc"}


@pytest.fixture(scope="session")
def synth_kms(tmp_path_factory):
    from devenv.synth import synthesize

    return synthesize(cdk_context(**KMS_REPOSITORY), tmp_path_factory.mktemp("cdk-kms"))


# Every data setting at once, in a new VPC without NAT (demo, us-east-1, disposable): a
# read-only prefix, a writable bucket and a writable prefix; an AWS managed and an account
# policy; secrets by name prefix, parameter prefix and ARN; a scratch FSx for Lustre file
# system; privileged containers allowed.
DATA = {
    "data_buckets": "example-datasets/imagenet,example-checkpoints:rw,example-results/runs/2026:rw",
    "job_role_policies": "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess,"
    "arn:aws:iam::123456789012:policy/team-training",
    "job_secrets": f"team/,ssm:/team/,{secret_arn('shared/wandb')}",
    "fsx_lustre": json.dumps({"storage_gib": 1200, "deployment": "SCRATCH_2"}),
    "allow_privileged": "true",
}


@pytest.fixture(scope="session")
def synth_data(tmp_path_factory):
    from devenv.synth import synthesize

    return synthesize(cdk_context(**DATA), tmp_path_factory.mktemp("cdk-data"))


# prod (us-west-2, NAT, retained data): a persistent FSx for Lustre file system linked to S3,
# another prefix of the linked bucket read-only, a parameter in another Region (through NAT).
LUSTRE = {
    "fsx_lustre": json.dumps(
        {
            "storage_gib": 2400,
            "deployment": "PERSISTENT_2",
            "throughput_mibps_per_tib": 250,
            "s3": "example-datasets/lustre",
        }
    ),
    "data_buckets": "example-datasets/imagenet",
    "job_secrets": "arn:aws:ssm:us-east-1:210987654321:parameter/shared/hf-token",
}


@pytest.fixture(scope="session")
def synth_lustre(tmp_path_factory):
    from devenv.synth import synthesize

    return synthesize(cdk_context(env="prod", **LUSTRE), tmp_path_factory.mktemp("cdk-lustre"))


@pytest.fixture(scope="session")
def docker_engine(tmp_path_factory):
    from devenv.docker_engine import DockerEngine
    from tests.support.processes import required_or_skip

    try:
        engine = DockerEngine.start(tmp_path_factory.mktemp("dockerd"))
    except (FileNotFoundError, RuntimeError) as exc:
        required_or_skip(f"Docker engine unavailable: {exc}")
    yield engine
    engine.stop()


def _registry(tmp_path_factory, user=None):
    from devenv.registry_server import RegistryServer
    from tests.support.processes import required_or_skip

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
    from devenv.images import push_busybox_base

    repository = f"{registry.host}/base"
    push_busybox_base(docker_engine.client(), repository)
    return f"{repository}:1"


@pytest.fixture(scope="session")
def python_base(docker_engine, registry):
    """REGISTRY/python-base:1, the demo's base: busybox plus this machine's Debian python3."""
    from devenv.images import push_python_base

    repository = f"{registry.host}/python-base"
    push_python_base(docker_engine.client(), repository)
    return f"{repository}:1"


@pytest.fixture(scope="session")
def torch_base(docker_engine, registry, tmp_path_factory):
    """REGISTRY/torch-base:1: the Python base plus Debian's torch 1.13 (CPU, Gloo), torchrun
    and bash (TorchX's dist.ddp runs ``bash -c "torchrun ..."``); 560 MB, about 30 s."""
    from devenv.images import NotInstalled, push_torch_base
    from tests.support.processes import required_or_skip

    repository = f"{registry.host}/torch-base"
    try:
        push_torch_base(docker_engine.client(), repository, tmp_path_factory.mktemp("torch"))
    except NotInstalled as exc:  # Debian's python3-torch (make test installs it)
        required_or_skip(str(exc))
    return f"{repository}:1"
