"""A team kept off FSx (``fsx: none``) is kept off the S3 location the file system's link reads
and exports to: its job role gets the stack-wide data buckets, not the link's location, which
the teams that use FSx do get (read and write where the link exports)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import cdk_context
from tests.infra.teams_support import role_documents
from tests.support.iam_eval import Request, allowed

LINKED = "example-datasets/lustre"
TEAMS = {
    "vision": {"pools": ["default", "cpu"], "fsx": "none"},
    "speech": {"pools": ["default", "cpu"], "fsx": "own"},
}


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    from devenv.synth import synthesize

    context = cdk_context(
        env="teams",
        fsx_lustre=json.dumps({"storage_gib": 1200, "s3": LINKED, "export": True}),
        teams=json.dumps(TEAMS),
    )
    synth = synthesize(context, tmp_path_factory.mktemp("cdk-team-fsx"))
    return synth.template()


def write(key: str) -> Request:
    return Request("s3:PutObject", (f"arn:aws:s3:::{LINKED}/{key}",))


@pytest.mark.cdk
def test_only_the_teams_on_fsx_reach_the_links_location(template):
    vision = role_documents(template, "TeamVisionJobRole")
    speech = role_documents(template, "TeamSpeechJobRole")
    assert not allowed(vision, write("checkpoint.pt"))
    assert not allowed(vision, Request("s3:GetObject", (f"arn:aws:s3:::{LINKED}/x",)))
    assert allowed(speech, write("checkpoint.pt"))  # the link exports: its teams write there
    # The stack-wide buckets stay every team's.
    public = Request("s3:GetObject", ("arn:aws:s3:::example-datasets/public/x",))
    assert allowed(vision, public) and allowed(speech, public)
