"""Data buckets: each of S3's naming rules refuses on its own, a prefix keeps its characters,
and a grant covers what lies under its prefix (the mutants ``make mutation`` found alive in
launcher/stack/buckets.py)."""

from __future__ import annotations

import pytest

from launcher.stack.buckets import BucketError, DataBucket


@pytest.mark.parametrize(
    "bucket",
    [
        "Upper-Case",  # the character rule alone
        "my..bucket",  # two adjacent dots, which the character rule lets through
        "192.168.5.4",  # an IP address, which the character rule lets through
        "xn--datasets",  # a reserved prefix alone
        "datasets-s3alias",  # a reserved suffix alone
    ],
)
def test_each_s3_naming_rule_refuses_on_its_own(bucket):
    """A bucket that breaks one rule only is refused with the rules, in one line: the guard
    against rules that refuse only together (S3 user guide, bucketnamingrules.html)."""
    with pytest.raises(BucketError) as info:
        DataBucket.parse(f"{bucket}/data:rw")
    assert str(info.value) == (
        f"'{bucket}/data:rw': bucket {bucket!r} breaks S3's naming rules (3-63 lower-case "
        "letters, digits, dots, hyphens; BUCKET[/PREFIX][:ro|:rw])"
    )


def test_a_prefix_with_a_question_mark_is_refused():
    """? is an IAM wildcard: a prefix with one would grant more than it names."""
    with pytest.raises(BucketError) as info:
        DataBucket.parse("datasets/run?/")
    assert str(info.value) == (
        "'datasets/run?/': prefix 'run?'; allowed: printable characters without * or ? "
        "(BUCKET[/PREFIX][:ro|:rw])"
    )


def test_a_prefix_loses_its_slashes_and_nothing_else():
    assert DataBucket.parse("datasets/XRAY/scans/").prefix == "XRAY/scans"
    assert DataBucket.parse("s3://datasets//X/").prefix == "X"


def test_a_grant_covers_its_prefix_as_a_folder_not_as_a_string():
    """``data`` covers ``data/train`` and itself, not ``data-private`` (IAM's s3:prefix is a
    plain string prefix; a folder needs its slash)."""
    grant = DataBucket.parse("datasets/data:rw")
    assert grant.covers(DataBucket.parse("datasets/data/train:rw"))
    assert grant.covers(DataBucket.parse("datasets/data"))
    assert not grant.covers(DataBucket.parse("datasets/data-private"))
    assert not DataBucket.parse("datasets/data").covers(DataBucket.parse("datasets/data:rw"))
