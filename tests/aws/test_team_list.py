"""What `launcher list` costs on a stack with teams: a job's team is its efa-batch:team tag,
which ListJobs' summaries lack (botocore JobSummary has shareIdentifier, not tags), so such a
stack's listing adds one DescribeJobs per 100 jobs of a queue; a stack without teams sends
what it sent before (tests/aws/test_list_calls.py). Measured with the client's call count on
cdk.json's teams environment deployed on the moto server."""

from __future__ import annotations

import pytest

from launcher.api import Cluster
from launcher.aws.client import Aws

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/base:1"


@pytest.fixture(scope="module")
def stack(moto_server, synth_teams):
    moto_server.reset()
    return moto_server.deploy(synth_teams.outdir, synth_teams.stack_names)["EfaBatch"]


def test_listing_a_teams_queue_reads_tags_once_per_100_jobs(stack, moto_server, monkeypatch):
    for name, value in moto_server.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("LAUNCHER_TEAM", raising=False)
    aws = Aws()
    for team in ("vision", "llm"):
        cluster = Cluster.from_stack("EfaBatch", aws=aws, team=team)
        spec = cluster.spec(["true"], image=IMAGE, name=f"{team}-job")
        for _ in range(52):  # 104 jobs in the default pool's queue: two DescribeJobs
            cluster.submit(cluster.requests(spec))

    reader = Cluster.from_stack("EfaBatch", aws=aws)  # several teams, none chosen: reading
    before = aws.calls
    listed = reader.list(all=True)
    # One ListJobs (moto_gaps pages by 100, as Batch does: two pages) and one DescribeJobs
    # per 100 jobs.
    assert aws.calls - before == 2 + 2
    assert len(listed) == 104
    assert {(j.name.split("-")[0], j.team, j.share) for j in listed} == {
        ("vision", "vision", "vision"),
        ("llm", "llm", "llm"),
    }
