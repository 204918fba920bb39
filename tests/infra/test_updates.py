"""The second ``cdk deploy``: every setting change does what the update table says
(docs/operating.md).

Each example change is synthesized over the default environment and compared with the
deployed templates by ``infra/update_plan.py`` (CloudFormation's create-only properties,
cascading references, exports in use, Batch's own refusals). An upgrade from the last
release's templates (``tests/fixtures/release-0.1.0``, synthesized from commit 8f8a401) is
held to the upgrade notes (docs/operating.md). The real CDK CLI's ``cdk diff`` cross-checks
the analysis. Every synth is the one ``cdk synth`` makes, and every setting and documented
environment synthesizes so (the last section).
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import fields
from pathlib import Path

import pytest

from infra.config import ClusterConfig
from infra.lustre import FsxLustre
from infra.update_plan import Change, create_only, of, plan
from infra.updates import UPDATES, Effect, markdown_table
from launcher.stack.buckets import DataBucket
from tests.conftest import ROOT, cdk_context, context_value, synth_templates
from tests.support import tiers

RELEASE = ROOT / "tests" / "fixtures" / "release-0.1.0"
CE = "AWS::Batch::ComputeEnvironment"
LT = "AWS::EC2::LaunchTemplate"
# What an infrastructure update of the compute environment is made of (anything else on it,
# such as MaxvCpus, is a scaling update that leaves the nodes alone).
NODE_CHANGES = (
    "ComputeResources.InstanceTypes",
    "ComputeResources.Tags",
    "ComputeResources.Ec2Configuration",
    "ComputeResources.PlacementGroup",
    "ComputeResources.LaunchTemplate",
)


def synth(tmp_path_factory, **overrides) -> dict[str, dict]:
    return synth_templates(tmp_path_factory, **overrides)


def release(name: str) -> dict[str, dict]:
    return {
        p.name.removesuffix(".template.json"): json.loads(p.read_text())
        for p in (RELEASE / name).glob("*.template.json")
    }


@pytest.fixture(scope="module")
def deployed(tmp_path_factory) -> dict[str, dict]:
    return synth(tmp_path_factory)


def test_every_setting_says_what_a_change_does():
    settings = {f.name for f in fields(ClusterConfig)} - {"env_name"}
    assert sorted(settings ^ {k.split(".")[0] for k in UPDATES}) == []


@pytest.mark.parametrize(
    ("setting", "parts"), [("fsx_lustre", FsxLustre), ("data_buckets", DataBucket)]
)
def test_every_key_of_fsx_lustre_and_of_a_data_bucket_says_what_a_change_does(setting, parts):
    """fsx_lustre.s3 once said "in place" with the whole setting; its association is replaced,
    and FSx refuses some replacements (infra/update_plan.py): each key speaks for itself."""
    keys = {k.split(".", 1)[1] for k in UPDATES if k.startswith(f"{setting}.")}
    assert sorted(keys ^ {f.name for f in fields(parts)}) == []


# Every create-only property of FSx's resources (the provider schemas, and DeploymentType by
# the reference): the setting whose row says what changing it does, or None where the stacks
# set a value no setting changes.
FSX_CREATE_ONLY = {
    ("AWS::FSx::FileSystem", ("SubnetIds",)): "availability_zone",
    ("AWS::FSx::FileSystem", ("SecurityGroupIds",)): None,  # its own group, never replaced
    ("AWS::FSx::FileSystem", ("FileSystemType",)): None,
    ("AWS::FSx::FileSystem", ("KmsKeyId",)): None,
    ("AWS::FSx::FileSystem", ("BackupId",)): None,
    ("AWS::FSx::FileSystem", ("LustreConfiguration", "DeploymentType")): "fsx_lustre.deployment",
    ("AWS::FSx::DataRepositoryAssociation", ("FileSystemId",)): "fsx_lustre.deployment",
    ("AWS::FSx::DataRepositoryAssociation", ("FileSystemPath",)): "fsx_lustre.link_path",
    ("AWS::FSx::DataRepositoryAssociation", ("DataRepositoryPath",)): "fsx_lustre.s3",
    ("AWS::FSx::DataRepositoryAssociation", ("BatchImportMetaDataOnCreate",)): None,
}


@pytest.mark.cdk
def test_every_create_only_fsx_property_has_a_row_that_does_not_say_in_place(tmp_path_factory):
    """A create-only property replaces its resource when it changes (cfn-lint's bundled
    provider schemas, createOnlyProperties): each is either the work of a setting whose row
    says it replaces or is refused, or never changes across every FSx example of the table."""
    examples = [
        synth(tmp_path_factory, **settings)
        for k, u in UPDATES.items()
        if k.startswith("fsx_lustre")
        for settings in (u.example, u.baseline)
        if settings
    ]
    for type_ in ("AWS::FSx::FileSystem", "AWS::FSx::DataRepositoryAssociation"):
        assert {p for t, p in FSX_CREATE_ONLY if t == type_} == set(create_only(type_)), type_
    for (type_, path), setting in FSX_CREATE_ONLY.items():
        if setting is not None:
            assert UPDATES[setting].effect in (Effect.REPLACES, Effect.REFUSED), setting
            continue
        values = {
            json.dumps(_at(r.get("Properties", {}), path))
            for t in examples
            for stack in t.values()
            for r in stack["Resources"].values()
            if r["Type"] == type_
        }
        assert len(values) <= 1, (type_, path, values)


def _at(value, path):
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _rolls_nodes(changes: list[Change]) -> bool:
    """A launch template or compute environment that nodes already run from changes (a new
    pool's are added, and roll nothing)."""
    changes = [c for c in changes if c.action != "add"]
    return any(c.type == LT for c in changes) or any(
        c.type == CE and any(r.startswith(NODE_CHANGES) for r in c.reasons) for c in changes
    )


EXAMPLES = sorted(k for k, u in UPDATES.items() if u.example)


@pytest.mark.cdk
@pytest.mark.parametrize("setting", EXAMPLES)
def test_a_change_does_what_the_update_table_says(setting, deployed, tmp_path_factory):
    update = UPDATES[setting]
    before = synth(tmp_path_factory, **update.baseline) if update.baseline else deployed
    changes = plan(before, synth(tmp_path_factory, **update.example))
    refused = of(changes, "refuse")
    replaced = of(changes, "replace")
    if update.effect is Effect.REFUSED:
        assert refused, changes
        return
    assert refused == []
    if update.effect is Effect.REPLACES:
        assert {c.type for c in replaced} == set(update.replaces)
        # A replaced queue keeps its jobs: CloudFormation retains the old one.
        assert all(c.retained for c in replaced if c.type == "AWS::Batch::JobQueue")
        return
    assert replaced == []
    if update.effect is Effect.NODES_ROLL:
        assert _rolls_nodes(changes), changes
    else:
        assert not _rolls_nodes(changes), changes


@pytest.mark.cdk
def test_a_tag_change_keeps_every_compute_environment(deployed, tmp_path_factory):
    """The change that once replaced the compute environment: a cost-centre tag."""
    new = synth(tmp_path_factory, tags={"efa-batch:environment": "demo", "cost": "ml"})
    ces = [c for c in plan(deployed, new) if c.type == CE]
    assert {c.action for c in ces} == {"update"}


@pytest.mark.cdk
def test_nat_gateway_on_and_off_keeps_the_cluster_subnet(tmp_path_factory):
    without = synth(tmp_path_factory)
    with_nat = synth(tmp_path_factory, nat_gateway=True)
    for old, new in ((without, with_nat), (with_nat, without)):
        changes = plan(old, new)
        assert of(changes, "replace", "refuse") == []
        assert [
            c
            for c in changes
            if c.type == "AWS::EC2::Subnet" and "Cluster" in c.logical_id and c.action != "update"
        ] == []


@pytest.mark.cdk
def test_fair_share_off_and_on_and_off_never_refused(tmp_path_factory):
    states = [synth(tmp_path_factory), synth(tmp_path_factory, fair_share=True)]
    for old, new in (states, states[::-1]):
        changes = plan(old, new)
        assert of(changes, "refuse") == []
        (queue,) = [
            c for c in changes if c.type == "AWS::Batch::JobQueue" and c.action == "replace"
        ]
        assert queue.retained


# --- upgrading from the last release ------------------------------------------------------------

DEMO_TAGS = {"efa-batch:environment": "demo"}
PROD_TAGS = {"efa-batch:environment": "prod"}
CAPACITY_BLOCK = {"capacity_block_id": "cr-0123456789abcdef0", "min_nodes": 2}
# name -> (environment overrides, the upgrade notes' settings for it, what is replaced)
UPGRADES = {
    "demo": ({}, {"creation_tags": DEMO_TAGS}, set()),
    # Fair share has a queue of its own now. 0.1.0 did not retain a replaced queue, so this
    # one deploy deletes the old queue: the upgrade notes say to drain it first.
    "prod": (
        {"env": "prod"},
        {"creation_tags": PROD_TAGS, "public_subnet_first": True},
        {"AWS::Batch::JobQueue"},
    ),
    "prod-capacity-block": (
        {"env": "prod", **CAPACITY_BLOCK},
        {"creation_tags": PROD_TAGS, "public_subnet_first": True},
        {"AWS::Batch::JobQueue"},
    ),
}


@pytest.mark.cdk
@pytest.mark.parametrize("name", sorted(UPGRADES))
def test_upgrading_from_the_last_release_keeps_what_runs_jobs(name, tmp_path_factory):
    environment, settings, replaced = UPGRADES[name]
    changes = plan(release(name), synth(tmp_path_factory, **environment, **settings))
    assert of(changes, "refuse") == []
    assert {c.type for c in of(changes, "replace")} == replaced
    kept = ("AWS::EFS::FileSystem", "AWS::ECR::Repository", "AWS::IAM::Role", "AWS::EC2::Subnet")
    assert [c for c in of(changes, "remove") if c.type in kept] == []


@pytest.mark.cdk
def test_upgrading_without_the_upgrade_settings_is_what_the_readme_warns_of(tmp_path_factory):
    demo = plan(release("demo"), synth(tmp_path_factory))
    assert {(c.type, c.action) for c in of(demo, "replace", "refuse")} == {
        (CE, "replace"),
        ("AWS::EC2::PlacementGroup", "replace"),
    }
    prod = plan(release("prod"), synth(tmp_path_factory, env="prod", creation_tags=PROD_TAGS))
    refused = of(prod, "refuse")
    assert any("ClusterSubnet" in c.logical_id for c in refused), prod


# --- the analysis agrees with the real CDK CLI ---------------------------------------------------


def _cdk_replacements(assembly: Path, stack: str, old: Path) -> set[str]:
    """Logical ids `cdk diff --template OLD` marks for replacement."""
    tiers.require("cdk")
    result = subprocess.run(
        [
            str(ROOT / "node_modules" / ".bin" / "cdk"),
            "diff",
            "--exclusively",
            "--app",
            str(assembly),
            "--template",
            str(old),
            stack,
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=assembly,
    )
    found = re.findall(
        r"^\[~\] AWS::\S+ \S+ (\S+) (?:replace|may be replaced)",
        result.stdout + result.stderr,
        re.M,
    )
    return set(found)


@pytest.mark.cdk
@pytest.mark.parametrize("name", ["demo", "prod"])
def test_cdk_diff_replaces_what_the_analysis_replaces(name, tmp_path_factory):
    from devenv.synth import synth_app

    environment, settings, _ = UPGRADES[name]
    outdir = tmp_path_factory.mktemp("cdk-diff")
    overrides = {k: context_value(v) for k, v in {**environment, **settings}.items()}
    assembly, _ = synth_app(cdk_context(**overrides), outdir)
    new = {s.stack_name: s.template for s in assembly.stacks}
    changes = plan(release(name), new)
    for stack in new:
        expected = {
            c.logical_id
            for c in changes
            if c.stack == stack and c.type != "Export" and c.action in ("replace", "refuse")
        }
        assert (
            _cdk_replacements(outdir, stack, RELEASE / name / f"{stack}.template.json") == expected
        )


def test_the_docs_show_the_update_table():
    assert markdown_table() in (ROOT / "docs" / "operating.md").read_text()


# --- every setting synthesizes as `cdk synth` runs the app -----------------------------------
# cdk-nag's AwsSolutions pack on (an unacknowledged finding raises ValidationFailed inside the
# synth) and no error annotation on any stack (the CDK CLI stops on one unless
# `--ignore-errors`: "Ignores synthesis errors, which will likely produce an invalid output",
# `cdk --help`): every setting of docs/configuration.md on its own, and every environment the
# docs show as a cdk.json block. `ecs_exec=true` once passed every test, which synthesized with
# the pack off, and failed `cdk synth` on AwsSolutions-IAM5; no test synthesizes any other way
# now (devenv.synth.synth_app, infra.app.create_app).

CONFIGURATION = ROOT / "docs" / "configuration.md"
# The settings the update table gives no example of: another account and Region (the docs'
# prod, whose zones cdk.json knows), another stack name.
_PROD_PLACE = {"account": "210987654321", "region": "us-west-2", "availability_zone": "us-west-2b"}
WITHOUT_EXAMPLE = {
    "account": _PROD_PLACE,
    "region": _PROD_PLACE,
    "stack_name": {"stack_name": "Vision"},
}


def documented_settings() -> set[str]:
    """The keys of the Settings table (a row may name several: `a`, `b` or `a` + `b`)."""
    section = CONFIGURATION.read_text().split("## Settings", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return {key for row in rows for key in re.findall(r"`([a-z_]+)`", row)}


def _cli_values(settings: dict) -> dict:
    """A docs block's JSON values as synth_templates takes them (lists as -c gives them)."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()}


def documented_environments() -> list[tuple[str, dict]]:
    """Every environment the docs show as a cdk.json block (``"NAME": {...}``), as the keys a
    reader adds to that environment of cdk.json."""
    found = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        blocks = re.findall(r"```json\n(.*?)```", page.read_text(), re.S)
        for number, block in enumerate(blocks, start=1):
            named = re.match(r'\s*"([a-z0-9-]+)":\s*(\{.*\})\s*$', block, re.S)
            if named:
                env, settings = named.group(1), json.loads(named.group(2))
                name = f"{page.stem}-block{number}-{env}"
                found.append((name, {"env": env, **_cli_values(settings)}))
    return found


def one_setting_cases() -> list[tuple[str, dict]]:
    """Each setting (and each key of fsx_lustre and part of a data bucket) changed on its own
    over the default environment: the update table's example, and the baseline it is changed
    from where it has one (the very settings test_a_change_does_what_the_update_table_says
    synthesizes, so this module's cache serves both)."""
    cases = [(key, u.example) for key, u in UPDATES.items() if u.example]
    cases += [(f"{key}-baseline", u.baseline) for key, u in UPDATES.items() if u.baseline]
    return cases + sorted(WITHOUT_EXAMPLE.items())


CASES = [("defaults", {}), *one_setting_cases(), *documented_environments()]


def test_every_documented_setting_is_walked():
    """A setting added to the table without a case here would go unsynthesized."""
    walked = {key for _, settings in CASES for key in settings}
    assert sorted(documented_settings() - walked) == []


def test_the_docs_environments_are_found():
    """The prod example and the pools example of configuration.md, getting-started's."""
    names = [name for name, _ in documented_environments()]
    assert names == [
        "configuration-block1-prod",
        "configuration-block2-prod",
        "getting-started-block1-prod",
    ]


@pytest.mark.cdk
@pytest.mark.parametrize(("name", "settings"), CASES, ids=[name for name, _ in CASES])
def test_the_setting_synthesizes_as_cdk_synth_does(name, settings, tmp_path_factory):
    stack = settings.get("stack_name", "EfaBatch")
    templates = synth_templates(tmp_path_factory, **settings)  # raises where cdk synth fails
    assert sorted(templates) == [stack, f"{stack}-Network", f"{stack}-Storage"]
