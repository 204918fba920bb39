"""``python -m infra.predeploy``: the next deploy planned against the deployed stacks, as a
platform team runs it between ``cdk synth`` and ``cdk deploy`` (a real process, CloudFormation
over HTTP in the moto server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, cdk_context


def predeploy(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "infra.predeploy", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], "AWS_EC2_METADATA_DISABLED": "true", **env},
        timeout=120,
    )


LINKED = {"storage_gib": 1200, "s3": "example-datasets/lustre"}


def _linked(tmp_path_factory, **more):
    """The default environment (the emulator's Region) with FSx linked to S3."""
    from devenv.synth import synthesize

    context = cdk_context(fsx_lustre=json.dumps({**LINKED, **more}))
    return synthesize(context, tmp_path_factory.mktemp("cdk-linked"))


@pytest.fixture(scope="module")
def synth_root_link(tmp_path_factory):
    """The S3 link at "/", where 0.x put it."""
    return _linked(tmp_path_factory, link_path="/")


@pytest.fixture(scope="module")
def synth_own_link(tmp_path_factory):
    """The S3 link where this version puts it: /BUCKET/PREFIX."""
    return _linked(tmp_path_factory)


@pytest.fixture(scope="module")
def deployed_root_link(moto_server, synth_root_link):
    moto_server.reset()
    moto_server.deploy(synth_root_link.outdir, synth_root_link.stack_names)
    return moto_server


def test_a_deploy_that_fsx_would_refuse_is_refused_before_it_starts(
    deployed_root_link, synth_own_link, synth_root_link
):
    """0.x linked S3 at "/"; this version's default links at /BUCKET/PREFIX. CloudFormation
    would create the new association while the old one exists, and FSx refuses "/" beside any
    other ("Two data repository associations cannot have overlapping file system paths", FSx
    API, CreateDataRepositoryAssociation): the plan says so, and how to get there."""
    env = deployed_root_link.env
    refused = predeploy("--app", str(synth_own_link.outdir), env=env)
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr == ""
    lines = refused.stdout.splitlines()
    assert lines[0] == "EfaBatch-Network: no change"
    assert lines[1].startswith("EfaBatch-Storage: ") and lines[1].endswith(", 1 refused")
    assert lines[2].startswith("  refuse AWS::FSx::DataRepositoryAssociation EfaBatch-Storage/")
    assert lines[2].endswith(
        "FSx refuses an S3 link at /example-datasets/lustre while the one at / exists (their "
        "file system paths overlap): deploy once without fsx_lustre.s3, then with the new link "
        "at a link_path other than /"
    )
    assert lines[-1].startswith("refused: 1 change that CloudFormation would roll back")
    # docs/operating.md shows this very run (its `cdk synth` line is this module's LINKED
    # settings).
    page = (ROOT / "docs" / "operating.md").read_text()
    shown = page.split("$ python -m infra.predeploy\n", 1)[1].split("```", 1)[0]
    assert f"fsx_lustre='{json.dumps(LINKED)}'" in page
    assert shown == refused.stdout

    unchanged = predeploy("--app", str(synth_root_link.outdir), env=env)
    assert (unchanged.returncode, unchanged.stdout.splitlines()) == (
        0,
        ["EfaBatch-Network: no change", "EfaBatch-Storage: no change", "EfaBatch: no change"],
    )


def test_stacks_never_deployed_are_planned_as_new(moto_server, synth_default):
    moto_server.reset()
    planned = predeploy("--app", str(synth_default.outdir), "EfaBatch-Network", env=moto_server.env)
    assert planned.returncode == 0, planned.stderr
    (line,) = planned.stdout.splitlines()
    assert line.startswith("EfaBatch-Network: not deployed yet (")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--app", "/nonexistent"], "--app /nonexistent: no cloud assembly there; run `cdk synth`"),
        (["--ap", "cdk.out"], "unrecognized arguments: --ap (see --help)"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, line, tmp_path):
    done = predeploy(*args, env={"HOME": str(tmp_path)})
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("python -m infra.predeploy: ")
    assert line in done.stderr and done.stderr.count("\n") == 1


def test_an_unknown_stack_names_the_ones_there(synth_default, tmp_path):
    done = predeploy("--app", str(synth_default.outdir), "Efabatch", env={"HOME": str(tmp_path)})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"python -m infra.predeploy: Efabatch: not a stack of {synth_default.outdir} (it has "
        "EfaBatch-Network, EfaBatch-Storage, EfaBatch)\n"
    )


def test_missing_credentials_say_what_to_set(moto_server, synth_default, tmp_path):
    env = {"AWS_ENDPOINT_URL": moto_server.url, "HOME": str(tmp_path)}
    done = predeploy("--app", str(synth_default.outdir), env=env)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "python -m infra.predeploy: AWS credentials not found: set AWS_PROFILE (or "
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), as for cdk deploy\n"
    )
