"""Where the launcher's AWS Region comes from: --region, AWS_REGION, AWS_DEFAULT_REGION or the
profile; with none, one line that says what to set."""

from __future__ import annotations

import pytest

from launcher.aws.client import Aws
from launcher.errors import UsageError


@pytest.fixture
def no_region(monkeypatch, tmp_path):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    return monkeypatch


def test_aws_region_alone_is_enough(no_region):
    """botocore reads AWS_DEFAULT_REGION, not AWS_REGION (which the AWS CLI v2 and the other
    SDKs read, and which the launcher's message names)."""
    no_region.setenv("AWS_REGION", "eu-west-1")
    assert Aws().session.region_name == "eu-west-1"


def test_the_flag_and_aws_default_region_come_first(no_region):
    no_region.setenv("AWS_REGION", "eu-west-1")
    no_region.setenv("AWS_DEFAULT_REGION", "us-west-2")
    assert Aws().session.region_name == "us-west-2"
    assert Aws(region="ap-south-1").session.region_name == "ap-south-1"


def test_no_region_says_what_to_set(no_region):
    with pytest.raises(UsageError) as refused:
        Aws()
    assert str(refused.value) == (
        "no AWS region: pass --region, or set AWS_REGION or region in your AWS profile"
    )
