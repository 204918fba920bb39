"""AWS runtime semantics, checked on every synthesized variant and on the job definitions.

Each rule in ``tests/rules`` cites the AWS text that governs it. A green run of cfn-lint,
cdk-nag and moto says the templates deploy; these say the first job would train.
"""

from __future__ import annotations

import copy
import dataclasses

import pytest

from devenv.clusters import cluster_info
from infra.update_plan import create_only
from launcher.copyjob import plan
from launcher.image.reference import Reference, parse
from launcher.job import jobdef
from launcher.job.jobspec import JobSpec, Mount
from launcher.stack import catalog
from tests.rules import (
    compute_rules,
    copy_job_rules,
    data_rules,
    job_rules,
    network_rules,
    storage_rules,
)
from tests.rules.deployment import Deployment
from tests.rules.registry import RULES, UNCITED, CloudFormation, Model, Schema

VARIANTS = {
    # demo: p4d, new VPC without NAT
    "default": "synth_default",
    # prod: p5, NAT gateway, fair share
    "p5-nat-fairshare": "synth_p5",
    # an imported VPC and subnet
    "imported-vpc": "synth_imported",
    # prod in an EC2 Capacity Block, with warm nodes
    "capacity-block": "synth_capacity_block",
    # prod with every pull-through upstream and registry secrets for copy jobs
    "registries-nat": "synth_registries",
    # a KMS workspace repository and the Deep Learning Containers' cache rule
    "kms-dlc": "synth_kms",
    # four pools (tests/conftest.py POOLS), each held to every rule: p5 in a Capacity Block
    # (the default pool), its on-demand fallback, a small GPU pool, a CPU Spot pool
    **{f"pools-{pool}": "synth_pools" for pool in ("train", "ondemand", "debug", "cpu")},
}
STACK_RULES = [r for r in RULES if r.kind == "stack"]
JOB_RULES = [r for r in RULES if r.kind == "job"]
COPY_JOB_RULES = [r for r in RULES if r.kind == "copyjob"]
EFA_TYPES = sorted(n for n, t in catalog.CATALOG.items() if t.efa_capable)


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def deployment(request) -> Deployment:
    synth = request.getfixturevalue(VARIANTS[request.param])
    pool = request.param.removeprefix("pools-") if request.param.startswith("pools-") else None
    return Deployment(synth.templates(), synth.config, pool)


@pytest.mark.cdk
@pytest.mark.parametrize("rule", STACK_RULES, ids=[r.name for r in STACK_RULES])
def test_stack_rule(deployment, rule):
    assert rule.check(deployment) == []


def _job(cluster, **spec) -> job_rules.Job:
    values = {"name": "train", "command": ("python", "train.py"), "image": "img", "nodes": 2}
    requests = jobdef.build(JobSpec(**(values | spec)), cluster)
    return job_rules.Job(requests.register, requests.submit, cluster)


JOBS = {
    **{t: lambda t=t: _job(cluster_info(t)) for t in EFA_TYPES},
    "fair-share": lambda: _job(cluster_info(fair_share=True), share_id="team", priority=5),
    "efa-off": lambda: _job(cluster_info(efa=False), efa="off"),
    "mounts": lambda: _job(
        cluster_info(),
        mounts=(Mount("efs", "/data"), Mount("bind", "/scratch", "/local")),
        tags=tuple((f"k{i}", "v") for i in range(48)),
        timeout_seconds=60,
    ),
    "ecs-exec": lambda: _job(dataclasses.replace(cluster_info(), ecs_exec=True)),
}


@pytest.mark.parametrize("job", sorted(JOBS))
@pytest.mark.parametrize("rule", JOB_RULES, ids=[r.name for r in JOB_RULES])
def test_job_rule(rule, job):
    assert rule.check(JOBS[job]()) == []


SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:registry/ngc-AbCdEf"
DIGEST = "sha256:" + "a" * 64


def _copy_job(source: str, **cluster) -> copy_job_rules.CopyJob:
    info = cluster_info(**cluster)
    target = Reference("123456789012.dkr.ecr.us-east-1.amazonaws.com", "workspace")
    source_ref = parse(f"{source}@{DIGEST}")
    requests = plan.requests(source_ref, target, info, plan.CopierImage(info.copy_image))
    return copy_job_rules.CopyJob(requests.register, requests.submit, info)


COPY_JOBS = {
    "ecr-same-region": lambda: _copy_job("210987654321.dkr.ecr.us-east-1.amazonaws.com/base"),
    "registry-secret": lambda: _copy_job(
        "nvcr.io/nvidia/pytorch", internet_egress="nat", registry_secrets={"nvcr.io": SECRET}
    ),
}


@pytest.mark.parametrize("job", sorted(COPY_JOBS))
@pytest.mark.parametrize("rule", COPY_JOB_RULES, ids=[r.name for r in COPY_JOB_RULES])
def test_copy_job_rule(rule, job):
    assert rule.check(COPY_JOBS[job]()) == []


def test_every_copy_job_field_is_governed_by_a_rule():
    covers = {c for r in COPY_JOB_RULES for c in r.covers}
    fields = set()
    for make in COPY_JOBS.values():
        job = make()
        fields |= set(job.register) | set(job.submit) | set(job.container)
    assert sorted(fields - covers) == []


def test_copy_job_rules_catch_a_secret_in_clear_a_host_volume_and_retried_bad_requests():
    job = COPY_JOBS["registry-secret"]()
    container = job.container
    container["environment"].append({"name": "SOURCE_TOKEN", "value": "hunter2"})
    container["secrets"][0]["valueFrom"] = SECRET  # the whole JSON, not a key of it
    assert copy_job_rules.copy_job_credentials_are_roles_and_secret_references(job) == [
        "LAUNCHER_SOURCE_USERNAME: not a Secrets Manager ARN with a JSON key",
        "SOURCE_TOKEN: a credential in clear text",
    ]
    container["volumes"] = [{"name": "v", "host": {"sourcePath": "/tmp"}}]
    container["resourceRequirements"] = [
        {"type": "VCPU", "value": "1"},
        {"type": "MEMORY", "value": "1024"},
    ]
    assert copy_job_rules.copy_job_is_a_fargate_container_job_on_the_copy_queue(job) == [
        "{'VCPU': '1', 'MEMORY': '1024'}: not a Fargate size for 1 vCPU",
        "a host volume on Fargate",
    ]
    job.register["retryStrategy"]["evaluateOnExit"] = [{"onReason": "*", "action": "RETRY"}]
    assert copy_job_rules.copy_job_retries_transfers_but_not_bad_requests(job) == [
        "a bad request (exit 2) is attempted again"
    ]


# --- the rules themselves --------------------------------------------------------------------


def test_every_rule_cites_the_page_of_its_evidence():
    assert UNCITED == []


@pytest.mark.parametrize(
    "evidence",
    sorted(
        {e for r in RULES for e in r.evidence if isinstance(e, Model | CloudFormation | Schema)},
        key=repr,
    ),
    ids=lambda e: (
        e.url.rsplit("/", 1)[-1]
        + f"#{getattr(e, 'member', '') or getattr(e, 'prop', '') or getattr(e, 'pointer', '')}"
    ),
)
def test_quotes_from_the_references_are_verbatim(evidence):
    """A quote not in botocore's model (API reference) or aws-cdk-lib's L1 docstrings
    (CloudFormation reference) is a misquote."""
    assert evidence.found(), evidence


# Template properties no rule speaks for, and why none needs to. An exemption never covers a
# property the type's schema lists as create-only: a change to it replaces the resource, so a
# rule must speak for it, or tests/infra/test_updates.py, which proves that no setting change
# replaces what docs/operating.md says is kept (DAY_2).
NO_RUNTIME_EFFECT = {
    "Tags": "labels for people and cost reports, where an update changes them in place",
    "AccessPointTags": "labels",
    "FileSystemTags": "labels",
    "Description": "free text",
    "GroupDescription": "free text",
    "PolicyName": "a name",
    "LogGroupName": "checked where the key policy names it",
    "CidrBlock": "address plan; the flow rules use it for CIDR matches",
    "InstanceTenancy": "default tenancy",
    "MapPublicIpOnLaunch": "private subnets",
    "EmptyOnDelete": "deletion only",
    "Domain": "EIP for the NAT gateway",
    "VpcId": "placement of a resource in the cluster's VPC",
    "Version": "policy language version",
}
DAY_2 = {
    "CidrBlock": "the subnets keep their blocks when nat_gateway changes (infra/network.py)",
    "VpcId": "every resource stays in the one VPC",
    "LogGroupName": "named from the stack name, which never changes for a deployed stack",
    "GroupDescription": "constant text: the upgrade from the last release's templates would "
    "catch an edit (it replaces the group)",
}


def _property_paths(template: dict):
    for res in template["Resources"].values():
        if res["Type"].startswith("AWS::CDK"):
            continue
        for key, value in res.get("Properties", {}).items():
            yield res["Type"], key, value


def _nested(prefix: str, value) -> list[str]:
    if isinstance(value, dict) and not any(k.startswith("Fn::") or k == "Ref" for k in value):
        return [p for k, v in value.items() for p in _nested(f"{prefix}.{k}", v)] or [prefix]
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [p for v in value for p in _nested(prefix, v)]
    return [prefix]


@pytest.mark.cdk
def test_every_template_property_is_governed_by_a_rule(deployment):
    """A property the stacks set that no rule covers (and no reason exempts) fails here."""
    covers = [c for r in STACK_RULES for c in r.covers]
    uncovered = set()
    for template in deployment.templates.values():
        for type_, key, value in _property_paths(template):
            fixed = any(p[0] == key for p in create_only(type_))
            if key in NO_RUNTIME_EFFECT and (not fixed or key in DAY_2):
                continue
            for path in _nested(f"{type_}.{key}", value):
                if not any(path == c or path.startswith(c + ".") for c in covers):
                    uncovered.add(path)
    assert sorted(uncovered) == [], "\n".join(sorted(uncovered))


def _job_fields(job: job_rules.Job) -> set[str]:
    fields = {k for k in job.register if k != "nodeProperties"} | set(job.submit)
    fields.add("nodeProperties")
    for container in job.containers:
        for key, value in container.items():
            if key == "linuxParameters":
                fields |= {f"linuxParameters.{k}" for k in value}
            else:
                fields.add(key)
    return fields


def test_every_job_field_is_governed_by_a_rule():
    covers = {c for r in JOB_RULES for c in r.covers}
    fields = set().union(*(_job_fields(make()) for make in JOBS.values()))
    assert sorted(fields - covers) == []


# --- the rules catch what they are about -----------------------------------------------------


def _broken(deployment: Deployment, edit) -> Deployment:
    templates = copy.deepcopy(deployment.templates)
    edit(templates)
    return Deployment(templates, deployment.config)


def _resources(templates, type_):
    return [r for t in templates.values() for r in t["Resources"].values() if r["Type"] == type_]


def test_rules_catch_the_defects_that_once_shipped(synth_default):
    ok = Deployment(synth_default.templates(), synth_default.config)

    def drop_efa_egress(t):
        for stack in t.values():
            for k in [
                k
                for k, r in stack["Resources"].items()
                if r["Type"] == "AWS::EC2::SecurityGroupEgress"
            ]:
                del stack["Resources"][k]

    assert network_rules.efa_group_admits_all_traffic_to_and_from_itself(
        _broken(ok, drop_efa_egress)
    )

    def nfs_from_nodes_only(t):
        for stack in t.values():
            for k, r in list(stack["Resources"].items()):
                if r["Type"] == "AWS::EC2::SecurityGroupIngress" and "DefaultSecurityGroup" in str(
                    r
                ):
                    del stack["Resources"][k]

    broken = _broken(ok, nfs_from_nodes_only)
    assert network_rules.task_interfaces_reach_the_file_system(broken)
    assert network_rules.hosts_and_tasks_reach_the_interface_endpoints(broken)
    assert not network_rules.hosts_reach_the_file_system(broken)

    def replace_on_update(t):
        (ce,) = [
            ce
            for ce in _resources(t, "AWS::Batch::ComputeEnvironment")
            if ce["Properties"]["ComputeResources"]["Type"] == "EC2"
        ]
        ce["Properties"]["ReplaceComputeEnvironment"] = True

    assert compute_rules.compute_environment_updates_in_place(_broken(ok, replace_on_update))

    def efa_on_every_card(t):
        (lt,) = _resources(t, "AWS::EC2::LaunchTemplate")
        for i in lt["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]:
            i["InterfaceType"], i["DeviceIndex"] = "efa", 0 if i["NetworkCardIndex"] == 0 else 1

    rule = compute_rules.launch_template_has_one_efa_device_per_card_and_room_for_the_task
    assert rule(_broken(ok, efa_on_every_card))

    def bridge_mode_hop_limit(t):
        (lt,) = _resources(t, "AWS::EC2::LaunchTemplate")
        lt["Properties"]["LaunchTemplateData"]["MetadataOptions"]["HttpPutResponseHopLimit"] = 2

    rule = compute_rules.job_containers_cannot_reach_the_instance_role
    assert rule(_broken(ok, bridge_mode_hop_limit)) == [
        "hop limit 2: containers reach IMDS; 1 is the host"
    ]

    def imds_open_to_awsvpc_tasks(t):
        (lt,) = _resources(t, "AWS::EC2::LaunchTemplate")
        data = lt["Properties"]["LaunchTemplateData"]
        data["UserData"]["Fn::Base64"] = data["UserData"]["Fn::Base64"].replace("true", "false")

    assert rule(_broken(ok, imds_open_to_awsvpc_tasks)) == [
        "ECS_AWSVPC_BLOCK_IMDS is not true: job containers reach the instance role"
    ]

    def plain_script(t):
        (lt,) = _resources(t, "AWS::EC2::LaunchTemplate")
        lt["Properties"]["LaunchTemplateData"]["UserData"] = {"Fn::Base64": "#!/bin/bash\ntrue"}

    assert "not a MIME multi-part archive" in rule(_broken(ok, plain_script))[0]

    def ssm_core_on_the_nodes(t):
        (role,) = [
            r
            for stack in t.values()
            for k, r in stack["Resources"].items()
            if k.startswith("InstanceRole") and r["Type"] == "AWS::IAM::Role"
        ]
        role["Properties"]["ManagedPolicyArns"].append(
            {
                "Fn::Join": [
                    "",
                    [
                        "arn:",
                        {"Ref": "AWS::Partition"},
                        ":iam::aws:policy/AmazonSSMManagedInstanceCore",
                    ],
                ]
            }
        )

    problems = data_rules.instance_role_reads_no_data_or_secrets(_broken(ok, ssm_core_on_the_nodes))
    assert [p.split(": ", 1)[1] for p in problems] == [
        "ssm:GetParameter on * reads ssm:GetParameter",
        "ssm:GetParameters on * reads ssm:GetParameters",
    ]

    def no_policy(t):
        (fs,) = _resources(t, "AWS::EFS::FileSystem")
        del fs["Properties"]["FileSystemPolicy"]

    assert storage_rules.file_system_policy_closes_anonymous_access(_broken(ok, no_policy))


def test_job_rules_catch_an_old_nccl_setting_and_a_missing_device():
    job = _job(cluster_info())
    container = job.containers[0]
    container["environment"] = [
        {"name": "NCCL_SOCKET_IFNAME", "value": "^docker,lo,veth"}
        if e["name"] == "NCCL_SOCKET_IFNAME"
        else e
        for e in container["environment"]
    ]
    container["linuxParameters"]["devices"] = container["linuxParameters"]["devices"][1:]
    assert job_rules.nccl_bootstrap_uses_the_task_interface_only(job) == [
        "NCCL_SOCKET_IFNAME=^docker,lo,veth lets NCCL bind ecs-eth0"
    ]
    assert job_rules.every_efa_device_is_passed_with_unlimited_locked_memory(job)
    over = dataclasses.replace(
        job, submit={**job.submit, "tags": {f"k{i}": "v" for i in range(51)}}
    )
    assert job_rules.submission_matches_the_queue_and_the_log_group(over)


def test_job_rules_catch_retry_rules_batch_refuses_or_reads_otherwise():
    job = _job(cluster_info())
    strategy = job.register["retryStrategy"]
    strategy["evaluateOnExit"] = [{"onExitCode": "7-5", "action": "RETRY"}]
    assert job_rules.retries_and_timeout_mean_what_batch_does(job) == [
        "onExitCode '7-5' is not a pattern Batch accepts",
        "the last evaluateOnExit entry is not an EXIT that matches every failure",
    ]


@pytest.mark.parametrize(
    ("setting", "interface", "selected"),
    [
        ("^lo,docker,veth,ecs", "eth0", True),
        ("^lo,docker,veth,ecs", "ecs-eth0", False),
        ("^lo,docker,veth,ecs", "docker0", False),
        ("eth", "eth0", True),
        ("=eth0", "eth01", False),
        ("^=lo", "lo0", True),
    ],
)
def test_nccl_interface_selection_follows_nccls_syntax(setting, interface, selected):
    assert job_rules.nccl_selects(setting, interface) is selected
