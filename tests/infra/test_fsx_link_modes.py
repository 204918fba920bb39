"""The FSx for Lustre S3 link and a read-only data bucket: ``:ro`` stays read-only unless the
platform team asks for the link's write-back (``fsx_lustre.export``), and synth says what the
link adds (infra/lustre.py, infra/data_config.link_exports)."""

from __future__ import annotations

import json

import pytest

from infra.config import ConfigError
from infra.data_config import validate_data
from infra.lustre import FsxLustre
from launcher.stack.outputs import Egress
from launcher.stack.secrets import Place
from tests.conftest import cdk_context

LINK = "example-datasets/lustre"
ASSOCIATION = "AWS::FSx::DataRepositoryAssociation"


def _synth(tmp_path_factory, **settings):
    """The templates and the synth's messages (level, text), as `cdk synth` prints them."""
    from devenv.synth import synth_app

    outdir = tmp_path_factory.mktemp("cdk-link")
    assembly, _ = synth_app(cdk_context(**settings), outdir)
    messages = [
        (m.level.value if hasattr(m.level, "value") else str(m.level), str(m.entry.data))
        for stack in assembly.stacks
        for m in stack.messages
    ]
    templates = {
        s.stack_name: json.loads((outdir / s.template_file).read_text()) for s in assembly.stacks
    }
    return templates, messages


def _association(templates) -> dict:
    (found,) = [
        r["Properties"]
        for r in templates["EfaBatch-Storage"]["Resources"].values()
        if r["Type"] == ASSOCIATION
    ]
    return found


def _job_role_writes(templates) -> list[str]:
    """The object ARNs of data buckets the stack's job role may PutObject to (the function
    bucket's functions/ aside: tests/infra/test_function_payloads.py)."""
    found = []
    for resource in templates["EfaBatch"]["Resources"].values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        if not any("JobRole" in json.dumps(r) for r in resource["Properties"]["Roles"]):
            continue
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            resource = json.dumps(statement["Resource"])
            writes = "s3:PutObject" in (actions if isinstance(actions, list) else [actions])
            if writes and "FunctionPayloads" not in resource:
                found.append(resource)
    return found


@pytest.mark.cdk
def test_a_link_under_a_read_only_bucket_writes_nothing_back(tmp_path_factory):
    """data_buckets lists example-datasets read-only: the link imports (AutoImportPolicy) and
    exports nothing (no AutoExportPolicy: "AutoExportPolicy ... Specifies the type of updated
    objects ... that will be automatically exported", FSx API, S3DataRepositoryConfiguration,
    so none is exported without it), and the job role gets no write on the location. The link
    used to add it as :rw, and its DELETED export deletes objects ("DELETED ... Amazon FSx
    automatically deletes the corresponding object in the linked data repository", FSx for
    Lustre user guide, autoexport-data-repo-dra.html)."""
    templates, messages = _synth(
        tmp_path_factory,
        data_buckets="example-datasets:ro",
        fsx_lustre=json.dumps({"storage_gib": 1200, "s3": LINK}),
    )
    s3 = _association(templates)["S3"]
    assert "AutoExportPolicy" not in s3 and s3["AutoImportPolicy"]["Events"]
    assert _job_role_writes(templates) == []
    infos = [text for level, text in messages if "info" in level.lower()]
    assert any(
        t == "fsx_lustre.s3: jobs read s3://example-datasets/lustre/ through "
        "/fsx/example-datasets/lustre; read-only: no export (fsx_lustre.export is false, or "
        "data_buckets lists it :ro): files written there stay on the file system, and the link "
        "gives the job role no write on example-datasets/lustre"
        for t in infos
    ), messages


@pytest.mark.cdk
def test_export_true_over_a_read_only_bucket_writes_back_and_synth_warns(tmp_path_factory):
    templates, messages = _synth(
        tmp_path_factory,
        data_buckets="example-datasets:ro",
        fsx_lustre=json.dumps({"storage_gib": 1200, "s3": LINK, "export": True}),
    )
    assert _association(templates)["S3"]["AutoExportPolicy"]["Events"] == [
        "NEW",
        "CHANGED",
        "DELETED",
    ]
    assert any("example-datasets/lustre/*" in w for w in _job_role_writes(templates))
    warnings = [text for level, text in messages if "warn" in level.lower()]
    assert any(
        "fsx_lustre.export: true makes example-datasets:ro writable under "
        "example-datasets/lustre" in w
        for w in warnings
    ), messages


@pytest.mark.cdk
def test_a_link_no_bucket_names_still_writes_back_and_says_so(tmp_path_factory):
    """Stacks deployed before export keep their template: an S3 link with no data bucket over
    it imports and exports, and the job role may write the location."""
    templates, messages = _synth(
        tmp_path_factory, fsx_lustre=json.dumps({"storage_gib": 1200, "s3": LINK})
    )
    assert "AutoExportPolicy" in _association(templates)["S3"]
    assert any("example-datasets/lustre/*" in w for w in _job_role_writes(templates))
    assert (
        "INFO",
        "fsx_lustre.s3: jobs read and write s3://example-datasets/lustre/ through "
        "/fsx/example-datasets/lustre; the link writes new, changed and deleted files back to it "
        "(NEW, CHANGED, DELETED: a file deleted there deletes its object), and the job role may "
        "write example-datasets/lustre",
    ) in messages, messages


@pytest.mark.parametrize(
    ("data_buckets", "export", "exports", "locations"),
    [
        # No bucket over it: as before export existed (stacks deployed today keep their template).
        ((), None, True, ("example-datasets/lustre:rw",)),
        (("example-datasets:ro",), None, False, ("example-datasets:ro",)),
        (("example-datasets/lustre:ro",), None, False, ("example-datasets/lustre:ro",)),
        # A string prefix is not a folder: example-datasets/lust does not cover lustre/.
        (
            ("example-datasets/lust:ro",),
            None,
            True,
            ("example-datasets/lust:ro", "example-datasets/lustre:rw"),
        ),
        # Read-write somewhere over it: the platform team gave write already.
        (
            ("example-datasets:ro", "example-datasets/lustre:rw"),
            None,
            True,
            ("example-datasets:ro", "example-datasets/lustre:rw"),
        ),
        (("other-datasets:ro",), None, True, ("other-datasets:ro", "example-datasets/lustre:rw")),
        ((), False, False, ("example-datasets/lustre:ro",)),
        (
            ("example-datasets:ro",),
            True,
            True,
            ("example-datasets:ro", "example-datasets/lustre:rw"),
        ),
    ],
)
def test_what_the_link_exports_and_grants(data_buckets, export, exports, locations):
    """fsx_lustre.export where set; else the link writes back unless data_buckets lists its
    location :ro and nowhere :rw. The job role gets write on the location exactly when the
    link exports (an export writes, and deletes, objects there)."""
    from infra.data_config import data_locations, link_exports, widened_by_link

    lustre = FsxLustre(s3=LINK, export=export)
    assert link_exports(data_buckets, lustre) is exports
    assert tuple(map(str, data_locations(data_buckets, lustre))) == locations
    widened = widened_by_link(data_buckets, lustre)
    assert (str(widened) if widened else None) == (
        "example-datasets:ro" if export and data_buckets == ("example-datasets:ro",) else None
    )


def test_export_without_s3_is_refused():
    with pytest.raises(ConfigError) as caught:
        validate_data(
            data_buckets=(),
            fsx_lustre=FsxLustre(export=False),
            job_role_policies=(),
            job_secrets=(),
            place=Place("aws", "us-east-1", "123456789012"),
            egress=Egress.NONE,
        )
    assert str(caught.value) == (
        "fsx_lustre.export: false without s3; export is whether the S3 link writes back: set s3 too"
    )


@pytest.mark.cdk
def test_cdk_synth_says_what_the_link_adds_and_warns_it_widens_a_read_only_bucket(tmp_path):
    """As a platform engineer sees it: the real `cdk synth` (cdk-nag on) prints the link's
    line and the warning that export: true over a :ro bucket makes it writable."""
    from tests.infra.test_checks import _cdk

    done = _cdk(
        "synth",
        "-c",
        "data_buckets=example-datasets:ro",
        "-c",
        "fsx_lustre=" + json.dumps({"storage_gib": 1200, "s3": LINK, "export": True}),
        tmp_path=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        "fsx_lustre.export: true makes example-datasets:ro writable under "
        "example-datasets/lustre: the link writes new, changed and deleted files back, and the "
        "job role may write there"
    ) in done.stderr, done.stderr[-3000:]
    assert (
        "fsx_lustre.s3: jobs read and write s3://example-datasets/lustre/ through "
        "/fsx/example-datasets/lustre; the link writes new, changed and deleted files back"
    ) in done.stderr


def test_the_link_changes_in_place():
    """Turning export on or off changes the association's S3 property, which is not among
    its createOnlyProperties (the CloudFormation resource provider schema, as cfn-lint ships
    it): the link is updated, not replaced."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", ASSOCIATION).schema
    assert "/properties/S3" not in schema["createOnlyProperties"]


def test_s3_with_ro_points_at_export():
    with pytest.raises(ConfigError) as caught:
        validate_data(
            data_buckets=(),
            fsx_lustre=FsxLustre(s3=f"{LINK}:ro"),
            job_role_policies=(),
            job_secrets=(),
            place=Place("aws", "us-east-1", "123456789012"),
            egress=Egress.NONE,
        )
    assert str(caught.value) == (
        "fsx_lustre.s3: 'example-datasets/lustre:ro'; no :ro here: for a link that writes "
        "nothing back, set fsx_lustre.export to false (or list the location :ro in data_buckets)"
    )
