"""The pre-deploy check on a shared account: it names every resource a change adds, removes,
replaces or updates, the queued and running jobs it ends, and refuses an FSx shrink (a real
``python -m infra.predeploy`` process against stacks deployed in the moto server)."""

from __future__ import annotations

import json

import pytest

from devenv import moto_gaps
from tests.conftest import cdk_context
from tests.infra.test_predeploy import predeploy

ACCOUNT, REGION = "123456789012", "us-east-1"
CPU_POOL = {"cpu": {"instance_type": "c7i.4xlarge", "max_nodes": 4}}


def _synth(tmp_path_factory, name: str, **settings):
    from devenv.synth import synthesize

    return synthesize(cdk_context(**settings), tmp_path_factory.mktemp(name))


@pytest.fixture(scope="module")
def synth_two_pools(tmp_path_factory):
    return _synth(tmp_path_factory, "cdk-two-pools", pools=json.dumps(CPU_POOL))


def _submit(moto_server, queue: str, count: int) -> list[str]:
    """``count`` jobs on ``queue``, held RUNNABLE by the emulator (no nodes run them)."""
    batch = moto_server.client("batch")
    batch.register_job_definition(
        jobDefinitionName="planned",
        type="container",
        containerProperties={"image": "busybox", "vcpus": 1, "memory": 128, "command": ["true"]},
    )
    return [
        batch.submit_job(jobName=f"queued-{index}", jobQueue=queue, jobDefinition="planned")[
            "jobId"
        ]
        for index in range(count)
    ]


def _summary(lines: list[str], stack: str) -> str:
    return next(line for line in lines if line.startswith(f"{stack}: "))


@pytest.mark.cdk
def test_a_pool_removed_with_queued_jobs_is_named_with_them(
    moto_server, synth_two_pools, synth_default
):
    """Removing a pool deletes its queue and compute environment: "All jobs in the queue are
    eventually terminated when you delete a job queue" (Batch API, DeleteJobQueue). The plan
    names every resource that goes and the pool whose jobs end, with their count by state
    (Batch ListJobs on the queue)."""
    moto_server.reset()
    moto_server.deploy(synth_two_pools.outdir, synth_two_pools.stack_names)
    _submit(moto_server, "EfaBatch-cpu", 2)
    planned = predeploy("--app", str(synth_default.outdir), env=moto_server.env)
    assert planned.returncode == 0, planned.stderr
    lines = planned.stdout.splitlines()
    assert (
        "  jobs: pool cpu (queue EfaBatch-cpu): 2 jobs end (2 RUNNABLE): the pool is removed"
        in lines
    )
    removed = [line for line in lines if line.startswith("  remove ")]
    assert any(
        line.startswith("  remove AWS::Batch::JobQueue EfaBatch/PoolCpuJobQueue")
        for line in removed
    ), lines
    assert any(
        line.startswith("  remove AWS::Batch::ComputeEnvironment EfaBatch/PoolCpuCompute")
        for line in removed
    )
    assert f"{len(removed)} removed" in _summary(lines, "EfaBatch")


@pytest.mark.cdk
def test_a_pool_added_names_every_resource_it_adds_and_ends_nothing(
    moto_server, synth_default, synth_two_pools
):
    """Each resource of a new pool on a line of its own (its type and logical id), as many
    lines as the summary counts, and no job ends; the same plan twice deployed says no
    change."""
    moto_server.reset()
    moto_server.deploy(synth_default.outdir, synth_default.stack_names)
    _submit(moto_server, "EfaBatch-jobs", 1)
    planned = predeploy("--app", str(synth_two_pools.outdir), env=moto_server.env)
    assert planned.returncode == 0, planned.stderr
    lines = planned.stdout.splitlines()
    mine = [line for line in lines if line.startswith("  ") and "EfaBatch/" in line]
    added = [line for line in mine if line.startswith("  add ")]
    updated = [line for line in mine if line.startswith("  update ")]
    assert "  add AWS::Batch::JobQueue EfaBatch/PoolCpuJobQueueFC961B22" in added, lines
    assert "  add AWS::Batch::ComputeEnvironment EfaBatch/PoolCpuComputeEnvironment0D067238" in (
        added
    )
    summary = _summary(lines, "EfaBatch")
    assert summary.startswith(f"EfaBatch: {len(updated)} updated, {len(added)} added, 0 removed")
    assert len(mine) == len(added) + len(updated)
    assert not [line for line in lines if "jobs:" in line]

    moto_server.reset()
    moto_server.deploy(synth_two_pools.outdir, synth_two_pools.stack_names)
    unchanged = predeploy("--app", str(synth_two_pools.outdir), env=moto_server.env)
    assert unchanged.stdout.splitlines() == [
        "EfaBatch-Network: no change",
        "EfaBatch-Storage: no change",
        "EfaBatch: no change",
    ]


@pytest.mark.cdk
def test_a_compute_environment_replaced_ends_the_jobs_running_on_it(
    moto_server, synth_default, tmp_path_factory
):
    """creation_tags replace the compute environment (ComputeResources.Tags is among its
    createOnlyProperties, the resource provider schema). Its instances go with it
    (DeleteComputeEnvironment), so the job running on it ends; the queued one waits for the
    new compute environment and is not counted."""
    replaced = _synth(
        tmp_path_factory, "cdk-creation-tags", creation_tags=json.dumps({"team": "ml"})
    )
    moto_server.reset()
    moto_server.deploy(synth_default.outdir, synth_default.stack_names)
    running, _queued = _submit(moto_server, "EfaBatch-jobs", 2)
    moto_gaps.start_container_attempt(ACCOUNT, REGION, running)
    planned = predeploy("--app", str(replaced.outdir), env=moto_server.env)
    assert planned.returncode == 0, planned.stderr
    lines = planned.stdout.splitlines()
    assert "  replace AWS::Batch::ComputeEnvironment EfaBatch/ComputeEnvironment: " in "\n".join(
        lines
    )
    jobs = [line for line in lines if line.startswith("  jobs: ")]
    assert jobs == [
        "  jobs: pool default (queue EfaBatch-jobs): 1 job ends (1 RUNNING): its compute "
        "environment ComputeEnvironment is replaced"
    ]


@pytest.mark.cdk
def test_a_queue_replaced_but_retained_ends_no_job(moto_server, synth_default, tmp_path_factory):
    """fair_share makes a new queue (Batch cannot add a fair-share policy to a queue:
    CreateJobQueue schedulingPolicyArn) and the stack retains the old one
    (UpdateReplacePolicy: Retain), which runs its jobs to the end: the plan says it is
    retained and ends no job (it used to count them all as ended)."""
    fair = _synth(tmp_path_factory, "cdk-fair-share", fair_share="true")
    moto_server.reset()
    moto_server.deploy(synth_default.outdir, synth_default.stack_names)
    _submit(moto_server, "EfaBatch-jobs", 2)
    planned = predeploy("--app", str(fair.outdir), env=moto_server.env)
    lines = planned.stdout.splitlines()
    assert any(
        line.startswith("  replace AWS::Batch::JobQueue EfaBatch/JobQueue (old one retained)")
        for line in lines
    ), lines
    assert not [line for line in lines if line.startswith("  jobs: ")]


def test_a_shrink_is_an_update_that_fails_not_a_replacement():
    """StorageCapacity is not among AWS::FSx::FileSystem's createOnlyProperties (the resource
    provider schema, as cfn-lint ships it): CloudFormation updates the file system in place,
    and FSx refuses a smaller capacity ("You can only increase the amount of storage capacity
    for a file system; you cannot decrease storage capacity", FSx for Lustre user guide,
    managing-storage-capacity.html; "The value must be greater than the current storage
    capacity", FSx API, UpdateFileSystem StorageCapacity), so the deploy fails and rolls
    back: no new, empty file system, and no deploy either."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    from infra.update_plan import create_only, storage_shrink

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", "AWS::FSx::FileSystem")
    assert "/properties/StorageCapacity" not in schema.schema["createOnlyProperties"]
    assert ("StorageCapacity",) not in create_only("AWS::FSx::FileSystem")
    assert storage_shrink({"StorageCapacity": 2400}, {"StorageCapacity": 1200})
    assert storage_shrink({"StorageCapacity": 2400}, {"StorageCapacity": 2400}) is None
    assert storage_shrink({"StorageCapacity": 2400}, {"StorageCapacity": 4800}) is None


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
    lines = planned.stdout.splitlines()
    (refusal,) = [line for line in lines if "refuse AWS::FSx::" in line]
    assert refusal.startswith("  refuse AWS::FSx::FileSystem EfaBatch-Storage/Lustre")
    assert refusal.endswith(
        "FSx cannot shrink a file system (2400 GiB deployed, 1200 GiB asked): set "
        "fsx_lustre.storage_gib to 2400 or more (a -c fsx_lustre object replaces the whole "
        "setting: give every key of it again, or keep the settings in cdk.json)"
    )
    assert "1 refused" in _summary(lines, "EfaBatch-Storage")
    assert lines[-1].startswith("refused: 1 change that CloudFormation would roll back")
    grown = _synth(
        tmp_path_factory, "cdk-lustre-4800", fsx_lustre=json.dumps({**LUSTRE, "storage_gib": 4800})
    )
    growing = predeploy("--app", str(grown.outdir), env=moto_server.env)
    assert growing.returncode == 0
    storage = growing.stdout.splitlines()[1:3]
    assert storage[0] == "EfaBatch-Storage: 1 updated, 0 added, 0 removed, 0 replaced, 0 refused"
    assert storage[1].startswith("  update AWS::FSx::FileSystem EfaBatch-Storage/Lustre")


def test_a_c_object_replaces_the_whole_setting_of_the_environment():
    """What docs/operating.md says and the refusal above guards: the environment in cdk.json
    has a 2400 GiB file system; `-c fsx_lustre='{"s3": ...}'` (a string, as the CDK CLI gives
    it) replaces the whole object, so storage_gib is the default 1200 again."""
    from infra.config import load

    context = cdk_context()
    context["environments"]["demo"]["fsx_lustre"] = LUSTRE
    assert load(context).fsx_lustre.storage_gib == 2400
    context["fsx_lustre"] = json.dumps({"s3": LUSTRE["s3"]})
    assert load(context).fsx_lustre.storage_gib == 1200
