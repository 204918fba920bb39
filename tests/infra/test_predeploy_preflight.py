"""The pre-deploy check's preflight: before ``cdk deploy``, what the account says of the pools
the synthesized stacks will run (their compute environments and launch templates as
synthesized): a quota too small, a zone without the type. Silent when all pass (the other
predeploy tests' outputs stay as they were); a deploy is not refused for these."""

from __future__ import annotations

import pytest

from devenv import moto_gaps
from tests.infra.test_predeploy import predeploy


@pytest.fixture
def account(moto_server):
    moto_server.reset()
    yield moto_server
    moto_gaps.ec2_quota("L-417A185B", None)
    moto_gaps.withdraw_offering("us-east-1", "p4d.24xlarge", "us-east-1a", False)


def test_a_stack_not_deployed_yet_is_told_what_would_keep_its_jobs_waiting(account, synth_default):
    moto_gaps.ec2_quota("L-417A185B", 96)
    moto_gaps.withdraw_offering("us-east-1", "p4d.24xlarge", "us-east-1a")
    result = predeploy("--app", str(synth_default.outdir), env=account.env)
    assert result.returncode == 0, result.stdout + result.stderr  # nothing CloudFormation refuses
    lines = result.stdout.splitlines()
    at = lines.index(
        "EfaBatch: preflight of 1 pools: 2 would keep jobs waiting: fix them before the first job"
    )
    assert lines[at + 1] == (
        "  default: quota: WAITS: Running On-Demand P instances (L-417A185B) is 96 vCPUs; "
        "max_nodes 2 x p4d.24xlarge = 192 vCPUs, so at most 1 node can start: aws service-quotas "
        "request-service-quota-increase --service-code ec2 --quota-code L-417A185B "
        "--desired-value 192"
    )
    assert lines[at + 2].startswith(
        "  default: zone: WAITS: p4d.24xlarge is not offered in us-east-1a: offered in us-east-1b"
    )

    moto_gaps.ec2_quota("L-417A185B", None)
    moto_gaps.withdraw_offering("us-east-1", "p4d.24xlarge", "us-east-1a", False)
    quiet = predeploy("--app", str(synth_default.outdir), env=account.env)
    assert "preflight" not in quiet.stdout
