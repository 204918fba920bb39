"""The copy jobs' infrastructure: the Fargate queue, its network, roles, image, pull-through
cache rules and outputs, on each variant; and the rules in tests/rules/copy_rules.py catching
the broken templates they are about."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from infra.copy_jobs import COPIER_CONTEXT
from launcher.stack.outputs import OutputKey, parse_pairs
from tests.conftest import ROOT
from tests.rules import copy_rules
from tests.rules.deployment import Deployment


def _resources(template: dict, type_: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def _outputs(synth) -> dict[str, object]:
    return {k: v["Value"] for k, v in synth.template()["Outputs"].items()}


def _deployment(synth) -> Deployment:
    return Deployment(synth.templates(), synth.config)


def _fargate(template: dict) -> dict:
    (props,) = [
        r["Properties"]
        for r in _resources(template, "AWS::Batch::ComputeEnvironment").values()
        if r["Properties"]["ComputeResources"]["Type"] == "FARGATE"
    ]
    return props


def _statements(template: dict, role_prefix: str) -> list[dict]:
    return [
        st
        for k, r in _resources(template, "AWS::IAM::Policy").items()
        if k.startswith(role_prefix)
        for st in r["Properties"]["PolicyDocument"]["Statement"]
    ]


def _text(value) -> str:
    if isinstance(value, dict) and "Fn::Join" in value:
        return "".join(p if isinstance(p, str) else "aws" for p in value["Fn::Join"][1])
    return value if isinstance(value, str) else json.dumps(value)


# --- what the stacks provision ------------------------------------------------------------------


def test_fargate_compute_environment_and_queue(synth_default):
    template = synth_default.template()
    props = _fargate(template)
    assert props["Type"] == "MANAGED" and "ServiceRole" not in props
    resources = props["ComputeResources"]
    assert set(resources) == {"Type", "MaxvCpus", "Subnets", "SecurityGroupIds"}
    assert resources["MaxvCpus"] == 16
    assert "CopySecurityGroup" in json.dumps(resources["SecurityGroupIds"])
    (cluster,) = [
        r["Properties"]["ComputeResources"]
        for r in _resources(template, "AWS::Batch::ComputeEnvironment").values()
        if r["Properties"]["ComputeResources"]["Type"] == "EC2"
    ]
    assert resources["Subnets"] == cluster["Subnets"]
    queues = {
        r["Properties"]["JobQueueName"]: r
        for r in _resources(template, "AWS::Batch::JobQueue").values()
    }
    assert set(queues) == {"EfaBatch-jobs", "EfaBatch-copy"}
    assert "JobStateTimeLimitActions" not in queues["EfaBatch-copy"]["Properties"]


def test_copy_group_sends_https_only_and_the_endpoints_admit_it(synth_default):
    network = synth_default.template("-Network")
    (group,) = [
        r["Properties"]
        for k, r in _resources(network, "AWS::EC2::SecurityGroup").items()
        if k.startswith("CopySecurityGroup")
    ]
    assert group["SecurityGroupEgress"] == [
        {
            "CidrIp": "0.0.0.0/0",
            "Description": group["SecurityGroupEgress"][0]["Description"],
            "FromPort": 443,
            "IpProtocol": "tcp",
            "ToPort": 443,
        }
    ]
    assert "SecurityGroupIngress" not in group
    admitted = [
        r["Properties"]
        for r in _resources(network, "AWS::EC2::SecurityGroupIngress").values()
        if "CopySecurityGroup" in json.dumps(r["Properties"]["SourceSecurityGroupId"])
    ]
    assert [(a["FromPort"], a["ToPort"]) for a in admitted] == [(443, 443)]
    assert "EndpointSecurityGroup" in json.dumps(admitted[0]["GroupId"])
    # The S3 gateway endpoint has no policy: EC2's default allows ECR's layer bucket too.
    (gateway,) = [
        r["Properties"]
        for r in _resources(network, "AWS::EC2::VPCEndpoint").values()
        if r["Properties"].get("VpcEndpointType") == "Gateway"
    ]
    assert "PolicyDocument" not in gateway


def test_imported_vpc_copy_group_and_subnet(synth_imported):
    network = synth_imported.template("-Network")
    (group,) = [
        r["Properties"]
        for k, r in _resources(network, "AWS::EC2::SecurityGroup").items()
        if k.startswith("CopySecurityGroup")
    ]
    assert group["VpcId"] == "vpc-0123456789abcdef0"
    resources = _fargate(synth_imported.template())["ComputeResources"]
    assert resources["Subnets"] == ["subnet-0123456789abcdef0"]
    outputs = _outputs(synth_imported)
    assert outputs[OutputKey.INTERNET_EGRESS] == "imported"
    assert parse_pairs(outputs[OutputKey.REGISTRY_SECRETS]) == {
        "nvcr.io": "arn:aws:secretsmanager:us-east-1:123456789012:secret:registry/ngc-AbCdEf"
    }


def test_copy_job_role_scopes(synth_default):
    statements = {
        st.get("Sid", st["Action"] if isinstance(st["Action"], str) else "?"): st
        for st in _statements(synth_default.template(), "CopyJobRole")
    }
    assert statements["ecr:GetAuthorizationToken"]["Resource"] == "*"
    assert _text(statements["PullImagesOfTheRegion"]["Resource"]) == (
        "arn:aws:ecr:us-east-1:*:repository/*"
    )
    push = statements["PushTheWorkspaceRepository"]
    assert "ecr:PutImage" in push["Action"]
    assert "WorkspaceRepository" in json.dumps(push["Resource"])
    ptc = statements["PullThroughTheCacheRules"]
    assert ptc["Action"] == ["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"]
    assert _text(ptc["Resource"]) == "arn:aws:ecr:us-east-1:123456789012:repository/ecr-public/*"
    assert not any(a.startswith("kms:") for st in statements.values() for a in st["Action"])


def test_job_roles_trust_ecs_tasks_of_this_account_execution_roles_trust_ecs(synth_default):
    """Task (job) roles carry the confused-deputy conditions the ECS guide recommends for
    them; execution roles the unconditioned trust AWS documents for execution roles, since
    nothing says ECS sends aws:SourceArn when it assumes one."""
    roles = _resources(synth_default.template(), "AWS::IAM::Role")
    for prefix in ("CopyJobRole", "JobRole"):
        (role,) = [r for k, r in roles.items() if k.startswith(prefix)]
        (st,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert st["Principal"] == {"Service": "ecs-tasks.amazonaws.com"}
        assert st["Condition"]["StringEquals"] == {"aws:SourceAccount": "123456789012"}
        assert _text(st["Condition"]["ArnLike"]["aws:SourceArn"]) == (
            "arn:aws:ecs:us-east-1:123456789012:*"
        )
    for prefix in ("CopyExecutionRole", "ExecutionRole"):
        (role,) = [r for k, r in roles.items() if k.startswith(prefix)]
        (st,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert st["Principal"] == {"Service": "ecs-tasks.amazonaws.com"}
        assert "Condition" not in st


def test_execution_role_reads_exactly_the_configured_secrets(synth_registries, synth_default):
    (secrets,) = [
        st
        for st in _statements(synth_registries.template(), "CopyExecutionRole")
        if st["Action"] == "secretsmanager:GetSecretValue"
    ]
    assert secrets["Resource"] == sorted(synth_registries.config.registry_secrets.values())
    assert not [
        st
        for st in _statements(synth_default.template(), "CopyExecutionRole")
        if "secretsmanager" in json.dumps(st["Action"])
    ]


def test_every_upstream_rule_and_its_template(synth_registries):
    template = synth_registries.template()
    rules = {
        r["Properties"]["EcrRepositoryPrefix"]: r["Properties"]
        for r in _resources(template, "AWS::ECR::PullThroughCacheRule").values()
    }
    assert {p: r["UpstreamRegistryUrl"] for p, r in rules.items()} == {
        "dlc": "763104351884.dkr.ecr.us-west-2.amazonaws.com",
        "docker-hub": "registry-1.docker.io",
        "ecr-public": "public.ecr.aws",
        "github-container-registry": "ghcr.io",
        "gitlab-container-registry": "registry.gitlab.com",
        "k8s": "registry.k8s.io",
        "quay": "quay.io",
    }
    assert {p for p, r in rules.items() if "CredentialArn" in r} == {
        "docker-hub",
        "github-container-registry",
        "gitlab-container-registry",
    }
    assert {p for p, r in rules.items() if "CustomRoleArn" in r} == {"dlc"}
    templates = {
        r["Properties"]["Prefix"]: r["Properties"]
        for r in _resources(template, "AWS::ECR::RepositoryCreationTemplate").values()
    }
    assert set(templates) == set(rules)
    for props in templates.values():
        assert props["AppliedFor"] == ["PULL_THROUGH_CACHE"]
        assert props["EncryptionConfiguration"] == {"EncryptionType": "AES256"}
        assert props["ImageTagMutability"] == "MUTABLE"
        assert "CustomRoleArn" not in props  # AES256, no tags: the service-linked role
    assert _fargate(template)["ComputeResources"]["MaxvCpus"] == 32
    outputs = _outputs(synth_registries)
    assert outputs[OutputKey.INTERNET_EGRESS] == "nat"
    assert parse_pairs(outputs[OutputKey.PULL_THROUGH_CACHE])["quay"] == "quay.io"


def test_kms_repository_and_its_templates(synth_kms):
    storage = synth_kms.template("-Storage")
    (repo,) = _resources(storage, "AWS::ECR::Repository").values()
    assert repo["Properties"]["EncryptionConfiguration"] == {"EncryptionType": "KMS"}
    template = synth_kms.template()
    for r in _resources(template, "AWS::ECR::RepositoryCreationTemplate").values():
        assert r["Properties"]["EncryptionConfiguration"] == {"EncryptionType": "KMS"}
        assert "RepositoryTemplateRole" in json.dumps(r["Properties"]["CustomRoleArn"])
    (role,) = [
        r
        for k, r in _resources(template, "AWS::IAM::Role").items()
        if "RepositoryTemplateRole" in k
    ]
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "ecr.amazonaws.com"
    }
    assert parse_pairs(_outputs(synth_kms)[OutputKey.PULL_THROUGH_CACHE]) == {
        "dlc": "763104351884.dkr.ecr.us-east-1.amazonaws.com",
        "ecr-public": "public.ecr.aws",
    }


def test_default_outputs(synth_default):
    outputs = _outputs(synth_default)
    assert outputs[OutputKey.INTERNET_EGRESS] == "none"
    assert outputs[OutputKey.PULL_THROUGH_CACHE] == "ecr-public=public.ecr.aws"
    assert outputs[OutputKey.REGISTRY_SECRETS] == "none"
    assert "container-assets" in json.dumps(outputs[OutputKey.COPY_IMAGE])


# --- the copier image -----------------------------------------------------------------------------


def _asset_dir(synth) -> Path:
    (found,) = [p for p in synth.outdir.iterdir() if p.name.startswith("asset.")]
    return found


def test_copier_asset_holds_only_what_pip_needs(synth_default):
    """The asset's hash and its copy in cdk.out cover pyproject.toml, README.md, launcher/,
    torchx_plugins/ and the Dockerfile: never .venv, node_modules, cdk.out, .git or tests."""
    asset = _asset_dir(synth_default)
    files = sorted(str(p.relative_to(asset)) for p in asset.rglob("*") if p.is_file())
    assert files
    assert all(any(f == c or f.startswith(c + "/") for c in COPIER_CONTEXT) for f in files), files
    assert {"pyproject.toml", "README.md", "infra/copier/Dockerfile"} <= set(files)
    assert "launcher/copyjob/program.py" in files
    assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc")]
    manifest = json.loads((synth_default.outdir / "EfaBatch.assets.json").read_text())
    (image,) = manifest["dockerImages"].values()
    assert image["source"]["dockerFile"] == "infra/copier/Dockerfile"
    assert image["source"]["platform"] == "linux/amd64"
    assert asset.name == f"asset.{next(iter(manifest['dockerImages']))}"


def test_copier_package_builds_from_the_asset_and_runs_its_command(synth_default, tmp_path):
    """What the Dockerfile's `pip install /src` does, offline: build the wheel from the staged
    context, then run the image's CMD against it."""
    context = tmp_path / "src"
    subprocess.run(["cp", "-r", str(_asset_dir(synth_default)), str(context)], check=True)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["--no-index", "-w", str(tmp_path / "dist"), str(context)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "launcher/copyjob/program.py" in names
    assert not [n for n in names if n.startswith("infra/")]
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site)}
    which = subprocess.run(
        [sys.executable, "-c", "import launcher.copyjob.program as c; print(c.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert which.stdout.startswith(str(site))
    dockerfile = (ROOT / "infra" / "copier" / "Dockerfile").read_text()
    (cmd,) = [line for line in dockerfile.splitlines() if line.startswith("CMD ")]
    command = json.loads(cmd.removeprefix("CMD "))
    assert command[0] == "python3"
    ran = subprocess.run(
        [sys.executable, *command[1:]], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "usage" in ran.stdout.lower()


# --- the rules catch what they are about ----------------------------------------------------------


def _broken(synth, edit) -> Deployment:
    templates = copy.deepcopy(synth.templates())
    edit(templates)
    return Deployment(templates, synth.config)


def _each(templates, type_):
    return [
        (k, r) for t in templates.values() for k, r in t["Resources"].items() if r["Type"] == type_
    ]


def _copy_group(templates) -> dict:
    (group,) = [
        r["Properties"]
        for k, r in _each(templates, "AWS::EC2::SecurityGroup")
        if k.startswith("CopySecurityGroup")
    ]
    return group


def _fargate_props(templates) -> dict:
    (ce,) = [
        r["Properties"]
        for _, r in _each(templates, "AWS::Batch::ComputeEnvironment")
        if r["Properties"]["ComputeResources"]["Type"] == "FARGATE"
    ]
    return ce


@pytest.mark.cdk
@pytest.mark.parametrize("fixture", ["synth_default", "synth_registries", "synth_kms"])
def test_copy_rules_hold(request, fixture):
    d = _deployment(request.getfixturevalue(fixture))
    for rule in (
        copy_rules.copy_compute_environment_is_a_fargate_pool_in_the_cluster_subnet,
        copy_rules.copy_queue_feeds_the_fargate_pool_only,
        copy_rules.copy_tasks_reach_the_image_the_layers_and_the_logs,
        copy_rules.copy_job_role_pushes_only_to_the_workspace_repository,
        copy_rules.copy_execution_role_reads_the_image_and_the_configured_secrets_only,
        copy_rules.workspace_repository_encryption_lets_bases_mount,
        copy_rules.pull_through_cache_rules_match_their_upstreams,
        copy_rules.repository_creation_templates_cover_the_pull_through_prefixes,
        copy_rules.copy_outputs_tell_the_launcher_what_the_cluster_reaches,
        copy_rules.copy_jobs_run_the_stack_copier_image,
    ):
        assert rule(d) == [], rule.__name__


def test_network_rule_catches_all_traffic_out_and_a_closed_endpoint(synth_default):
    rule = copy_rules.copy_tasks_reach_the_image_the_layers_and_the_logs

    def all_out(t):
        _copy_group(t)["SecurityGroupEgress"].append({"IpProtocol": "-1", "CidrIp": "0.0.0.0/0"})

    assert "copy jobs may send more than HTTPS" in rule(_broken(synth_default, all_out))

    def endpoints_closed(t):
        for stack in t.values():
            for k in [
                k
                for k, r in stack["Resources"].items()
                if r["Type"] == "AWS::EC2::SecurityGroupIngress"
                and "CopySecurityGroup" in json.dumps(r["Properties"]["SourceSecurityGroupId"])
            ]:
                del stack["Resources"][k]

    problems = rule(_broken(synth_default, endpoints_closed))
    assert any("no ingress rule" in p and "ecr.dkr" in p for p in problems), problems

    def layers_blocked(t):
        for _, r in _each(t, "AWS::EC2::VPCEndpoint"):
            if r["Properties"].get("VpcEndpointType") == "Gateway":
                only_mine = {
                    "Effect": "Allow",
                    "Principal": {"AWS": "x"},
                    "Action": "s3:GetObject",
                    "Resource": "arn:aws:s3:::my-bucket/*",
                }
                r["Properties"]["PolicyDocument"] = {"Statement": [only_mine]}

    assert any("layer bucket" in p for p in rule(_broken(synth_default, layers_blocked)))


def test_network_rule_catches_registry_secrets_without_their_endpoint(synth_registries):
    """Batch user guide, specifying-sensitive-data-secrets.html: secrets in a job definition
    plus interface endpoints in the VPC need a Secrets Manager endpoint too."""
    rule = copy_rules.copy_tasks_reach_the_image_the_layers_and_the_logs

    def no_secrets_endpoint(t):
        for stack in t.values():
            for k in [k for k in stack["Resources"] if k.startswith("VpcSecretsManagerEndpoint")]:
                del stack["Resources"][k]

    assert rule(_deployment(synth_registries)) == []
    assert "no secretsmanager endpoint" in rule(_broken(synth_registries, no_secrets_endpoint))


def test_fargate_rule_catches_instance_settings_and_a_mixed_queue(synth_default):
    rule = copy_rules.copy_compute_environment_is_a_fargate_pool_in_the_cluster_subnet

    def instance_settings(t):
        resources = _fargate_props(t)["ComputeResources"]
        resources["InstanceTypes"] = ["optimal"]
        resources["MinvCpus"] = 0

    assert rule(_broken(synth_default, instance_settings)) == [
        "InstanceTypes is not for Fargate",
        "MinvCpus is not for Fargate",
    ]

    def no_groups(t):
        _fargate_props(t)["ComputeResources"]["SecurityGroupIds"] = []

    assert "no security group: Fargate requires one" in rule(_broken(synth_default, no_groups))

    def mixed(t):
        (fargate,) = [
            k
            for k, r in _each(t, "AWS::Batch::ComputeEnvironment")
            if r["Properties"]["ComputeResources"]["Type"] == "FARGATE"
        ]
        for _, r in _each(t, "AWS::Batch::JobQueue"):
            if r["Properties"]["JobQueueName"] == "EfaBatch-jobs":
                r["Properties"]["ComputeEnvironmentOrder"].append(
                    {"ComputeEnvironment": {"Ref": fargate}, "Order": 2}
                )

    assert copy_rules.copy_queue_feeds_the_fargate_pool_only(_broken(synth_default, mixed)) == [
        "the training queue mixes the Fargate pool with EC2"
    ]


def test_role_rules_catch_wider_grants(synth_default, synth_registries):
    job_rule = copy_rules.copy_job_role_pushes_only_to_the_workspace_repository

    def push_anywhere(t):
        for k, r in _each(t, "AWS::IAM::Policy"):
            if k.startswith("CopyJobRole"):
                r["Properties"]["PolicyDocument"]["Statement"].append(
                    {"Effect": "Allow", "Action": "ecr:PutImage", "Resource": "*"}
                )

    problems = job_rule(_broken(synth_default, push_anywhere))
    assert "copy job role: ['ecr:PutImage'] on *" in problems

    def untrusted(t):
        for k, r in _each(t, "AWS::IAM::Role"):
            if k.startswith("CopyJobRole"):
                del r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Condition"]

    assert job_rule(_broken(synth_default, untrusted)) == [
        "copy job role: trust not limited to ECS tasks of this account and region"
    ]
    exec_rule = copy_rules.copy_execution_role_reads_the_image_and_the_configured_secrets_only

    def any_secret(t):
        for k, r in _each(t, "AWS::IAM::Policy"):
            if k.startswith("CopyExecutionRole"):
                for st in r["Properties"]["PolicyDocument"]["Statement"]:
                    if st["Action"] == "secretsmanager:GetSecretValue":
                        st["Resource"] = st["Resource"] + ["arn:aws:secretsmanager:*:*:secret:*"]

    problems = exec_rule(_broken(synth_registries, any_secret))
    assert any(p.startswith("copy execution role reads secrets") for p in problems), problems


def test_registry_rules_catch_wrong_upstreams_and_templates(synth_registries, synth_kms):
    ptc_rule = copy_rules.pull_through_cache_rules_match_their_upstreams

    def wrong(t):
        for _, r in _each(t, "AWS::ECR::PullThroughCacheRule"):
            props = r["Properties"]
            if props["EcrRepositoryPrefix"] == "docker-hub":
                props["UpstreamRegistryUrl"] = "docker.io"
                del props["CredentialArn"]
            if props["EcrRepositoryPrefix"] == "dlc":
                del props["CustomRoleArn"]

    assert ptc_rule(_broken(synth_registries, wrong)) == [
        "dlc: no role of ours that ECR pull-through cache assumes",
        "docker-hub: URL docker.io",
        "docker-hub: credentials given where none are needed, or missing",
    ]
    template_rule = copy_rules.repository_creation_templates_cover_the_pull_through_prefixes

    def immutable_without_role(t):
        for _, r in _each(t, "AWS::ECR::RepositoryCreationTemplate"):
            if r["Properties"]["Prefix"] == "dlc":
                r["Properties"]["ImageTagMutability"] = "IMMUTABLE"
                del r["Properties"]["CustomRoleArn"]

    assert template_rule(_broken(synth_kms, immutable_without_role)) == [
        "dlc: immutable tags stop ECR updating cached images",
        "dlc: KMS or tags without a role ECR may assume",
    ]


def test_encryption_and_output_rules_catch_drift(synth_default):
    def kms(t):
        for _, r in _each(t, "AWS::ECR::Repository"):
            r["Properties"]["EncryptionConfiguration"] = {"EncryptionType": "KMS"}

    assert copy_rules.workspace_repository_encryption_lets_bases_mount(
        _broken(synth_default, kms)
    ) == ["repository encryption KMS; repository_encryption asks for AES256"]

    def claims_nat(t):
        t["EfaBatch"]["Outputs"][OutputKey.INTERNET_EGRESS.value]["Value"] = "nat"

    assert copy_rules.copy_outputs_tell_the_launcher_what_the_cluster_reaches(
        _broken(synth_default, claims_nat)
    ) == ["InternetEgress nat"]
