"""Jobs that reach their data, proven on the synthesized stacks (issue 19): S3 data buckets,
the team's managed policies, job secrets, FSx for Lustre and privileged containers.

Two variants carry every new setting between them (conftest ``DATA`` and ``LUSTRE``); each is
synthesized once with cdk-nag on (the synth raises on an unacknowledged finding), linted with
cfn-lint, held to every stack rule in ``tests/rules`` (``data_rules`` speaks for the new
settings), deployed into the moto server, and read back by the launcher.
"""

from __future__ import annotations

import base64
import copy
import json

import pytest

from infra.update_plan import of, plan
from launcher.job.jobspec import FSX_NODE_PATH
from launcher.stack.cluster import from_stack
from launcher.stack.outputs import NONE, OutputKey
from tests.conftest import synth_templates
from tests.infra.test_aws_rules import (
    test_every_template_property_is_governed_by_a_rule as _every_property_governed,
)
from tests.infra.test_checks import assert_cfn_lint_clean
from tests.rules import data_rules
from tests.rules.deployment import Deployment
from tests.rules.registry import RULES

pytestmark = pytest.mark.cdk  # every test synthesizes (variants through getfixturevalue)

VARIANTS = {
    # demo without NAT: data buckets, managed policies, secrets (all three kinds), scratch
    # FSx, privileged containers allowed
    "data-nonat": "synth_data",
    # prod with NAT: persistent FSx linked to S3, a parameter in another Region
    "lustre-nat": "synth_lustre",
}
STACK_RULES = [r for r in RULES if r.kind == "stack"]


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def variant(request):
    return request.getfixturevalue(VARIANTS[request.param])


@pytest.fixture(scope="module")
def deployment(variant) -> Deployment:
    return Deployment(variant.templates(), variant.config)


@pytest.fixture(scope="module")
def data(synth_data) -> Deployment:
    return Deployment(synth_data.templates(), synth_data.config)


@pytest.fixture(scope="module")
def lustre(synth_lustre) -> Deployment:
    return Deployment(synth_lustre.templates(), synth_lustre.config)


# --- every rule, every property, the linters ---------------------------------------------------


@pytest.mark.parametrize("rule", STACK_RULES, ids=[r.name for r in STACK_RULES])
def test_stack_rule(deployment, rule):
    assert rule.check(deployment) == []


def test_every_template_property_is_governed_by_a_rule(deployment):
    _every_property_governed(deployment)


def test_cfn_lint_reports_no_errors(variant):
    """As tests/infra/test_checks.py runs it. Sizes stay small: cfn-lint's patched schema caps
    AWS::FSx::FileSystem StorageCapacity at 65536 (Windows File Server's limit), a false error
    for a Lustre file system above 64 TiB."""
    assert_cfn_lint_clean(variant)


def test_variants_cover_every_new_setting(synth_data, synth_lustre):
    """The two variants between them set each new setting in each form the issue names."""
    a, b = synth_data.config, synth_lustre.config
    locations = a.data_locations + b.data_locations
    assert {(bool(x.prefix), x.writable) for x in locations} == {
        (True, False),
        (False, True),
        (True, True),
    }
    assert any(":iam::aws:policy/" in p for p in a.job_role_policies)
    grants = a.secret_grants + b.secret_grants
    assert {(g.store.value, g.prefix is None) for g in grants} == {
        ("secretsmanager", False),
        ("ssm", False),
        ("secretsmanager", True),
        ("ssm", True),
    }
    assert {a.fsx_lustre.deployment, b.fsx_lustre.deployment} == {"SCRATCH_2", "PERSISTENT_2"}
    assert b.fsx_lustre.s3 and a.allow_privileged and not b.allow_privileged
    assert {a.removal_policy, b.removal_policy} == {"retain", "destroy"}
    assert {a.nat_gateway, b.nat_gateway} == {True, False}


# --- what a platform team reads in the templates ---------------------------------------------


def _user_data_parts(d: Deployment) -> list[tuple[str, str]]:
    import email

    message = email.message_from_string(d.user_data)
    assert message.is_multipart() and message.get_content_type() == "multipart/mixed"
    return [(p.get_content_type(), p.get_payload()) for p in message.get_payload()]


def test_user_data_is_a_mime_archive_whose_shell_parts_set_the_agent_then_mount(data, lustre):
    for d in (data, lustre):
        (agent, mount) = _user_data_parts(d)
        assert agent[0] == mount[0] == "text/x-shellscript"
        assert "echo ECS_AWSVPC_BLOCK_IMDS=true >> /etc/ecs/ecs.config" in agent[1]
        assert (
            "echo ECS_DISABLE_PRIVILEGED=true >> /etc/ecs/ecs.config" in agent[1]
        ) is not d.config.allow_privileged
        (fs,) = d.of_type("AWS::FSx::FileSystem")
        names = f"<{fs.path}.DNSName>@tcp:/<{fs.path}.LustreMountName>"
        assert f"mount -t lustre -o relatime,flock {names} {FSX_NODE_PATH} " in mount[1]
    assert FSX_NODE_PATH == "/fsx"


def test_default_nodes_refuse_privileged_containers_and_mount_nothing(synth_default):
    d = Deployment(synth_default.templates(), synth_default.config)
    ((kind, script),) = _user_data_parts(d)
    assert kind == "text/x-shellscript"
    assert "echo ECS_DISABLE_PRIVILEGED=true >> /etc/ecs/ecs.config" in script
    assert "lustre" not in d.user_data
    assert d.of_type("AWS::FSx::FileSystem") == []


def test_secret_endpoints_follow_the_stores_granted(data, synth_default):
    assert {"secretsmanager", "ssm"} <= set(data.interface_endpoints)
    default = Deployment(synth_default.templates(), synth_default.config)
    assert "secretsmanager" not in default.interface_endpoints


def test_job_role_grants_read_list_and_write_where_configured(data):
    role = data.ref_target(data.config.stack_name, data.output(OutputKey.JOB_ROLE_ARN.value))
    grants = data_rules.role_grants(data, role, "s3")
    listing = {(r, c) for a, r, c in grants if a == "Allow s3:ListBucket"}
    assert listing == {
        (
            "arn:aws:s3:::example-datasets",
            '{"StringLike": {"s3:prefix": ["imagenet/", "imagenet/*"]}}',
        ),
        ("arn:aws:s3:::example-checkpoints", "null"),
        (
            "arn:aws:s3:::example-results",
            '{"StringLike": {"s3:prefix": ["runs/2026/", "runs/2026/*"]}}',
        ),
    }
    writes = {r for a, r, _ in grants if a == "Allow s3:PutObject"}
    assert writes == {
        "arn:aws:s3:::example-checkpoints/*",
        "arn:aws:s3:::example-results/runs/2026/*",
        # a call's results (tests/infra/test_function_payloads.py)
        "<EfaBatch/FunctionPayloadsECCBB886.Arn>/functions/*",
    }


# --- the rules catch what they are about -----------------------------------------------------


def _broken(d: Deployment, edit) -> Deployment:
    templates = copy.deepcopy(d.templates)
    edit(templates)
    return Deployment(templates, d.config)


def _each(templates, type_):
    for t in templates.values():
        for logical_id, res in list(t["Resources"].items()):
            if res["Type"] == type_:
                yield t, logical_id, res


def _statements(templates, role_prefix: str):
    for _, _, res in _each(templates, "AWS::IAM::Policy"):
        if res["Properties"]["Roles"][0]["Ref"].startswith(role_prefix):
            yield from res["Properties"]["PolicyDocument"]["Statement"]


def test_listing_rule_catches_the_bare_prefix_that_lists_its_siblings(data):
    """The grant 0.x made: s3:prefix ["imagenet", "imagenet/*"], which lists imagenet-private/
    (ListObjectsV2 matches plain string prefixes; see the rule's sources)."""
    rule = data_rules.bucket_listings_never_reach_a_sibling_prefix
    assert rule(data) == []

    def bare_prefix(t):
        for st in _statements(t, "JobRole"):
            for patterns in st.get("Condition", {}).get("StringLike", {}).values():
                patterns[0] = patterns[0].rstrip("/")

    problems = rule(_broken(data, bare_prefix))
    assert [p.split(": ", 1)[1] for p in problems] == [
        "s3:prefix 'imagenet' also lists 'imagenet'..., outside imagenet/",
        "s3:prefix 'runs/2026' also lists 'runs/2026'..., outside runs/2026/",
    ]


def test_bucket_rule_catches_a_wider_grant_a_lost_condition_and_a_missing_write(data):
    rule = data_rules.job_role_reaches_exactly_the_data_buckets

    def widen(t):
        for st in _statements(t, "JobRole"):
            if st["Action"] == "s3:GetObject":
                st["Resource"] = "arn:aws:s3:::example-datasets/*"

    assert rule(_broken(data, widen)) == [
        "job role: Allow s3:GetObject on arn:aws:s3:::example-datasets/* (condition null) "
        "beyond data_buckets",
        "job role: lacks Allow s3:GetObject on arn:aws:s3:::example-datasets/imagenet/* "
        "(condition null)",
    ]

    def list_everything(t):
        for st in _statements(t, "JobRole"):
            st.pop("Condition", None) if "s3:ListBucket" in str(st["Action"]) else None

    problems = rule(_broken(data, list_everything))
    assert problems and all("s3:prefix" in p or "condition null" in p for p in problems)
    assert {p.split(" on ")[1].split(" ")[0] for p in problems} == {
        "arn:aws:s3:::example-datasets",
        "arn:aws:s3:::example-results",
    }

    def no_multipart(t):
        for st in _statements(t, "JobRole"):
            if isinstance(st["Action"], list) and "s3:AbortMultipartUpload" in st["Action"]:
                st["Action"].remove("s3:AbortMultipartUpload")

    assert [p for p in rule(_broken(data, no_multipart)) if "lacks" in p] == [
        "job role: lacks Allow s3:AbortMultipartUpload on arn:aws:s3:::example-checkpoints/* "
        "(condition null)",
        "job role: lacks Allow s3:AbortMultipartUpload on "
        "arn:aws:s3:::example-results/runs/2026/* (condition null)",
    ]


def test_secret_rule_catches_every_secret_and_decrypt_without_via_service(data):
    rule = data_rules.execution_role_reads_only_the_granted_secrets

    def everything(t):
        for st in _statements(t, "ExecutionRole"):
            if st["Action"] == "secretsmanager:GetSecretValue":
                st["Resource"] = "*"
            if st["Action"] == "kms:Decrypt":
                del st["Condition"]

    problems = rule(_broken(data, everything))
    assert "execution role: * matches every secret" in problems
    assert any(p.startswith("execution role: kms grants") for p in problems)

    def job_role_reads_secrets(t):
        for st in _statements(t, "JobRole"):
            st["Action"] = "secretsmanager:GetSecretValue"
            break

    assert any("containers read secrets" in p for p in rule(_broken(data, job_role_reads_secrets)))


def test_endpoint_rule_catches_a_missing_secrets_manager_endpoint(data):
    def drop(t):
        for stack, logical_id, res in _each(t, "AWS::EC2::VPCEndpoint"):
            if "secretsmanager" in json.dumps(res["Properties"]["ServiceName"]):
                del stack["Resources"][logical_id]

    assert data_rules.nodes_reach_the_secret_stores(_broken(data, drop)) == [
        "job_secrets read from secretsmanager without its endpoint (no NAT)"
    ]


def test_flow_rule_catches_file_servers_that_cannot_call_back_or_admit_anyone(lustre):
    rule = data_rules.nodes_and_file_servers_reach_each_other_on_lustre_ports

    def no_way_back(t):
        for stack, logical_id, _ in _each(t, "AWS::EC2::SecurityGroupIngress"):
            if "NodesFromFileServers1018" in logical_id:
                del stack["Resources"][logical_id]

    assert [p.split(": no")[0] for p in rule(_broken(lustre, no_way_back))] == [
        "node to FSx for Lustre, back (tcp/1018-1023)"
    ]

    def no_egress_to_nodes(t):
        for stack, logical_id, res in _each(t, "AWS::EC2::SecurityGroupEgress"):
            if res["Properties"].get("FromPort") == 988 and "Cluster" in json.dumps(res):
                del stack["Resources"][logical_id]

    assert [p.split(": no")[0] for p in rule(_broken(lustre, no_egress_to_nodes))] == [
        "node to FSx for Lustre, back (tcp/988)"
    ]

    def open_to_the_vpc(t):
        for _, logical_id, res in _each(t, "AWS::EC2::SecurityGroup"):
            if logical_id.startswith("LustreSecurityGroup"):
                res["Properties"]["SecurityGroupIngress"] = [
                    {"IpProtocol": "tcp", "FromPort": 988, "ToPort": 988, "CidrIp": "10.0.0.0/8"}
                ]

    (problem,) = rule(_broken(lustre, open_to_the_vpc))
    assert problem.endswith("lets 10.0.0.0/8 in on tcp/988-988")


def test_lustre_rules_catch_a_default_version_another_subnet_and_a_deleted_file_system(lustre):
    def defaults(t):
        ((_, _, fs),) = _each(t, "AWS::FSx::FileSystem")
        del fs["Properties"]["FileSystemTypeVersion"]
        fs["Properties"]["SubnetIds"] = ["subnet-0123456789abcdef0"]
        fs["DeletionPolicy"] = "Delete"

    broken = _broken(lustre, defaults)
    version, subnet = data_rules.lustre_file_system_is_2_15_in_the_nodes_subnet(broken)
    assert version.endswith(": ('LUSTRE', None), not Lustre 2.15")
    assert "in subnets ['subnet-0123456789abcdef0']; the nodes are in" in subnet
    assert "['EfaBatch-Network/VpcClusterSubnet" in subnet
    assert [
        p.split(": ", 1)[1]
        for p in data_rules.lustre_file_system_is_kept_unless_the_stack_is_disposable(broken)
    ] == ["DeletionPolicy Delete; retain wants Retain"]

    def import_only(t):
        ((_, _, link),) = _each(t, "AWS::FSx::DataRepositoryAssociation")
        link["Properties"]["S3"]["AutoImportPolicy"]["Events"] = ["NEW", "CHANGED"]
        del link["Properties"]["S3"]["AutoExportPolicy"]

    assert [
        p.split(": ", 1)[1]
        for p in data_rules.file_system_imports_and_exports_the_linked_location(
            _broken(lustre, import_only)
        )
    ] == [
        "AutoImportPolicy events ['CHANGED', 'NEW']; wanted ['CHANGED', 'DELETED', 'NEW']",
        "AutoExportPolicy events []; wanted ['CHANGED', 'DELETED', 'NEW']",
    ]


def test_user_data_rule_catches_privileged_nodes_an_old_mount_and_a_boot_that_goes_on(lustre):
    rule = data_rules.nodes_mount_lustre_and_refuse_privileged_before_the_agent_starts
    edit_text = _edit_user_data

    privileged = edit_text("echo ECS_DISABLE_PRIVILEGED=true >> /etc/ecs/ecs.config\n", "")
    assert rule(_broken(lustre, privileged)) == [
        "privileged containers run: ECS_DISABLE_PRIVILEGED is not true"
    ]
    old_options = edit_text("relatime,flock", "noatime,flock")
    assert "the mount is not" in rule(_broken(lustre, old_options))[0]
    goes_on = edit_text("poweroff", "true")
    assert rule(_broken(lustre, goes_on)) == [
        "a node that failed to mount goes on to run jobs on an empty /fsx"
    ]
    starts_agent = edit_text("chmod 1777", "systemctl start ecs\nchmod 1777")
    assert rule(_broken(lustre, starts_agent)) == [
        "a user data part starts the ECS agent before cloud-final ends"
    ]
    boothook = edit_text("text/x-shellscript", "text/cloud-boothook")
    assert rule(_broken(lustre, boothook))[0].startswith(
        "a user data part of type text/cloud-boothook"
    )


def _edit_user_data(old: str, new: str):
    def edit(t):
        ((_, _, lt),) = _each(t, "AWS::EC2::LaunchTemplate")
        parts = lt["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"]["Fn::Join"][1]
        for i, part in enumerate(parts):
            if isinstance(part, str):
                parts[i] = part.replace(old, new)

    return edit


def test_boot_rule_catches_a_mount_that_a_reboot_loses_and_a_node_left_stopped(lustre):
    """What 0.x did: the mount in user data alone (gone after a reboot, while the agent comes
    back) and EC2's default shutdown behaviour, stop (the rule's sources)."""
    rule = data_rules.lustre_comes_back_after_a_reboot_before_the_agent
    assert rule(lustre) == []

    def stops(t):
        ((_, _, lt),) = _each(t, "AWS::EC2::LaunchTemplate")
        del lt["Properties"]["LaunchTemplateData"]["InstanceInitiatedShutdownBehavior"]

    assert rule(_broken(lustre, stops)) == ["a node that powers off is stopped, not terminated"]
    unit = "efa-batch-fsx.service"
    cases = {
        f"systemctl enable --now {unit}\n": f"{unit} is not enabled (and started) by the user data",
        "WantedBy=multi-user.target\n": f"{unit} is not wanted by multi-user.target: no mount "
        "after a reboot",
        "RequiresMountsFor=/fsx\n": "the ECS agent's unit lacks RequiresMountsFor=/fsx",
        "ExecStartPre=/usr/bin/mountpoint -q /fsx\n": "the ECS agent starts without checking "
        "that /fsx is mounted",
    }
    for line, problem in cases.items():
        assert rule(_broken(lustre, _edit_user_data(line, ""))) == [problem], line
    waits = _edit_user_data("Before=ecs.service\n", "After=cloud-final.service\n")
    assert rule(_broken(lustre, waits)) == [
        f"{unit} is not ordered before the ECS agent",
        f"{unit} waits for cloud-final, which starts it: a deadlock",
    ]
    agent_alone = _edit_user_data(f"Requires={unit}\nAfter={unit}\n", "")
    assert rule(_broken(lustre, agent_alone)) == [
        f"the ECS agent's unit lacks Requires={unit}",
        f"the ECS agent's unit lacks After={unit}",
    ]


def test_link_rule_catches_the_root_link_that_a_new_location_cannot_replace(lustre):
    """0.x linked at "/": FSx allows "/" only for the first association and refuses overlapping
    paths, so the association that a new s3 creates before the old one goes fails."""

    def at_root(t):
        ((_, _, link),) = _each(t, "AWS::FSx::DataRepositoryAssociation")
        link["Properties"]["FileSystemPath"] = "/"

    assert [
        p.split(": ", 1)[1]
        for p in data_rules.file_system_imports_and_exports_the_linked_location(
            _broken(lustre, at_root)
        )
    ] == ["at /, not /example-datasets/lustre"]


def test_output_rule_catches_an_output_that_says_less_than_the_stack_grants(data):
    def forget(t):
        t[data.config.stack_name]["Outputs"]["AllowPrivileged"]["Value"] = "false"
        t[data.config.stack_name]["Outputs"]["FsxFileSystemId"]["Value"] = NONE

    assert data_rules.outputs_carry_the_data_settings(_broken(data, forget)) == [
        "AllowPrivileged is 'false'; the stack grants 'true'",
        "FsxFileSystemId is 'none', not the file system's id",
    ]


# --- the launcher reads the settings back -----------------------------------------------------


def _described(template: dict, stack_name: str) -> dict:
    """A describe_stacks entry from the template's outputs: literal values as they are, values
    CloudFormation resolves (ids, ARNs) as each output's example."""
    outputs = [
        {
            "OutputKey": key,
            "OutputValue": out["Value"]
            if isinstance(out["Value"], str)
            else OutputKey(key).example,
        }
        for key, out in template["Outputs"].items()
    ]
    return {"StackName": stack_name, "StackStatus": "CREATE_COMPLETE", "Outputs": outputs}


def test_launcher_reads_the_data_settings_from_the_synthesized_outputs(variant):
    config = variant.config
    info = from_stack(_described(variant.template(), config.stack_name))
    assert info.data_buckets == config.data_locations
    assert info.job_secrets == config.secret_grants
    assert info.allow_privileged is config.allow_privileged


# --- deployed into moto -------------------------------------------------------------------------


def _physical_id(cf, stack: str, prefix: str, type_: str) -> str:
    (found,) = [
        r["PhysicalResourceId"]
        for r in cf.describe_stack_resources(StackName=stack)["StackResources"]
        if r.get("LogicalResourceId", "").startswith(prefix) and r["ResourceType"] == type_
    ]
    return found


_TEAM_POLICY = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*"}],
    }
)


def test_variant_deploys_into_moto_and_the_launcher_reads_what_it_grants(variant, moto_server):
    """moto's gaps for FSx (no CloudFormation file system, no data repository associations at
    all) are handled in devenv/moto_gaps.py; the rules above speak for the rest."""
    config = variant.config
    moto_server.reset()
    iam = moto_server.client("iam")
    for arn in config.job_role_policies:
        if ":iam::aws:policy/" not in arn:  # the team's own policy exists before the deploy
            iam.create_policy(PolicyName=arn.rsplit("/", 1)[1], PolicyDocument=_TEAM_POLICY)
    outputs = moto_server.deploy(variant.outdir, variant.stack_names)[config.stack_name]
    assert set(outputs) == {k.value for k in OutputKey}
    cf = moto_server.client("cloudformation")
    (stack,) = cf.describe_stacks(StackName=config.stack_name)["Stacks"]
    info = from_stack(stack)
    assert info.data_buckets == config.data_locations
    assert info.job_secrets == config.secret_grants
    assert info.allow_privileged is config.allow_privileged

    (fs,) = moto_server.client("fsx").describe_file_systems()["FileSystems"]
    assert info.fsx_file_system_id == fs["FileSystemId"]
    subnet = _physical_id(
        cf, f"{config.stack_name}-Network", "VpcClusterSubnet", "AWS::EC2::Subnet"
    )
    assert fs["SubnetIds"] == [subnet]
    assert fs["LustreConfiguration"]["DeploymentType"] == config.fsx_lustre.deployment

    # The nodes' user data names the deployed file system (imports resolved), not a literal.
    ec2 = moto_server.client("ec2")
    template_id = _physical_id(cf, config.stack_name, "LaunchTemplate", "AWS::EC2::LaunchTemplate")
    (version,) = ec2.describe_launch_template_versions(LaunchTemplateId=template_id)[
        "LaunchTemplateVersions"
    ]
    user_data = base64.b64decode(version["LaunchTemplateData"]["UserData"]).decode()
    assert f"mount -t lustre -o relatime,flock {fs['DNSName']}@tcp:/" in user_data
    assert ("ECS_DISABLE_PRIVILEGED=true" in user_data) is not config.allow_privileged

    job_role = info.job_role_arn.rsplit("/", 1)[1]
    attached = iam.list_attached_role_policies(RoleName=job_role)["AttachedPolicies"]
    assert sorted(p["PolicyArn"] for p in attached) == sorted(config.job_role_policies)
    (policy,) = iam.list_role_policies(RoleName=job_role)["PolicyNames"]
    document = json.dumps(iam.get_role_policy(RoleName=job_role, PolicyName=policy))
    assert all(f"arn:aws:s3:::{b.objects}" in document for b in config.data_locations)

    services = {
        e["ServiceName"].rsplit(".", 1)[1] for e in ec2.describe_vpc_endpoints()["VpcEndpoints"]
    }
    if not config.nat_gateway:
        assert {g.store.value for g in config.secret_grants} <= services


# --- day 2 ----------------------------------------------------------------------------------


def _synth(tmp_path_factory, **overrides) -> dict[str, dict]:
    return synth_templates(tmp_path_factory, **overrides)


def test_fsx_grows_in_place_and_another_deployment_or_off_is_refused(
    tmp_path_factory, synth_default, synth_data
):
    """What infra/updates.py says of fsx_lustre: the cluster stack imports the file system's
    DNS name and mount name, so a change that replaces or removes it is refused ("After another
    stack imports an output value, you can't delete the stack that is exporting the output
    value or modify the exported output value", CloudFormation user guide,
    walkthrough-crossstackref.html)."""
    persistent = _synth(tmp_path_factory, fsx_lustre={"storage_gib": 1200})
    grown = _synth(tmp_path_factory, fsx_lustre={"storage_gib": 2400})

    changes = plan(persistent, grown)
    assert of(changes, "replace", "refuse") == []
    (fs,) = [c for c in changes if c.type == "AWS::FSx::FileSystem"]
    assert (fs.action, fs.reasons) == ("update", ("StorageCapacity",))

    scratch = plan(persistent, synth_data.templates())  # SCRATCH_2, same size
    (fs,) = [c for c in of(scratch, "replace") if c.type == "AWS::FSx::FileSystem"]
    assert fs.reasons == ("LustreConfiguration.DeploymentType is create-only",)
    assert {c.type for c in of(scratch, "refuse")} == {"Export"}
    assert len(of(scratch, "refuse")) == 3  # DNS name, mount name, id

    without = synth_default.templates()
    off = plan(persistent, without)
    assert [c.type for c in of(off, "refuse")] == ["Export"] * 3
    assert [c for c in of(off, "remove") if c.type == "AWS::FSx::FileSystem"]

    # The way the note gives: the cluster stack alone first (it stops importing), then all.
    cluster = synth_default.config.stack_name
    first = {**persistent, cluster: without[cluster]}
    assert of(plan(persistent, first), "replace", "refuse") == []
    assert of(plan(first, without), "replace", "refuse") == []


def _link(tmp_path_factory, s3: str | None, **more) -> dict[str, dict]:
    settings = {"storage_gib": 1200, **({"s3": s3} if s3 else {}), **more}
    return _synth(tmp_path_factory, fsx_lustre=settings)


def _association(changes) -> list[tuple[str, str]]:
    return [
        (c.action, c.reasons[-1])
        for c in changes
        if c.type == "AWS::FSx::DataRepositoryAssociation"
    ]


def test_a_new_s3_location_links_beside_the_old_one_and_a_nested_one_takes_two_deploys(
    tmp_path_factory,
):
    """CloudFormation replaces an association whose paths change by creating the new one first;
    FSx refuses it while "Two data repository associations cannot have overlapping file system
    paths" and each needs "a unique ... S3 bucket or prefix" (FSx API,
    CreateDataRepositoryAssociation). Named for its location, a new link lands beside the old
    one; one inside the other is refused, and the two deploys the refusal names work."""
    old = _link(tmp_path_factory, "example-datasets/lustre")
    beside = plan(old, _link(tmp_path_factory, "example-datasets/lustre-2026"))
    assert of(beside, "refuse") == []
    assert [c.type for c in of(beside, "replace")] == ["AWS::FSx::DataRepositoryAssociation"]

    inside = _link(tmp_path_factory, "example-datasets/lustre/v2")
    ((action, why),) = _association(plan(old, inside))
    assert action == "refuse"
    assert why.startswith(
        "FSx refuses an S3 link at /example-datasets/lustre/v2 while the one at "
        "/example-datasets/lustre exists (their file system paths overlap)"
    )
    without = _link(tmp_path_factory, None)
    removed = plan(old, without)
    assert [c.action for c in removed if c.type == "AWS::FSx::DataRepositoryAssociation"] == [
        "remove"
    ]
    assert of(removed, "refuse", "replace") == []
    assert of(plan(without, inside), "refuse", "replace") == []


def test_a_link_made_at_the_root_stays_there_or_moves_in_two_deploys(tmp_path_factory):
    """0.x linked at "/", which overlaps every path and is allowed only "for the first data
    repository associated with a file system" (FSx API, CreateDataRepositoryAssociation):
    link_path "/" keeps it unchanged; the new default is refused, with the way that works."""
    root = _link(tmp_path_factory, "example-datasets/lustre", link_path="/")
    kept = plan(root, _link(tmp_path_factory, "example-datasets/lustre", link_path="/"))
    assert _association(kept) == []
    ((action, why),) = _association(plan(root, _link(tmp_path_factory, "example-datasets/lustre")))
    assert action == "refuse"
    assert why.endswith(
        "deploy once without fsx_lustre.s3, then with the new link at a link_path other than /"
    )
