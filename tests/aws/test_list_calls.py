"""What `launcher list` costs on AWS: the table names no image, so it sends no
DescribeJobDefinitions; `-o json` gives each job's image for one more call (per 100 job
definitions). docs/benchmarks.md's target, list of 1,000 jobs in at most 11 calls, is the
table's."""

from __future__ import annotations

import pytest

from launcher.api import Cluster
from launcher.aws.client import Aws
from tests.support import cli

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/base:1"


@pytest.fixture(scope="module")
def stack(moto_server, synth_default):
    moto_server.reset()
    return moto_server.deploy(synth_default.outdir, synth_default.stack_names)["EfaBatch"]


def test_the_image_is_looked_up_only_when_asked_for(stack, moto_server, monkeypatch):
    env = moto_server.env
    ran = cli.launcher("run", "--no-workspace", "--image", IMAGE, "--", "true", env=env)
    assert ran.returncode == 0, ran.stderr
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    aws = Aws()
    cluster = Cluster.from_stack("EfaBatch", aws=aws)

    before = aws.calls
    (plain,) = cluster.list(all=True)
    table_calls = aws.calls - before
    before = aws.calls
    (with_image,) = cluster.list(all=True, images=True)
    assert aws.calls - before == table_calls + 1  # one DescribeJobDefinitions
    assert (plain.image, with_image.image) == (None, IMAGE)
