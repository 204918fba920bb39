"""Bad configuration fails before any construct exists, with one line naming the key."""

from __future__ import annotations

import json

import pytest

from infra.config import ConfigError, load, refuse_unknown_settings
from infra.lustre import FsxLustre, LustreError
from tests.conftest import IMPORTED_VPC, cdk_context, secret_arn

BLOCK = "cr-0123456789abcdef0"
GROUP = "arn:aws:resource-groups:us-east-1:123456789012:group/ml-reservations"


def test_default_environment_loads():
    config = load(cdk_context())
    assert config.env_name == "demo"
    assert config.instance_type == "p4d.24xlarge"
    assert config.efa_interfaces == 4


def test_command_line_overrides_win_over_the_environment():
    config = load(cdk_context(env="prod", max_nodes="3", fair_share="false"))
    assert (config.instance_type, config.max_nodes, config.fair_share) == ("p5.48xlarge", 3, False)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"instance_type": "m9.huge"}, "instance_type: unknown type 'm9.huge'; allowed: "),
        ({"instance_type": "g5.xlarge"}, "instance_type: g5.xlarge has no EFA; set efa=false"),
        ({"instance_type": "p3dn.24xlarge"}, "p3dn.24xlarge is not supported: Batch's ECS_AL"),
        ({"instance_type": "trn1.32xlarge"}, "trn1.32xlarge is not supported: Trainium and"),
        ({"update_timeout_minutes": "0"}, "update_timeout_minutes: 0; allowed: 1-7200"),
        ({"max_nodes": "0"}, "max_nodes: 0 is below one instance; allowed: >= 1"),
        ({"max_nodes": "many"}, "max_nodes: 'many' is not an integer"),
        ({"availability_zones": ["us-east-1a", "us-east-1b"]}, "an EFA cluster lives in exactly"),
        ({**IMPORTED_VPC, "vpc_id": "vpc-12"}, "vpc_id: 'vpc-12' is"),
        # CDK would stop with its own message ("1 of /24 exceeds remaining space") or a
        # traceback; VPC user guide, vpc-cidr-blocks.html: /16 is the largest block.
        ({"vpc_cidr": "10.42.0.0/18"}, "vpc_cidr: '10.42.0.0/18'; allowed: an IPv4 block of /16"),
        ({"vpc_cidr": "10.0.0.0/8"}, "vpc_cidr: '10.0.0.0/8'; allowed: an IPv4 block of /16 or"),
        ({"vpc_cidr": "10.42.0.1/16"}, "vpc_cidr: '10.42.0.1/16'; allowed: "),
        ({"vpc_cidr": "banana"}, "vpc_cidr: 'banana'; allowed: "),
        ({**IMPORTED_VPC, "default_security_group_id": "sg-x"}, "default_security_group_id: "),
        (
            {"vpc_id": "vpc-0123456789abcdef0"},
            "vpc_id/subnet_id/default_security_group_id: give all",
        ),
        (
            {k: v for k, v in IMPORTED_VPC.items() if k != "default_security_group_id"},
            "give all three to import a VPC (jobs' task interfaces use the VPC's default",
        ),
        ({"capacity_reservation_id": "cr-xyz"}, "capacity_reservation_id: 'cr-xyz' is malformed"),
        ({"capacity_block_id": "cr-xyz"}, "capacity_block_id: 'cr-xyz' is malformed; expected cr-"),
        (
            {"capacity_block_id": BLOCK, "instance_type": "g5.48xlarge"},
            "capacity_block_id: EC2 offers no Capacity Blocks for g5.48xlarge; instance_type must "
            "be one of: p4d.24xlarge, p4de.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge, "
            "p6-b200.48xlarge, p6-b300.48xlarge",
        ),
        (
            {"capacity_block_id": BLOCK, "max_nodes": "65"},
            "max_nodes: 65 is more than a Capacity Block holds; allowed with capacity_block_id: "
            "1-64",
        ),
        (
            {"capacity_block_id": BLOCK, "capacity_reservation_id": BLOCK},
            "capacity_reservation_id/capacity_block_id: give at most one; a launch targets one",
        ),
        (
            {"capacity_block_id": BLOCK, "capacity_reservation_group_arn": GROUP},
            "capacity_block_id/capacity_reservation_group_arn: give at most one",
        ),
        (
            {"capacity_reservation_id": BLOCK, "capacity_reservation_group_arn": GROUP},
            "capacity_reservation_id/capacity_reservation_group_arn: give at most one",
        ),
        (
            {"capacity_reservation_group_arn": "arn:aws:ec2:us-east-1:123456789012:group/ml"},
            "capacity_reservation_group_arn: 'arn:aws:ec2:us-east-1:123456789012:group/ml' is "
            "malformed; expected arn:aws[-PARTITION]:resource-groups:REGION:ACCOUNT:group/NAME",
        ),
        (
            {"capacity_reservation_group_arn": GROUP.replace("us-east-1", "us-west-2")},
            "is in us-west-2 of account 123456789012; the group must be in the cluster's region "
            "us-east-1 and account 123456789012",
        ),
        (
            {"capacity_reservation_group_arn": GROUP.replace("123456789012", "210987654321")},
            "is in us-east-1 of account 210987654321; the group must be in the cluster's region",
        ),
        ({"min_nodes": "3"}, "min_nodes: 3; allowed: 0-2 (0 to max_nodes)"),
        ({"min_nodes": "-1"}, "min_nodes: -1; allowed: 0-2"),
        ({"min_nodes": "two"}, "min_nodes: 'two' is not an integer"),
        (
            {"capacity_wait_minutes": "5"},
            "capacity_wait_minutes: 5; allowed: 0 (never cancel) or 10-1440 (AWS Batch "
            "jobStateTimeLimitActions maxTimeSeconds: 600-86400)",
        ),
        ({"capacity_wait_minutes": "-10"}, "capacity_wait_minutes: -10; allowed: 0 (never"),
        ({"misconfigured_wait_minutes": "1441"}, "misconfigured_wait_minutes: 1441; allowed: 0"),
        ({"misconfigured_wait_minutes": "soon"}, "misconfigured_wait_minutes: 'soon' is not an"),
        ({"env": "staging"}, "env: unknown environment 'staging'; allowed: demo, prod"),
        ({"removal_policy": "snapshot"}, "removal_policy: 'snapshot'; allowed: retain, destroy"),
        ({"log_retention_days": "10"}, "log_retention_days: 10; allowed: 1, 3, 5"),
        ({"efa": "maybe"}, "efa: 'maybe' is not a boolean"),
        (
            {"extra_pull_repository_arns": "arn:x"},
            "extra_pull_repository_arns: 'arn:x' is malformed",
        ),
        ({"availability_zone": "us-west-2a"}, "availability_zone: 'us-west-2a' is not in region"),
        (
            {"availability_zone": "us-east-1z"},
            "availability_zone: 'us-east-1z' is not a zone of us-east-1; allowed: us-east-1a, "
            "us-east-1b, us-east-1c, us-east-1d, us-east-1e, us-east-1f",
        ),
        (
            {"capacity_reservation_fallback": "true"},
            "capacity_reservation_fallback: only a Capacity Reservation group falls back",
        ),
        (
            {"capacity_reservation_fallback": "true", "capacity_reservation_id": BLOCK},
            "a targeted reservation's launch fails when it is full",
        ),
        (
            {"capacity_block_id": BLOCK, "placement_group": "mine"},
            "placement_group: 'mine' with capacity_block_id; a Capacity Block places its",
        ),
        ({"placement_group": "has space"}, "placement_group: 'has space' is malformed"),
        ({"tags": '{"aws:owner": "x"}'}, "tags: 'aws:owner'='x'; allowed: keys of 1-128"),
        ({"creation_tags": '{"efa-batch:cluster": "x"}'}, "not efa-batch:cluster"),
    ],
)
def test_bad_configuration_names_the_key(overrides, expected):
    with pytest.raises(ConfigError) as info:
        load(cdk_context(**overrides))
    message = str(info.value)
    assert expected in message
    assert "\n" not in message


def test_unknown_key_in_an_environment_is_rejected():
    context = cdk_context()
    context["environments"]["demo"]["instance_typo"] = "p5.48xlarge"
    with pytest.raises(ConfigError, match="instance_typo: unknown key in environment 'demo'"):
        load(context)


def test_efa_off_accepts_a_type_without_efa():
    config = load(cdk_context(instance_type="g5.xlarge", efa="false"))
    assert config.efa_interfaces == 0


def test_values_are_coerced_from_the_field_annotations():
    """``-c key=value`` gives strings; each is read as its field's type, lists split on commas."""
    arns = ",".join(f"arn:aws:ecr:us-east-1:111122223333:repository/{n}" for n in "ab")
    config = load(cdk_context(extra_pull_repository_arns=arns, tags='{"team": "ml"}', efa="no"))
    assert config.extra_pull_repository_arns == tuple(arns.split(","))
    assert config.tags == {"team": "ml"}
    assert config.efa is False
    listed = load(cdk_context(extra_pull_repository_arns=arns.split(",")))
    assert listed.extra_pull_repository_arns == config.extra_pull_repository_arns


@pytest.mark.parametrize(
    "overrides",
    [
        {"capacity_block_id": BLOCK},  # p4d in the demo environment
        {"capacity_block_id": "cr-01234567", "env": "prod", "max_nodes": "64", "min_nodes": "64"},
        {"capacity_block_id": BLOCK, "instance_type": "p6-b200.48xlarge", "min_nodes": "1"},
        {"capacity_reservation_id": BLOCK, "max_nodes": "100"},
        {"capacity_reservation_group_arn": GROUP},
        {"capacity_reservation_group_arn": f"{GROUP[:-15]}odcr.pool_1-a"},
        {
            "env": "prod",
            "capacity_reservation_group_arn": "arn:aws:resource-groups:us-west-2:210987654321:"
            "group/ml",
        },
        {"min_nodes": "2"},
        {"capacity_wait_minutes": "0", "misconfigured_wait_minutes": "0"},
        {"capacity_wait_minutes": "10", "misconfigured_wait_minutes": "1440"},
    ],
)
def test_good_capacity_settings_load(overrides):
    config = load(cdk_context(**overrides))
    for key, value in overrides.items():
        if key != "env":
            assert str(getattr(config, key)) == value


def test_capacity_defaults():
    config = load(cdk_context())
    assert (config.capacity_block_id, config.capacity_reservation_group_arn) == (None, None)
    assert (config.min_nodes, config.min_vcpus) == (0, 0)
    assert (config.capacity_wait_minutes, config.misconfigured_wait_minutes) == (240, 10)
    assert load(cdk_context(min_nodes="2")).min_vcpus == 2 * 96


# --- copy jobs: the workspace repository's encryption, pull-through cache, registry secrets ---

PTC_SECRET = secret_arn("ecr-pullthroughcache/docker-hub")


def test_copy_defaults():
    config = load(cdk_context())
    assert config.repository_encryption == "aes256"
    # dlc is no default: a cross-account ECR upstream needs the upstream owner's grant.
    assert [r.name for r in config.pull_through_rules] == ["ecr-public"]
    assert dict(config.registry_secrets) == {}
    assert config.copy_max_vcpus == 16
    assert config.internet_egress == "none"
    assert load(cdk_context(env="prod")).internet_egress == "nat"
    assert load(cdk_context(**IMPORTED_VPC)).internet_egress == "imported"


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("ecr-public,quay,k8s", ["ecr-public", "k8s", "quay"]),
        (["dlc", "ecr-public"], ["dlc", "ecr-public"]),  # a JSON list in cdk.json
        ("none", []),
        ("", []),
        (f"docker-hub={PTC_SECRET}, quay", ["docker-hub", "quay"]),
    ],
)
def test_pull_through_cache_takes_names_and_secrets(value, names):
    config = load(cdk_context(pull_through_cache=value))
    assert [r.name for r in config.pull_through_rules] == names


def test_pull_through_cache_rules_carry_upstream_and_credentials():
    config = load(cdk_context(pull_through_cache=f"dlc,docker-hub={PTC_SECRET}"))
    dlc, hub = config.pull_through_rules
    assert (dlc.prefix, dlc.upstream.url_in(config.region)) == (
        "dlc",
        "763104351884.dkr.ecr.us-east-1.amazonaws.com",
    )
    assert (dlc.upstream.upstream_registry, dlc.upstream.custom_role) == ("ecr", True)
    assert (hub.upstream.url_in(config.region), hub.credential_arn) == (
        "registry-1.docker.io",
        PTC_SECRET,
    )


def test_known_upstreams_are_the_ecr_api_enum():
    """Every upstream the stack knows is one CreatePullThroughCacheRule accepts (botocore)."""
    from infra import pull_through

    enum = pull_through.upstream_registries()
    assert {u.upstream_registry for u in pull_through.KNOWN.values()} <= set(enum)
    assert all(pull_through.prefix_pattern().match(name) for name in pull_through.KNOWN)


def test_registry_secrets_with_nat_or_an_imported_vpc():
    secrets = {"nvcr.io": secret_arn("registry/ngc", "us-west-2", "210987654321")}
    config = load(cdk_context(env="prod", registry_secrets=secrets))
    assert dict(config.registry_secrets) == secrets
    imported = load(cdk_context(**IMPORTED_VPC, registry_secrets=json.dumps(secrets)))
    assert dict(imported.registry_secrets) == secrets


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"repository_encryption": "kms-dsse"},
            "repository_encryption: 'kms-dsse'; allowed: aes256, kms",
        ),
        (
            {"pull_through_cache": "ghcr"},
            "pull_through_cache: unknown upstream 'ghcr'; allowed: ecr-public",
        ),
        (
            {"pull_through_cache": "docker-hub"},
            "pull_through_cache: docker-hub needs credentials: docker-hub=SECRET_ARN",
        ),
        (
            {"pull_through_cache": f"docker-hub={secret_arn('hub')}"},
            "is not a Secrets Manager secret ARN whose name starts with ecr-pullthroughcache/",
        ),
        (
            {"pull_through_cache": f"quay={PTC_SECRET}"},
            "pull_through_cache: quay takes no credentials",
        ),
        ({"pull_through_cache": "quay,quay"}, "pull_through_cache: quay is given twice"),
        (
            {
                "pull_through_cache": "dlc",
                "region": "eu-south-1",
                "availability_zone": "eu-south-1a",
            },
            "pull_through_cache: dlc: account 763104351884 serves Deep Learning Containers in ap-",
        ),
        (
            {"registry_secrets": {"nvcr.io": secret_arn("registry/ngc")}},
            "registry_secrets: copy jobs reach registries outside AWS only through a NAT gateway",
        ),
        (
            {
                "env": "prod",
                "registry_secrets": {
                    "nvcr.io": "arn:aws:secretsmanager:us-west-2:210987654321:secret:ngc"
                },
            },
            "registry_secrets: 'arn:aws:secretsmanager:us-west-2:210987654321:secret:ngc' is "
            "malformed; expected complete Secrets Manager secret ARNs",
        ),
        (
            {"env": "prod", "registry_secrets": {"NVCR.io": secret_arn("x")}},
            "registry_secrets: 'NVCR.io' is malformed; expected registry hosts",
        ),
        (
            {"env": "prod", "registry_secrets": {"docker.io": secret_arn("x")}},
            "registry_secrets: 'docker.io': name Docker Hub registry-1.docker.io",
        ),
        ({"registry_secrets": "[1]"}, "registry_secrets: expected an object of strings"),
        ({"copy_max_vcpus": "0"}, "copy_max_vcpus: 0; allowed: >= 1 (a copy job takes 1 vCPU"),
        ({"copy_max_vcpus": "lots"}, "copy_max_vcpus: 'lots' is not an integer"),
    ],
)
def test_bad_copy_settings_name_the_key(overrides, expected):
    with pytest.raises(ConfigError) as info:
        load(cdk_context(**overrides))
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def refusal(**overrides) -> str:
    """The one-line error loading the demo environment with ``overrides`` raises."""
    with pytest.raises(ConfigError) as info:
        load(cdk_context(**overrides))
    assert "\n" not in str(info.value)
    return str(info.value)


# --- what jobs may reach: data buckets, job role policies, job secrets ----------------------

# "Managed policies attached to an IAM role: 10" by default, adjustable to 20 (IAM quotas).
TWENTY_POLICIES = ["arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"] + [
    f"arn:aws:iam::123456789012:policy/team/ml-{n}" for n in range(19)
]
OTHER_REGION_SECRETS = (
    secret_arn("team/wandb", "eu-west-1"),
    "arn:aws:ssm:eu-west-1:123456789012:parameter/team/hf",
)


def test_data_access_settings_load():
    """Buckets with and without prefix and mode, the most managed policies IAM attaches to a
    role, the account's own policies (with a path) and AWS's, and secrets by prefix and ARN."""
    config = load(
        cdk_context(
            data_buckets="example-datasets/imagenet,s3://example-results/runs/:rw",
            job_role_policies=",".join(TWENTY_POLICIES),
            job_secrets=f"team/,ssm:/team/,{secret_arn('shared/token')}",
        )
    )
    assert [str(b) for b in config.data_locations] == [
        "example-datasets/imagenet:ro",
        "example-results/runs:rw",
    ]
    assert config.job_role_policies == tuple(TWENTY_POLICIES)
    assert [str(g) for g in config.secret_grants] == [
        "team/",
        "ssm:/team/",
        secret_arn("shared/token"),
    ]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"data_buckets": "Example_Datasets"},
            "data_buckets: 'Example_Datasets': bucket 'Example_Datasets' breaks S3's naming "
            "rules (3-63 lower-case letters, digits, dots, hyphens; BUCKET[/PREFIX][:ro|:rw])",
        ),
        (
            {"data_buckets": "example-datasets/run*"},
            "data_buckets: 'example-datasets/run*': prefix 'run*'; allowed: printable "
            "characters without * or ? (BUCKET[/PREFIX][:ro|:rw])",
        ),
        (
            {"data_buckets": "example-datasets/x,example-datasets/x/:rw"},
            "data_buckets: example-datasets/x: given twice; give each location once",
        ),
        (
            {"job_role_policies": ",".join([*TWENTY_POLICIES, "arn:aws:iam::aws:policy/X"])},
            "job_role_policies: 21 policies; IAM attaches at most 20 managed policies to a role "
            "(IAM quotas)",
        ),
        (
            {"job_role_policies": "AmazonS3ReadOnlyAccess"},
            "job_role_policies: 'AmazonS3ReadOnlyAccess' is malformed; expected managed policy "
            "ARNs (arn:aws:iam::ACCOUNT:policy/NAME or arn:aws:iam::aws:policy/NAME)",
        ),
        (
            {"job_role_policies": "arn:aws:iam::123456789012:role/ml-jobs"},
            "job_role_policies: 'arn:aws:iam::123456789012:role/ml-jobs' is malformed; expected "
            "managed policy ARNs (arn:aws:iam::ACCOUNT:policy/NAME or "
            "arn:aws:iam::aws:policy/NAME)",
        ),
        (
            {"job_role_policies": "arn:aws:iam::12345:policy/ml-jobs"},
            "job_role_policies: 'arn:aws:iam::12345:policy/ml-jobs' is malformed; expected "
            "managed policy ARNs (arn:aws:iam::ACCOUNT:policy/NAME or "
            "arn:aws:iam::aws:policy/NAME)",
        ),
        (
            {"job_secrets": "team token"},
            "job_secrets: 'team token': allowed: a Secrets Manager name prefix, "
            "ssm:PARAMETER_PREFIX, or a secret's or parameter's ARN",
        ),
    ],
)
def test_bad_data_access_settings_name_the_key(overrides, expected):
    assert refusal(**overrides) == expected


@pytest.mark.parametrize("grant", OTHER_REGION_SECRETS)
def test_a_secret_in_another_region_needs_a_way_out_of_the_vpc(grant):
    """Without NAT the nodes reach Secrets Manager and Parameter Store only through the VPC's
    interface endpoints, which serve the stack's own Region: the ECS agent could not fetch a
    secret kept elsewhere, and every job naming it would fail to start. Refused with what to
    do; accepted with NAT or an imported VPC (its own way out), and in the stack's Region."""
    assert refusal(job_secrets=grant) == (
        f"job_secrets: {grant} is in another Region; the VPC's endpoints reach us-east-1 only: "
        "set nat_gateway=true, or copy the secret to us-east-1"
    )
    for way_out in ({"nat_gateway": "true"}, IMPORTED_VPC):
        config = load(cdk_context(job_secrets=grant, **way_out))
        assert [str(g) for g in config.secret_grants] == [grant]
    here = grant.replace("eu-west-1", "us-east-1")
    assert [str(g) for g in load(cdk_context(job_secrets=here)).secret_grants] == [here]


# --- image retention, root volumes -----------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"keep_images": "0"}, "keep_images: 0; allowed: 1-10000"),
        ({"keep_images": "10001"}, "keep_images: 10001; allowed: 1-10000"),
        ({"workspace_image_days": "0"}, "workspace_image_days: 0; allowed: 1-3650 (days)"),
        ({"workspace_image_days": "3651"}, "workspace_image_days: 3651; allowed: 1-3650 (days)"),
        ({"base_image_days": "0"}, "base_image_days: 0; allowed: 1-3650 (days)"),
        ({"base_image_days": "3651"}, "base_image_days: 3651; allowed: 1-3650 (days)"),
        ({"root_volume_gib": "29"}, "root_volume_gib: 29; allowed: 30-16384"),
        ({"root_volume_gib": "16385"}, "root_volume_gib: 16385; allowed: 30-16384"),
        (
            {"pools": {"cpu": {"instance_type": "c5n.18xlarge", "root_volume_gib": 20}}},
            "pools.cpu.root_volume_gib: 20; allowed: 30-16384",
        ),
    ],
)
def test_out_of_range_sizes_and_ages_name_the_key_and_the_range(overrides, expected):
    assert refusal(**overrides) == expected


@pytest.mark.parametrize(
    "overrides",
    [
        {"keep_images": "1", "workspace_image_days": "1", "base_image_days": "1"},
        {"keep_images": "10000", "workspace_image_days": "3650", "base_image_days": "3650"},
        {"root_volume_gib": "30"},
        {"root_volume_gib": "16384"},
    ],
)
def test_the_ends_of_each_range_load(overrides):
    config = load(cdk_context(**overrides))
    assert {k: str(getattr(config, k)) for k in overrides} == overrides


# --- FSx for Lustre ----------------------------------------------------------------------------


def lustre(**settings) -> dict:
    """cdk_context overrides for fsx_lustre, as its JSON object on `-c`."""
    return {"fsx_lustre": json.dumps(settings)}


ALLOWED_LINK_PATH = (
    "allowed: / or an absolute path such as /datasets (no spaces, //, . or .. parts)"
)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"deployment": "SCRATCH_1"}, "deployment: 'SCRATCH_1'; allowed: PERSISTENT_2, SCRATCH_2"),
        *(
            (
                {"storage_gib": size},
                f"storage_gib: {size}; allowed: 1200, 2400 or a multiple of 2400 (FSx "
                "CreateFileSystem StorageCapacity for PERSISTENT_2)",
            )
            for size in (1000, 3600, 0, -2400)
        ),
        (
            {"deployment": "SCRATCH_2", "storage_gib": 1800},
            "storage_gib: 1800; allowed: 1200, 2400 or a multiple of 2400 (FSx CreateFileSystem "
            "StorageCapacity for SCRATCH_2)",
        ),
        (
            {"deployment": "SCRATCH_2", "throughput_mibps_per_tib": 125},
            "throughput_mibps_per_tib: 125; a SCRATCH_2 file system takes none (its throughput "
            "follows its size)",
        ),
        (
            {"throughput_mibps_per_tib": 200},
            "throughput_mibps_per_tib: 200; allowed for PERSISTENT_2: 125, 250, 500, 1000",
        ),
        (
            {"s3": "example-data/sets:ro"},
            "s3: 'example-data/sets:ro'; the link imports and exports: no :ro",
        ),
        ({"link_path": "/datasets"}, "link_path: '/datasets' without s3; set s3 too"),
        *(
            ({"s3": "example-data", "link_path": path}, f"link_path: {path!r}; {ALLOWED_LINK_PATH}")
            for path in (
                "datasets",
                "/data sets",
                "//datasets",
                "/datasets/",
                "/a/../b",
                "/a/.",
                "",
            )
        ),
    ],
)
def test_bad_fsx_lustre_settings_name_the_key_and_what_fsx_takes(settings, expected):
    """What FSx would refuse at deploy (CreateFileSystem, CreateDataRepositoryAssociation), or
    a link the nodes could not use, refused before any construct exists."""
    with pytest.raises(LustreError) as direct:
        FsxLustre(**settings).validate()
    assert str(direct.value) == expected
    assert refusal(**lustre(**settings)) == f"fsx_lustre.{expected}"


def test_a_malformed_linked_bucket_is_refused():
    with pytest.raises(LustreError) as direct:
        FsxLustre(s3="Example_Data/sets").validate()
    assert str(direct.value) == (
        "s3: 'Example_Data/sets': bucket 'Example_Data' breaks S3's naming rules (3-63 "
        "lower-case letters, digits, dots, hyphens; BUCKET[/PREFIX][:ro|:rw])"
    )
    # Named by the key the user set, in the words the user wrote (it once said data_buckets).
    assert refusal(**lustre(s3="Example_Data/sets")) == f"fsx_lustre.{direct.value}"


def test_an_unknown_fsx_lustre_key_is_refused_naming_the_keys():
    assert refusal(**lustre(size_gib=1200)) == (
        "fsx_lustre.size_gib: unknown key; allowed: storage_gib, deployment, "
        "throughput_mibps_per_tib, s3, link_path"
    )


@pytest.mark.parametrize(
    ("settings", "throughput", "path"),
    [
        ({}, 125, None),  # PERSISTENT_2's lowest tier
        ({"throughput_mibps_per_tib": 1000, "storage_gib": 4800}, 1000, None),
        ({"deployment": "SCRATCH_2", "storage_gib": 2400}, None, None),  # follows its size
        ({"s3": "example-data/sets/v1"}, 125, "/example-data/sets/v1"),  # /BUCKET/PREFIX
        ({"s3": "s3://example-data:rw"}, 125, "/example-data"),
        ({"s3": "example-data/sets", "link_path": "/"}, 125, "/"),
        ({"s3": "example-data/sets", "link_path": "/datasets/v1"}, 125, "/datasets/v1"),
    ],
)
def test_good_fsx_lustre_settings_load(settings, throughput, path):
    """A link's directory defaults to its location's own name, so a new s3 links beside the
    old one and CloudFormation's create-before-delete never overlaps two associations (infra/
    lustre.py link_path_of; FSx API, CreateDataRepositoryAssociation FileSystemPath)."""
    fsx = load(cdk_context(**lustre(**settings))).fsx_lustre
    assert fsx is not None
    assert (fsx.throughput, fsx.file_system_path) == (throughput, path)


def test_the_linked_location_is_a_read_write_data_location_unless_a_bucket_covers_it():
    """Jobs read and write the linked location directly too: the job role gets it with
    read-write access, unless data_buckets already grants it (then it is not granted twice)."""
    linked = load(cdk_context(data_buckets="example-datasets", **lustre(s3="example-data/sets")))
    assert [str(b) for b in linked.data_locations] == [
        "example-datasets:ro",
        "example-data/sets:rw",
    ]
    for covering in ("example-data:rw", "example-data/sets:rw"):
        covered = load(cdk_context(data_buckets=covering, **lustre(s3="example-data/sets")))
        assert [str(b) for b in covered.data_locations] == [covering]
    read_only = load(cdk_context(data_buckets="example-data", **lustre(s3="example-data/sets")))
    assert [str(b) for b in read_only.data_locations] == ["example-data:ro", "example-data/sets:rw"]


def test_a_zone_is_checked_against_the_zones_cdk_knows_only_where_it_knows_them():
    context = cdk_context(availability_zone="us-east-1z")
    del context["availability-zones:account=123456789012:region=us-east-1"]
    assert load(context).availability_zone == "us-east-1z"  # CDK looks them up at deploy
    assert load(cdk_context(env="prod", availability_zone="us-west-2d")).availability_zone


@pytest.mark.parametrize(
    ("key", "line"),
    [
        ("instance-type", "instance-type: not a setting; did you mean instance_type?"),
        ("max-nodes", "max-nodes: not a setting; did you mean max_nodes?"),
        ("availability-zone", "availability-zone: not a setting; did you mean availability_zone?"),
    ],
)
def test_a_hyphenated_setting_is_refused_naming_the_setting_it_means(key, line):
    with pytest.raises(ConfigError) as info:
        refuse_unknown_settings([key, "max_nodes"])
    assert str(info.value) == line


def test_cdks_own_hyphenated_keys_pass():
    refuse_unknown_settings(
        [
            "acknowledged-issue-numbers",
            "availability-zones:account=123456789012:region=us-east-1",
            "@aws-cdk/core:newStyleStackSynthesis",
            "aws:cdk:enable-path-metadata",
        ]
    )
