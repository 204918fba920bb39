"""The templates pass cdk-nag, cfn-lint, the real CDK CLI and a deployment into moto."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from infra.compute_pool import job_queue_name
from launcher.stack.outputs import OutputKey
from tests.conftest import ROOT, cdk_context
from tests.support import tiers


@pytest.mark.cdk
def test_aws_solutions_has_no_unacknowledged_finding():
    from infra.nag_report import findings

    assert findings(cdk_context(), "AwsSolutions") == []


@pytest.mark.cdk
def test_aws_solutions_pack_really_runs(tmp_path):
    # Guard against a silently disabled pack: an open SSH port must be reported.
    import aws_cdk as cdk
    from aws_cdk import aws_ec2 as ec2

    from infra.app import create_app

    app, _, stacks = create_app(cdk_context(), outdir=str(tmp_path))
    sg = ec2.SecurityGroup(stacks["network"], "Open", vpc=stacks["network"].vpc)
    sg.add_ingress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(22))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    assert isinstance(app, cdk.App)


@pytest.mark.cdk
def test_nist_800_53_r5_findings_are_the_ones_listed_in_the_docs():
    from infra.nag_report import findings

    rules = {f.rule for f in findings(cdk_context(), "NIST.800.53.R5")}
    page = (ROOT / "docs" / "security.md").read_text()
    section = page.split("## NIST 800-53 R5 findings", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`(NIST\.800\.53\.R5-[A-Za-z0-9]+)`", section))
    assert rules == listed


VARIANTS = [
    "synth_default",
    "synth_p5",
    "synth_capacity_block",
    "synth_registries",
    "synth_kms",
    "synth_pools",
]


@pytest.mark.cdk
@pytest.mark.parametrize("fixture", [*VARIANTS, "synth_imported", "synth_teams"])
def test_cfn_lint_reports_no_errors(request, fixture):
    assert_cfn_lint_clean(request.getfixturevalue(fixture))


def cfn_lint(*paths: str) -> subprocess.CompletedProcess[str]:
    """The real cfn-lint of the venv on templates, its findings as JSON on stdout."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--format", "json", *paths],
        capture_output=True,
        text=True,
        check=False,
    )


def assert_cfn_lint_clean(synth) -> None:
    """No error in a synthesized app's templates, and no warning but those explained."""
    result = cfn_lint(*(str(synth.outdir / f"{n}.template.json") for n in synth.stack_names))
    # cfn-lint's exit code is a bit mask: 2 errors, 4 warnings, 8 informational; anything
    # else (1, a crash) means it did not lint.
    assert result.returncode & ~(2 | 4 | 8) == 0, result.stderr
    matches = json.loads(result.stdout)
    errors = [m for m in matches if m["Level"] == "Error"]
    assert errors == []
    assert {m["Rule"]["Id"] for m in matches} <= set(CFN_LINT_WARNINGS)


# The warnings cfn-lint may report, each explained in docs/security.md.
CFN_LINT_WARNINGS = {
    "W6001": "an output that re-exports an import from the storage stack: the launcher reads "
    "one stack",
    "W3010": "the availability zone is the configuration's: an EFA cluster (and a Capacity "
    "Block) lives in one zone the platform team chooses",
}


def test_cfn_lint_really_lints(tmp_path):
    """Guard against a linter that never ran: a template with an error must be reported."""
    template = tmp_path / "broken.json"
    template.write_text(json.dumps({"Resources": {"Q": {"Type": "AWS::Batch::JobQueue"}}}))
    result = cfn_lint(str(template))
    assert result.returncode & 2, result.stderr
    assert any(m["Level"] == "Error" for m in json.loads(result.stdout))


def test_every_cfn_lint_warning_allowed_is_explained_in_the_docs():
    page = (ROOT / "docs" / "security.md").read_text()
    assert all(f"`{rule}`" in page for rule in CFN_LINT_WARNINGS)


def _cdk(*args: str, tmp_path) -> subprocess.CompletedProcess:
    tiers.require("cdk")
    env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    return subprocess.run(
        [str(ROOT / "node_modules" / ".bin" / "cdk"), *args, "--quiet", "-o", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.cdk
@pytest.mark.parametrize("settings", [("env=demo", "ecs_exec=true"), ("env=prod",)], ids=" ".join)
def test_real_cdk_cli_synthesizes_each_environment(settings, tmp_path):
    """The CDK CLI runs the app with cdk-nag on: `-c ecs_exec=true` exited 1 here on
    AwsSolutions-IAM5 while every in-process synth, made with the pack off, passed (the demo
    environment without it is synthesized in process, tests/infra/test_updates.py)."""
    args = [arg for setting in settings for arg in ("-c", setting)]
    result = _cdk("synth", *args, tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    artifacts = manifest["artifacts"].items()
    stacks = {k for k, v in artifacts if v["type"] == "aws:cloudformation:stack"}
    assert stacks == {"EfaBatch", "EfaBatch-Network", "EfaBatch-Storage"}


@pytest.mark.cdk
@pytest.mark.parametrize(
    ("settings", "line"),
    [
        (
            ["instance_type=g5.xlarge"],
            "instance_type: g5.xlarge has no EFA; set efa=false or use one of: c5n.18xlarge, "
            "c7i.48xlarge, c7i.metal-48xl, g4dn.12xlarge, g5.12xlarge, g5.48xlarge, "
            "g6e.48xlarge, hpc7g.16xlarge, m7i.48xlarge, m7i.metal-48xl, p4d.24xlarge, "
            "p4de.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge, p6-b200.48xlarge, "
            "p6-b300.48xlarge, r7i.48xlarge, r7i.metal-48xl",
        ),
        (
            ["instance_type=g5.48xlarge", "capacity_block_id=cr-0123456789abcdef0"],
            "capacity_block_id: EC2 offers no Capacity Blocks for g5.48xlarge; instance_type "
            "must be one of: p4d.24xlarge, p4de.24xlarge, p5.48xlarge, p5e.48xlarge, "
            "p5en.48xlarge, p6-b200.48xlarge, p6-b300.48xlarge",
        ),
        (["max_node=8"], "max_node: not a setting; did you mean max_nodes?"),
        (
            ["instance-type=p5.48xlarge"],
            "instance-type: not a setting; did you mean instance_type?",
        ),
        (
            ["availability_zone=us-east-1z"],
            "availability_zone: 'us-east-1z' is not a zone of us-east-1; allowed: us-east-1a, "
            "us-east-1b, us-east-1c, us-east-1d, us-east-1e, us-east-1f",
        ),
        (
            ['registry_secrets={"nvcr.io": "x"}'],
            "registry_secrets: 'x' is malformed; expected complete Secrets Manager secret ARNs "
            "(arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME-XXXXXX) as values",
        ),
    ],
)
def test_real_cdk_cli_rejects_bad_configuration_with_one_line(settings, line, tmp_path):
    args = [a for setting in settings for a in ("-c", setting)]
    result = _cdk("synth", *args, tmp_path=tmp_path)
    assert result.returncode != 0
    lines = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert lines == [f"error: invalid cluster configuration: {line}"]
    assert "Traceback" not in result.stderr


@pytest.mark.cdk
@pytest.mark.parametrize("fixture", VARIANTS)
def test_templates_deploy_into_moto_and_expose_every_output(request, fixture, moto_server):
    synth = request.getfixturevalue(fixture)
    moto_server.reset()
    outputs = moto_server.deploy(synth.outdir, synth.stack_names)[synth.config.stack_name]
    assert set(outputs) == {k.value for k in OutputKey}
    assert outputs[OutputKey.JOB_QUEUE_NAME] == job_queue_name(synth.config)
    assert outputs[OutputKey.ACCESS_POINT_ID].startswith("fsap-")
    assert outputs[OutputKey.FILE_SYSTEM_ID].startswith("fs-")
    assert ".dkr.ecr.us-east-1.amazonaws.com/" in outputs[OutputKey.REPOSITORY_URI]
    batch = moto_server.client("batch")
    (queue,) = batch.describe_job_queues(jobQueues=[outputs[OutputKey.JOB_QUEUE_NAME]])["jobQueues"]
    assert queue["state"] == "ENABLED"
    (copy,) = batch.describe_job_queues(jobQueues=[outputs[OutputKey.COPY_QUEUE_ARN]])["jobQueues"]
    assert copy["jobQueueName"] == "EfaBatch-copy"
    (order,) = copy["computeEnvironmentOrder"]
    (ce,) = batch.describe_compute_environments(computeEnvironments=[order["computeEnvironment"]])[
        "computeEnvironments"
    ]
    assert ce["computeResources"]["type"] == "FARGATE"
    assert outputs[OutputKey.INTERNET_EGRESS] == synth.config.internet_egress
    assert (
        ".dkr.ecr." in outputs[OutputKey.COPY_IMAGE]
        and "container-assets" in outputs[OutputKey.COPY_IMAGE]
    )


# checkov findings that are explained (in docs/security.md) rather than fixed.
CHECKOV_EXPLAINED: dict[str, str] = {
    "CKV_AWS_136": "the workspace repository uses ECR's default AES256 encryption (S3-managed "
    "keys), not KMS: ECR mounts a base's layers from another repository only when both use "
    "identical encryption type and keys (ECR user guide, blob-mounting.html), and ordinary "
    "repositories use AES256; repository_encryption=kms is the opt-in",
}


def _checkov_failures(directory) -> tuple[set[tuple[str, str, str]], Counter[str]]:
    """(check id, resource, file) of every failed check, and how many checks passed in each
    file (paths as checkov gives them: relative to ``directory``, with a leading /)."""
    tiers.require("checkov")
    checkov = ROOT / ".venv-checkov" / "bin" / "checkov"
    if not checkov.exists():
        from tests.support.processes import required_or_skip

        required_or_skip("checkov is not installed (make deps installs it in .venv-checkov)")
    # --skip-download: checkov otherwise asks Prisma Cloud's API for guidelines first, traffic
    # to another host that the tests must never send (and a wait where there is no route).
    result = subprocess.run(
        [str(checkov), "-d", str(directory), "--framework", "cloudformation", "--skip-download"]
        + ["-o", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    reports = json.loads(result.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    failed = {
        (f["check_id"], f["resource"], f["file_path"])
        for r in reports
        for f in r["results"]["failed_checks"]
    }
    passed = Counter(f["file_path"] for r in reports for f in r["results"]["passed_checks"])
    return failed, passed


CHECKOV_VARIANTS = [*VARIANTS, "synth_imported", "synth_teams"]


@pytest.fixture(scope="module")
def checkov_scan(request, tmp_path_factory):
    """Every variant's templates in one checkov run (its start-up is most of a run's time),
    each in a directory named for its variant."""
    root = tmp_path_factory.mktemp("checkov")
    for fixture in CHECKOV_VARIANTS:
        outdir = Path(request.getfixturevalue(fixture).outdir)
        (root / fixture).mkdir()
        for template in outdir.glob("*.template.json"):
            shutil.copy(template, root / fixture / template.name)
    return _checkov_failures(root)


@pytest.mark.cdk
@pytest.mark.checkov
@pytest.mark.parametrize("fixture", CHECKOV_VARIANTS)
def test_checkov_reports_nothing_unexplained(checkov_scan, fixture):
    """An outside scanner's CloudFormation policies, run as a platform team's pipeline would."""
    failed, passed = checkov_scan
    mine = f"/{fixture}/"
    assert sum(n for path, n in passed.items() if path.startswith(mine)) > 50  # really scanned
    unexplained = {
        (check, resource, path)
        for check, resource, path in failed
        if path.startswith(mine) and check not in CHECKOV_EXPLAINED
    }
    assert unexplained == set()


@pytest.mark.checkov
def test_checkov_really_runs(tmp_path):
    # Guard against a scanner that silently checks nothing: an unencrypted log group fails.
    template = {"Resources": {"Logs": {"Type": "AWS::Logs::LogGroup", "Properties": {}}}}
    (tmp_path / "t.template.json").write_text(json.dumps(template))
    failed, _ = _checkov_failures(tmp_path)
    assert ("CKV_AWS_158", "AWS::Logs::LogGroup.Logs", "/t.template.json") in failed
