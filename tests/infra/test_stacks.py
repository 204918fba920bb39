"""What the stacks provision, asserted on the synthesized templates (default, p5 and others)."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match, Template

from infra.cluster import SESSION_MANAGER
from infra.node_replacer import DESCRIBE_ANY
from launcher.stack.outputs import NONE, SCHEMA_VERSION, OutputKey

# Every test here reads a synthesized template.
pytestmark = pytest.mark.cdk


def _resources(template: dict, type_: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def _only(template: dict, type_: str) -> dict:
    (res,) = _resources(template, type_).values()
    return res["Properties"]


def _compute_environment(template: dict) -> dict:
    """The multi-node cluster's EC2 compute environment (the copy jobs' is Fargate)."""
    (props,) = [
        r["Properties"]
        for r in _resources(template, "AWS::Batch::ComputeEnvironment").values()
        if r["Properties"]["ComputeResources"]["Type"] == "EC2"
    ]
    return props


def _job_queue(template: dict) -> dict:
    """The training jobs' queue (the copy jobs' is {stack}-copy)."""
    (props,) = [
        r["Properties"]
        for r in _resources(template, "AWS::Batch::JobQueue").values()
        if not r["Properties"]["JobQueueName"].endswith("-copy")
    ]
    return props


@pytest.fixture(scope="module")
def cluster(synth_default):
    return synth_default.template()


@pytest.fixture(scope="module")
def network(synth_default):
    return synth_default.template("-Network")


@pytest.fixture(scope="module")
def storage(synth_default):
    return synth_default.template("-Storage")


# --- EFA compute -----------------------------------------------------------------------------


@pytest.mark.parametrize(("fixture", "count"), [("synth_default", 4), ("synth_p5", 32)])
def test_launch_template_has_one_efa_interface_per_network_card(request, fixture, count):
    template = request.getfixturevalue(fixture).template()
    interfaces = _only(template, "AWS::EC2::LaunchTemplate")["LaunchTemplateData"][
        "NetworkInterfaces"
    ]
    assert [i["NetworkCardIndex"] for i in interfaces] == list(range(count))
    assert [i["DeviceIndex"] for i in interfaces] == [0] * count
    assert [i["InterfaceType"] for i in interfaces] == ["efa"] + ["efa-only"] * (count - 1)
    # Every interface carries the cluster security group.
    groups = {json.dumps(i["Groups"]) for i in interfaces}
    assert len(groups) == 1 and "ClusterSecurityGroup" in groups.pop()


def test_security_groups_are_on_the_interfaces_not_the_compute_environment(cluster):
    resources = _compute_environment(cluster)["ComputeResources"]
    assert "SecurityGroupIds" not in resources
    data = _only(cluster, "AWS::EC2::LaunchTemplate")["LaunchTemplateData"]
    assert "SecurityGroupIds" not in data


def test_launch_template_requires_imdsv2_and_encrypts_the_root_volume(synth_default):
    # cdk-nag has no rule for either: asserted here.
    Template.from_json(synth_default.template()).has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateData": Match.object_like(
                {
                    "MetadataOptions": {
                        "HttpTokens": "required",
                        "HttpEndpoint": "enabled",
                        "HttpPutResponseHopLimit": 1,
                    },
                    "BlockDeviceMappings": [
                        {
                            "DeviceName": "/dev/xvda",
                            "Ebs": {
                                "Encrypted": True,
                                "VolumeType": "gp3",
                                "VolumeSize": synth_default.config.root_volume_gib,
                                "DeleteOnTermination": True,
                            },
                        }
                    ],
                }
            )
        },
    )


def test_cluster_placement_group(cluster):
    assert _only(cluster, "AWS::EC2::PlacementGroup")["Strategy"] == "cluster"


def test_cluster_group_admits_all_traffic_from_itself_and_sends_all_to_itself(network):
    """The EFA rule pair (both directions to the group itself) is declared, not implied."""
    (ingress,) = [
        r["Properties"]
        for r in _resources(network, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["IpProtocol"] == "-1"
    ]
    assert ingress["GroupId"] == ingress["SourceSecurityGroupId"]  # self-referencing
    (egress,) = [
        r["Properties"] for r in _resources(network, "AWS::EC2::SecurityGroupEgress").values()
    ]
    assert egress["IpProtocol"] == "-1"
    assert egress["GroupId"] == egress["DestinationSecurityGroupId"] == ingress["GroupId"]


def test_new_vpc_keeps_its_default_group_rules(network):
    """Task interfaces live in the default group: CDK's rule-removing custom resource is off."""
    assert not _resources(network, "Custom::VpcRestrictDefaultSG")


# --- AWS Batch -------------------------------------------------------------------------------


def test_managed_ec2_compute_environment(synth_default, cluster):
    config = synth_default.config
    props = _compute_environment(cluster)
    assert props["Type"] == "MANAGED"
    assert "ServiceRole" not in props  # the service-linked role
    resources = props["ComputeResources"]
    assert resources["Type"] == "EC2"  # MNP jobs: no Spot, no Fargate
    assert resources["MinvCpus"] == 0
    assert resources["MaxvCpus"] == config.max_nodes * config.instance.vcpus
    assert resources["InstanceTypes"] == [config.instance_type]
    assert resources["Ec2Configuration"] == [{"ImageType": "ECS_AL2023_NVIDIA"}]
    assert resources["PlacementGroup"] == {"Ref": "PlacementGroup"}
    assert resources["LaunchTemplate"] == {
        "LaunchTemplateId": {"Ref": "LaunchTemplate"},
        "Version": {"Fn::GetAtt": ["LaunchTemplate", "LatestVersionNumber"]},
    }
    assert len(resources["Subnets"]) == 1


def test_job_queue_and_optional_fair_share(cluster, synth_p5):
    queue = _job_queue(cluster)
    assert queue["ComputeEnvironmentOrder"][0]["ComputeEnvironment"] == {
        "Ref": "ComputeEnvironment"
    }
    assert "SchedulingPolicyArn" not in queue
    assert not _resources(cluster, "AWS::Batch::SchedulingPolicy")
    prod = synth_p5.template()
    assert _job_queue(prod)["SchedulingPolicyArn"] == {"Ref": "FairSharePolicy"}
    assert "FairsharePolicy" in _only(prod, "AWS::Batch::SchedulingPolicy")


# --- Capacity: reservations, Capacity Blocks, reservation groups, warm nodes -----------------

RESERVATION = "cr-0123456789abcdef0"
GROUP = "arn:aws:resource-groups:us-east-1:123456789012:group/ml-reservations"


@pytest.fixture(scope="module")
def synth_variant(tmp_path_factory):
    """Synthesize a configuration once per module: overrides -> Synthesized."""
    from devenv.synth import synthesize
    from tests.conftest import cdk_context

    cache = {}

    def synth(**overrides):
        key = tuple(sorted(overrides.items()))
        if key not in cache:
            cache[key] = synthesize(cdk_context(**overrides), tmp_path_factory.mktemp("cdk"))
        return cache[key]

    return synth


def _launch_data(template: dict) -> dict:
    return _only(template, "AWS::EC2::LaunchTemplate")["LaunchTemplateData"]


@pytest.mark.parametrize(
    ("overrides", "target"),
    [
        (
            {"capacity_reservation_id": RESERVATION},
            {"CapacityReservationTarget": {"CapacityReservationId": RESERVATION}},
        ),
        (
            {"capacity_reservation_group_arn": GROUP},
            {
                "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": GROUP},
                "CapacityReservationPreference": "capacity-reservations-only",
            },
        ),
    ],
    ids=["odcr", "reservation-group"],
)
def test_reservation_or_group_is_targeted_on_demand_in_the_placement_group(
    synth_variant, overrides, target
):
    template = synth_variant(**overrides).template()
    data = _launch_data(template)
    assert data["CapacityReservationSpecification"] == target
    assert "InstanceMarketOptions" not in data  # On-Demand in the reservation
    resources = _compute_environment(template)["ComputeResources"]
    assert resources["PlacementGroup"] == {"Ref": "PlacementGroup"}


def test_capacity_block_launches_on_its_market_without_a_placement_group(synth_capacity_block):
    template = synth_capacity_block.template()
    data = _launch_data(template)
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": RESERVATION}
    }
    # The block places its instances itself; EC2 needs no cluster placement group for it.
    assert not _resources(template, "AWS::EC2::PlacementGroup")
    resources = _compute_environment(template)["ComputeResources"]
    assert "PlacementGroup" not in resources
    # EFA and everything else stay as without a block.
    assert len(data["NetworkInterfaces"]) == 32


def test_without_a_reservation_nodes_launch_on_demand(cluster):
    data = _launch_data(cluster)
    assert "CapacityReservationSpecification" not in data
    assert "InstanceMarketOptions" not in data


def test_min_nodes_keep_whole_nodes_warm(synth_capacity_block, synth_variant):
    resources = _compute_environment(synth_capacity_block.template())["ComputeResources"]
    assert (resources["MinvCpus"], resources["MaxvCpus"]) == (2 * 192, 16 * 192)
    all_warm = synth_variant(min_nodes="2").template()
    resources = _compute_environment(all_warm)["ComputeResources"]
    assert resources["MinvCpus"] == resources["MaxvCpus"] == 2 * 96


CAPACITY = "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"
MISCONFIGURED = (
    "MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE",
    "MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT",
)


def _time_limits(template: dict) -> dict[str, int] | None:
    queue = _job_queue(template)
    if "JobStateTimeLimitActions" not in queue:
        return None
    actions = queue["JobStateTimeLimitActions"]
    assert {(a["State"], a["Action"]) for a in actions} == {("RUNNABLE", "CANCEL")}
    return {a["Reason"]: a["MaxTimeSeconds"] for a in actions}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, {CAPACITY: 240 * 60, **dict.fromkeys(MISCONFIGURED, 10 * 60)}),
        ({"capacity_wait_minutes": "0"}, dict.fromkeys(MISCONFIGURED, 600)),
        ({"misconfigured_wait_minutes": "0", "capacity_wait_minutes": "1440"}, {CAPACITY: 86400}),
        ({"capacity_wait_minutes": "0", "misconfigured_wait_minutes": "0"}, None),
    ],
    ids=["defaults", "capacity-off", "misconfigured-off", "both-off"],
)
def test_queue_cancels_jobs_stuck_at_its_head(synth_variant, overrides, expected):
    assert _time_limits(synth_variant(**overrides).template()) == expected


# --- Network ---------------------------------------------------------------------------------


def test_new_vpc_has_one_zone_no_nat_flow_logs_and_endpoints(network, synth_default):
    subnets = _resources(network, "AWS::EC2::Subnet").values()
    assert {s["Properties"]["AvailabilityZone"] for s in subnets} == {
        synth_default.config.availability_zone
    }
    assert not _resources(network, "AWS::EC2::NatGateway")
    assert _only(network, "AWS::EC2::FlowLog")["TrafficType"] == "ALL"
    endpoints = [r["Properties"] for r in _resources(network, "AWS::EC2::VPCEndpoint").values()]
    services = sorted(json.dumps(e["ServiceName"]) for e in endpoints)
    for name in ("ecr.api", "ecr.dkr", "ecs", "ecs-agent", "ecs-telemetry", "logs", "s3"):
        assert any(f".{name}" in s for s in services), name
    gateway = [e for e in endpoints if e.get("VpcEndpointType") == "Gateway"]
    assert len(gateway) == 1


def test_endpoints_admit_https_from_cluster_nodes_task_interfaces_and_copy_jobs_only(network):
    ingress = [
        r["Properties"]
        for r in _resources(network, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["IpProtocol"] == "tcp"
    ]
    assert [(i["FromPort"], i["ToPort"]) for i in ingress] == [(443, 443)] * 3
    sources = sorted(json.dumps(i["SourceSecurityGroupId"]) for i in ingress)
    assert "ClusterSecurityGroup" in sources[0] and "CopySecurityGroup" in sources[1]
    assert "DefaultSecurityGroup" in sources[2]
    assert not any("CidrIp" in i for i in ingress)


def test_session_manager_endpoints_exist_only_without_nat(network, synth_p5):
    def services(template):
        return {
            json.dumps(r["Properties"]["ServiceName"]).split(".")[-1].strip('"')
            for r in _resources(template, "AWS::EC2::VPCEndpoint").values()
        }

    assert {"ssm", "ssmmessages", "ec2messages"} <= services(network)
    assert not {"ssm", "ssmmessages", "ec2messages"} & services(synth_p5.template("-Network"))


def test_nat_gateway_is_optional(synth_p5):
    assert len(_resources(synth_p5.template("-Network"), "AWS::EC2::NatGateway")) == 1


def test_imported_vpc_creates_no_vpc(synth_imported):
    synth = synth_imported
    network = synth.template("-Network")
    assert not _resources(network, "AWS::EC2::VPC")
    assert _only(network, "AWS::EC2::FlowLog")["ResourceId"] == "vpc-0123456789abcdef0"
    subnets = _compute_environment(synth.template())["ComputeResources"]["Subnets"]
    assert subnets == ["subnet-0123456789abcdef0"]


# --- Stateful resources ----------------------------------------------------------------------


def test_repository_scans_encrypts_keeps_newest_and_is_immutable(storage, synth_default):
    props = _only(storage, "AWS::ECR::Repository")
    assert props["ImageScanningConfiguration"] == {"ScanOnPush": True}
    # ECR's default, AES256 (CDK omits the property): ordinary repositories' bases mount.
    assert props.get("EncryptionConfiguration", {"EncryptionType": "AES256"}) == {
        "EncryptionType": "AES256"
    }
    assert props["ImageTagMutability"] == "IMMUTABLE"
    rules = json.loads(props["LifecyclePolicy"]["LifecyclePolicyText"])["rules"]
    selections = [(r["rulePriority"], r["selection"]) for r in rules]
    config = synth_default.config
    assert selections == [
        (
            1,
            {
                "tagStatus": "tagged",
                "tagPrefixList": ["ws-"],
                "countType": "sinceImagePushed",
                "countNumber": config.workspace_image_days,
                "countUnit": "days",
            },
        ),
        (
            2,
            {
                "tagStatus": "tagged",
                "tagPrefixList": ["base-"],
                "countType": "sinceImagePushed",
                "countNumber": config.base_image_days,
                "countUnit": "days",
            },
        ),
        (
            3,
            {
                "tagStatus": "untagged",
                "countType": "sinceImagePushed",
                "countNumber": 1,
                "countUnit": "days",
            },
        ),
        (
            4,
            {
                "tagStatus": "any",
                "countType": "imageCountMoreThan",
                "countNumber": config.keep_images,
            },
        ),
    ]


def test_file_system_is_encrypted_backed_up_and_reachable_from_the_subnet(storage):
    props = _only(storage, "AWS::EFS::FileSystem")
    assert props["Encrypted"] is True
    assert props["BackupPolicy"] == {"Status": "ENABLED"}
    assert len(_resources(storage, "AWS::EFS::MountTarget")) == 1
    ap = _only(storage, "AWS::EFS::AccessPoint")
    assert ap["RootDirectory"]["Path"] == "/shared"
    ingress = [
        r["Properties"] for r in _resources(storage, "AWS::EC2::SecurityGroupIngress").values()
    ]
    assert {(i["IpProtocol"], i["FromPort"], i["ToPort"]) for i in ingress} == {("tcp", 2049, 2049)}
    sources = sorted(json.dumps(i["SourceSecurityGroupId"]) for i in ingress)
    assert "ClusterSecurityGroup" in sources[0] and "DefaultSecurityGroup" in sources[1]


@pytest.mark.parametrize(
    ("fixture", "policy"), [("synth_default", "Delete"), ("synth_p5", "Retain")]
)
def test_stateful_resources_follow_the_removal_policy(request, fixture, policy):
    storage = request.getfixturevalue(fixture).template("-Storage")
    for type_ in ("AWS::ECR::Repository", "AWS::EFS::FileSystem"):
        (res,) = _resources(storage, type_).values()
        assert res["DeletionPolicy"] == policy


@pytest.mark.parametrize(("fixture", "kept"), [("synth_p5", True), ("synth_default", False)])
def test_stateful_stack_is_protected_unless_the_environment_is_disposable(request, fixture, kept):
    """removal_policy=retain (prod): termination protection and retained data. destroy (demo):
    `cdk destroy` must succeed, so no protection and a repository that empties itself (ECR
    refuses to delete a repository that holds images unless forced)."""
    synth = request.getfixturevalue(fixture)
    manifest = json.loads((synth.outdir / "manifest.json").read_text())
    props = manifest["artifacts"]["EfaBatch-Storage"]["properties"]
    assert props.get("terminationProtection", False) is kept
    (repository,) = _resources(synth.template("-Storage"), "AWS::ECR::Repository").values()
    assert repository["Properties"].get("EmptyOnDelete", False) is (not kept)
    assert repository["DeletionPolicy"] == ("Retain" if kept else "Delete")


def test_logical_ids_of_stateful_resources_never_change(storage):
    # A changed logical id makes CloudFormation replace the resource: data would be lost.
    assert set(_resources(storage, "AWS::ECR::Repository")) == {"WorkspaceRepository6E6EA33E"}
    assert set(_resources(storage, "AWS::EFS::FileSystem")) == {"SharedFileSystemAD4B2CC6"}
    assert set(_resources(storage, "AWS::EFS::AccessPoint")) == {
        "SharedFileSystemJobsAccessPoint401E6C7E"
    }


# --- IAM and logs ----------------------------------------------------------------------------


def _statements(*templates: dict):
    for template in templates:
        for res in template["Resources"].values():
            if res["Type"] == "AWS::IAM::Policy":
                yield from res["Properties"]["PolicyDocument"]["Statement"]


def test_no_wildcard_action_and_resource_star_only_where_iam_knows_no_resource(
    cluster, network, storage
):
    """Resource * only for actions without resource-level permissions: ecr:GetAuthorizationToken,
    Session Manager's channels, whose statement is AWS's own (AWSCloud9SSMInstanceProfile), and
    the node replacer's reads (infra/node_replacer.py)."""
    statements = list(_statements(cluster, network, storage))
    assert statements
    for st in statements:
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        assert not any("*" in a for a in actions), st
        if st["Resource"] == "*":
            allowed = (["ecr:GetAuthorizationToken"], list(SESSION_MANAGER), list(DESCRIBE_ANY))
            assert actions in allowed, st


def test_job_role_may_only_mount_and_write_the_file_system_via_its_access_point(cluster):
    (policy,) = [
        r for k, r in _resources(cluster, "AWS::IAM::Policy").items() if k.startswith("JobRole")
    ]
    # the file system, and the function bucket's functions/ (tests/infra/test_function_payloads.py)
    (st, payloads) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert st["Action"] == ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"]
    assert "elasticfilesystem:AccessPointArn" in st["Condition"]["StringEquals"]
    assert payloads["Action"] == ["s3:GetObject", "s3:PutObject"]
    assert "/functions/*" in json.dumps(payloads["Resource"])


def test_instance_role_has_the_ecs_agent_and_session_manager_only(cluster):
    """Session Manager's own statement instead of AmazonSSMManagedInstanceCore, which reads
    every SSM parameter (tests/rules/data_rules.py, instance_role_reads_no_data_or_secrets)."""
    roles = _resources(cluster, "AWS::IAM::Role")
    (key,) = [k for k in roles if k.startswith("InstanceRole")]
    arns = json.dumps(roles[key]["Properties"]["ManagedPolicyArns"])
    assert "AmazonEC2ContainerServiceforEC2Role" in arns
    assert "AmazonSSMManagedInstanceCore" not in arns
    (policy,) = [
        r
        for r in _resources(cluster, "AWS::IAM::Policy").values()
        if r["Properties"]["Roles"] == [{"Ref": key}]
    ]
    (st,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert sorted(st["Action"]) == [
        "ssm:UpdateInstanceInformation",
        "ssmmessages:CreateControlChannel",
        "ssmmessages:CreateDataChannel",
        "ssmmessages:OpenControlChannel",
        "ssmmessages:OpenDataChannel",
    ]


def test_job_log_group_has_retention(cluster, synth_default):
    (props,) = [
        r["Properties"]
        for k, r in _resources(cluster, "AWS::Logs::LogGroup").items()
        if k.startswith("JobLogGroup")  # the node replacer has its own (test_node_replacer.py)
    ]
    assert props["RetentionInDays"] == synth_default.config.log_retention_days
    assert props["LogGroupName"] == "/aws/batch/EfaBatch/jobs"


# --- Outputs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["synth_default", "synth_p5"])
def test_cluster_stack_outputs_every_contract_key(request, fixture):
    synth = request.getfixturevalue(fixture)
    outputs = synth.template()["Outputs"]
    assert set(outputs) == {k.value for k in OutputKey}
    config = synth.config
    assert outputs[OutputKey.SCHEMA_VERSION]["Value"] == SCHEMA_VERSION
    assert outputs[OutputKey.EFA_INTERFACES]["Value"] == str(config.instance.efa_interfaces)
    assert outputs[OutputKey.INSTANCE_TYPE]["Value"] == config.instance_type
    assert outputs[OutputKey.GPUS_PER_NODE]["Value"] == "8"


def test_scheduling_policy_output_says_none_without_fair_share(cluster):
    assert cluster["Outputs"][OutputKey.SCHEDULING_POLICY_ARN]["Value"] == NONE
