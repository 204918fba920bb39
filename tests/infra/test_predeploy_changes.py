"""The pre-deploy check on a shared account: it names every resource a change adds, removes,
replaces or updates, the queued and running jobs it ends, and refuses an FSx shrink (a real
``python -m infra.predeploy`` process against stacks deployed in the moto server)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import cdk_context
from tests.infra.test_predeploy import predeploy

CPU_POOL = {"cpu": {"instance_type": "c7i.4xlarge", "max_nodes": 4}}


def _synth(tmp_path_factory, name: str, **settings):
    from devenv.synth import synthesize

    return synthesize(cdk_context(**settings), tmp_path_factory.mktemp(name))


@pytest.fixture(scope="module")
def synth_two_pools(tmp_path_factory):
    return _synth(tmp_path_factory, "cdk-two-pools", pools=json.dumps(CPU_POOL))


def _submit(moto_server, queue: str, count: int) -> None:
    batch = moto_server.client("batch")
    batch.register_job_definition(
        jobDefinitionName="planned",
        type="container",
        containerProperties={"image": "busybox", "vcpus": 1, "memory": 128, "command": ["true"]},
    )
    for index in range(count):
        batch.submit_job(jobName=f"queued-{index}", jobQueue=queue, jobDefinition="planned")


@pytest.mark.cdk
def test_a_pool_removed_with_queued_jobs_is_named_with_them(
    moto_server, synth_two_pools, synth_default
):
    """Removing a pool deletes its queue and compute environment: "All jobs in the queue are
    eventually terminated when you delete a job queue" (Batch API, DeleteJobQueue). The plan
    names every resource that goes and how many jobs of the queue end, by state."""
    moto_server.reset()
    moto_server.deploy(synth_two_pools.outdir, synth_two_pools.stack_names)
    _submit(moto_server, "EfaBatch-cpu", 2)
    planned = predeploy("--app", str(synth_default.outdir), env=moto_server.env)
    assert planned.returncode == 0, planned.stderr
    lines = planned.stdout.splitlines()
    assert "  jobs: 2 jobs of queue EfaBatch-cpu end (2 RUNNABLE): the queue is removed" in lines
    removed = [line for line in lines if line.startswith("  remove ")]
    assert any(" AWS::Batch::JobQueue EfaBatch/PoolCpu" in line for line in removed), lines
    assert any(" AWS::Batch::ComputeEnvironment EfaBatch/PoolCpu" in line for line in removed)
    summary = next(line for line in lines if line.startswith("EfaBatch: "))
    assert f"{len(removed)} removed" in summary


def test_a_pool_added_names_what_it_adds_and_ends_nothing(moto_server, synth_two_pools):
    moto_server.reset()
    moto_server.deploy(synth_two_pools.outdir, synth_two_pools.stack_names)
    unchanged = predeploy("--app", str(synth_two_pools.outdir), env=moto_server.env)
    assert unchanged.stdout.splitlines() == [
        "EfaBatch-Network: no change",
        "EfaBatch-Storage: no change",
        "EfaBatch: no change",
    ]


LUSTRE = {"storage_gib": 2400, "s3": "example-datasets/lustre"}


@pytest.mark.cdk
def test_a_partial_fsx_lustre_object_that_shrinks_the_file_system_is_refused(
    moto_server, tmp_path_factory
):
    """``-c fsx_lustre='{"s3": ...}'`` replaces the whole object, so storage_gib falls back to
    1200 under a 2400 GiB file system. FSx only grows one ("The value must be greater than the
    current storage capacity", FSx API, UpdateFileSystem StorageCapacity) and CloudFormation
    would roll the deploy back; the check said "1 updated" and exited 0 before."""
    deployed = _synth(tmp_path_factory, "cdk-lustre-2400", fsx_lustre=json.dumps(LUSTRE))
    partial = _synth(
        tmp_path_factory, "cdk-lustre-partial", fsx_lustre=json.dumps({"s3": LUSTRE["s3"]})
    )
    moto_server.reset()
    moto_server.deploy(deployed.outdir, deployed.stack_names)
    planned = predeploy("--app", str(partial.outdir), env=moto_server.env)
    assert planned.returncode == 1, planned.stdout + planned.stderr
    (refusal,) = [line for line in planned.stdout.splitlines() if "refuse AWS::FSx::" in line]
    assert refusal.endswith(
        "FSx cannot shrink a file system (2400 GiB deployed, 1200 GiB asked): set "
        "fsx_lustre.storage_gib to 2400 or more (a -c fsx_lustre object replaces the whole "
        "setting: give every key of it again, or keep the settings in cdk.json)"
    )
    grown = _synth(
        tmp_path_factory, "cdk-lustre-4800", fsx_lustre=json.dumps({**LUSTRE, "storage_gib": 4800})
    )
    assert predeploy("--app", str(grown.outdir), env=moto_server.env).returncode == 0
