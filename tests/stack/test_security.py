"""The account's part of the network: the VPC's default security group, which every
multi-node job's task interfaces are in (Batch user guide, mnp-ce.html).

Accounts that auto-remediate Security Hub control EC2.2 strip its rules. The templates cannot
prove the account keeps them (the flow analyzer proves the templates only), so the launcher
looks before a run (cached) and in `launcher check`, against emulated default groups with and
without their rules.
"""

from __future__ import annotations

import os

import pytest

from launcher.aws import preflight
from launcher.stack.security import default_group_findings
from tests.support import cli

GROUP = "sg-0123456789abcdef0"
SELF = {"IsEgress": False, "IpProtocol": "-1", "ReferencedGroupInfo": {"GroupId": GROUP}}
OUT = {"IsEgress": True, "IpProtocol": "-1", "CidrIpv4": "0.0.0.0/0"}


def test_awss_own_rules_are_what_jobs_need():
    findings = default_group_findings(GROUP, [SELF, OUT])
    assert findings.ok and findings.notes == []


@pytest.mark.parametrize(
    ("rules", "missing"),
    [
        ([OUT], ["its rule admitting all traffic from itself"]),
        ([SELF], ["every outbound rule"]),
        ([], ["its rule admitting all traffic from itself", "every outbound rule"]),
        (
            [{**SELF, "ReferencedGroupInfo": {"GroupId": "sg-other"}}, OUT],
            ["its rule admitting all traffic from itself"],
        ),
    ],
)
def test_what_ec2_2_remediation_strips_is_named(rules, missing):
    findings = default_group_findings(GROUP, rules)
    assert findings.missing == missing
    line = findings.line()
    assert "\n" not in line and f"--source-group {GROUP}" in line and "EC2.2" in line


def test_a_narrower_outbound_rule_is_a_warning_not_a_refusal():
    https_only = {"IsEgress": True, "IpProtocol": "tcp", "FromPort": 443, "CidrIpv4": "0.0.0.0/0"}
    findings = default_group_findings(GROUP, [SELF, https_only])
    assert findings.ok and "allows less outbound traffic" in findings.notes[0]


def test_a_group_found_fine_is_not_asked_about_for_an_hour(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert not preflight.recently_fine(GROUP)
    preflight.remember_fine(GROUP, now=1000.0)
    assert preflight.recently_fine(GROUP, now=1000.0 + 3599)
    assert not preflight.recently_fine(GROUP, now=1000.0 + 3601)
    assert not preflight.recently_fine("sg-other", now=1000.0)


# --- against an emulated account ----------------------------------------------------------------

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/base@sha256:" + "a" * 64


@pytest.fixture(scope="module")
def stack(moto_server, synth_default):
    moto_server.reset()
    return moto_server.deploy(synth_default.outdir, synth_default.stack_names)["EfaBatch"]


def _launcher(moto_server, cache, *args):
    env = {**os.environ, **moto_server.env, "XDG_CACHE_HOME": str(cache)}
    return cli.launcher(*args, env=env)


def _jobs(moto_server) -> int:
    listed = moto_server.client("batch").list_jobs(
        jobQueue="EfaBatch-jobs", filters=[{"name": "AFTER_CREATED_AT", "values": ["0"]}]
    )
    return len(listed["jobSummaryList"])


def test_a_stripped_default_group_refuses_the_run_before_anything_happens(
    moto_server, stack, tmp_path
):
    ec2 = moto_server.client("ec2")
    group = stack["TaskSecurityGroupId"]
    run = ("run", "--no-workspace", "--image", IMAGE, "--nodes", "2", "--", "true")
    assert _launcher(moto_server, tmp_path / "a", *run).returncode == 0  # AWS's rules: fine

    rules = ec2.describe_security_group_rules(Filters=[{"Name": "group-id", "Values": [group]}])
    ingress = [r["SecurityGroupRuleId"] for r in rules["SecurityGroupRules"] if not r["IsEgress"]]
    ec2.revoke_security_group_ingress(GroupId=group, SecurityGroupRuleIds=ingress)
    before = _jobs(moto_server)
    refused = _launcher(moto_server, tmp_path / "b", *run)
    assert refused.returncode == 1
    (line,) = refused.stderr.strip().splitlines()
    assert f"default security group {group}" in line
    assert "lacks its rule admitting all traffic from itself" in line
    assert _jobs(moto_server) == before  # nothing submitted

    check = _launcher(moto_server, tmp_path / "b", "check", "-o", "json")
    assert check.returncode == 1
    assert "lacks its rule admitting all traffic from itself" in check.stdout
    assert _jobs(moto_server) == before  # the check job would hang: not submitted

    ec2.authorize_security_group_ingress(
        GroupId=group,
        IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group}]}],
    )
    assert _launcher(moto_server, tmp_path / "b", *run).returncode == 0


def test_a_run_after_a_fine_check_makes_no_extra_call(moto_server, stack, tmp_path, monkeypatch):
    from launcher.api import Cluster
    from launcher.aws.client import Aws

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for key, value in moto_server.env.items():
        monkeypatch.setenv(key, value)
    aws = Aws()
    cluster = Cluster.from_stack("EfaBatch", aws=aws)
    calls = []
    for _ in range(2):
        before = aws.calls
        cluster.target.preflight()
        calls.append(aws.calls - before)
    assert calls == [1, 0]
