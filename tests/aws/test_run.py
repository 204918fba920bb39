"""`launcher run` end to end on the AWS path: patch into the stack's repository, then submit.

The stack lives in moto; its ECR host does not exist, so LAUNCHER_REGISTRY points pushes at the
real local registry (the documented override for mirrors and emulators).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import requests

from launcher.image import manifest
from tests.image.test_build import workspace
from tests.support import cli


@pytest.fixture(scope="module")
def stack(moto_server, synth_default):
    moto_server.reset()
    return moto_server.deploy(synth_default.outdir, synth_default.stack_names)["EfaBatch"]


def run(moto_server, registry, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **moto_server.env, "LAUNCHER_REGISTRY": registry.host}
    return cli.launcher("run", *args, env=env)


def test_dryrun_computes_the_exact_image_and_pushes_nothing_then_run_pushes_it(
    moto_server, stack, registry, busybox_base, tmp_path
):
    ws = workspace(tmp_path / "ws", "from a run")
    args = (
        "--image",
        busybox_base,
        "--workspace",
        str(ws),
        "--nodes",
        "2",
        "--",
        "/workspace/run.sh",
    )
    registry.requests()
    dry = run(moto_server, registry, "--dryrun", *args)
    assert dry.returncode == 0, dry.stderr
    assert "would ship 3 files and 0 directories: " in dry.stderr  # the listing, off stdout
    image = json.loads(dry.stdout)["registerJobDefinition"]["nodeProperties"][
        "nodeRangeProperties"
    ][0]["container"]["image"]
    repo = stack["RepositoryUri"].split("/", 1)[1]
    assert image.startswith(f"{registry.host}/{repo}@sha256:")
    assert [r for r in registry.requests() if r.method in ("POST", "PATCH", "PUT")] == []

    real = run(moto_server, registry, *args)
    assert real.returncode == 0, real.stderr
    job_id = real.stdout.strip().splitlines()[-1]
    (job,) = moto_server.client("batch").describe_jobs(jobs=[job_id])["jobs"]
    assert job["nodeProperties"]["nodeRangeProperties"][0]["container"]["image"] == image
    digest = image.split("@")[1]
    head = requests.head(
        f"http://{registry.host}/v2/{repo}/manifests/{digest}",
        headers={"Accept": manifest.ACCEPT},  # an OCI manifest (zstd) is served to who asks
        timeout=10,
    )
    assert head.status_code == 200


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (("--nodes", "999"), "--nodes 999: EfaBatch runs at most 2 p4d.24xlarge nodes"),
        (("--gpus-per-node", "99"), "--gpus-per-node 99: p4d.24xlarge has 8 GPUs"),
    ],
)
def test_a_job_the_cluster_cannot_run_uploads_nothing(
    moto_server, stack, registry, busybox_base, tmp_path, flags, line
):
    """Every check against the cluster comes before the workspace image (bugs: the node count
    came after it once, the GPU count until now)."""
    ws = workspace(tmp_path / "ws", "too big")
    registry.requests()
    result = run(
        moto_server,
        registry,
        "--image",
        busybox_base,
        "--workspace",
        str(ws),
        *flags,
        "--",
        "/workspace/run.sh",
    )
    assert result.returncode == 2
    assert line in result.stderr
    assert registry.requests() == []  # not even a HEAD: nothing was looked up or pushed
