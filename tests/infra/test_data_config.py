"""What jobs may reach, as settings (infra/data_config.py, infra/lustre.py): data buckets, the
job role's managed policies, the secrets jobs read and the FSx for Lustre file system; each bad
setting refused before any construct exists, with one line naming the key and what is allowed.
That whatever FsxLustre.validate accepts the stack can build was added where mutation testing
(``make mutation``) found a change to infra/lustre.py that no test noticed."""

from __future__ import annotations

import json

import pytest

from infra.config import load
from infra.lustre import FsxLustre, LustreError
from tests.conftest import IMPORTED_VPC, cdk_context, secret_arn
from tests.support.config_refusal import refusal

# "Managed policies attached to an IAM role: 10" by default, adjustable to 20 (IAM quotas).
TWENTY_POLICIES = ["arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"] + [
    f"arn:aws:iam::123456789012:policy/team/ml-{n}" for n in range(19)
]
OTHER_REGION_SECRETS = (
    secret_arn("team/wandb", "eu-west-1"),
    "arn:aws:ssm:eu-west-1:123456789012:parameter/team/hf",
)


# --- data buckets, job role policies, job secrets -------------------------------------------------


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


# --- FSx for Lustre -------------------------------------------------------------------------------


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
            "s3: 'example-data/sets:ro'; no :ro here: for a link that writes nothing back, set "
            "fsx_lustre.export to false (or list the location :ro in data_buckets)",
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


@pytest.mark.parametrize(
    "s3",
    ["datasets/train", "datasets/train:rw", "s3://datasets/train/", "datasets/train ", "datasets"],
)
def test_a_link_that_validates_has_a_location(s3):
    """Whatever validate() lets through, the stack reads as a data location (the file
    system's link, granted to the job role) without an error at deploy time: either the
    setting is refused under fsx_lustre.s3, or its location parses."""
    settings = FsxLustre(s3=s3)
    try:
        settings.validate()
    except LustreError as exc:
        assert str(exc).startswith("s3: ")
        return
    assert settings.repository is not None
    assert settings.repository.writable


def test_an_unknown_fsx_lustre_key_is_refused_naming_the_keys():
    assert refusal(**lustre(size_gib=1200)) == (
        "fsx_lustre.size_gib: unknown key; allowed: storage_gib, deployment, "
        "throughput_mibps_per_tib, s3, link_path, export"
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
    read-write access, unless data_buckets already grants it (then it is not granted twice) or
    lists it read-only."""
    linked = load(cdk_context(data_buckets="example-datasets", **lustre(s3="example-data/sets")))
    assert [str(b) for b in linked.data_locations] == [
        "example-datasets:ro",
        "example-data/sets:rw",
    ]
    for covering in ("example-data:rw", "example-data/sets:rw"):
        covered = load(cdk_context(data_buckets=covering, **lustre(s3="example-data/sets")))
        assert [str(b) for b in covered.data_locations] == [covering]
    # A bucket listed read-only stays so: the link exports nothing there (test_fsx_link_modes).
    read_only = load(cdk_context(data_buckets="example-data", **lustre(s3="example-data/sets")))
    assert [str(b) for b in read_only.data_locations] == ["example-data:ro"]
