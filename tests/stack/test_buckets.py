"""Data bucket locations: each of S3's naming rules refuses on its own, a prefix keeps its
characters, and as IAM grants the listing condition stays inside the location and a grant covers
what lies under its prefix as a folder. The naming-rule, prefix and covering tests were added
where mutation testing (``make mutation``) found changes to launcher/stack/buckets.py that no
test noticed."""

from __future__ import annotations

import pytest

from launcher.stack.buckets import BucketError, DataBucket
from tests.rules.data_rules import literal_head, string_like

SIBLINGS = ("data-private/", "data-private/x", "data", "datax/", "Data/", "data.bak/")
INSIDE = ("data/", "data/train/", "data/train/shard-0001")


# --- a location: S3's naming rules, the prefix --------------------------------------------------


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


# --- as IAM grants: listing stays inside the prefix, a grant covers its folder -------------------


@pytest.mark.parametrize("text", ["team-data/data:ro", "team-data/data/:rw", "s3://team-data/data"])
def test_a_prefix_lists_its_folder_and_never_a_sibling(text):
    """ListObjectsV2 matches plain string prefixes ("Limits the response to keys that begin
    with the specified prefix", S3 API reference, API_ListObjectsV2.html): a grant of the bare
    prefix ``data`` lets a job list ``data-private/``. StringLike is case-sensitive with * and
    ? wildcards (IAM user guide, reference_policies_elements_condition_operators.html)."""
    patterns = DataBucket.parse(text).list_prefixes
    assert patterns == ("data/", "data/*")
    for prefix in INSIDE:
        assert any(string_like(p, prefix) for p in patterns), prefix
    for prefix in SIBLINGS:
        assert not any(string_like(p, prefix) for p in patterns), prefix
    assert all(literal_head(p).startswith("data/") for p in patterns)


def test_the_old_grant_listed_siblings():
    """What the rule is about: the 0.x patterns admitted data-private/ and the bare prefix."""
    old = ("data", "data/*")
    assert any(string_like(p, "data") for p in old)
    assert not literal_head(old[0]).startswith("data/")


def test_a_whole_bucket_needs_no_listing_condition():
    assert DataBucket.parse("team-data:rw").list_prefixes == ()


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("data/*", "data/", True),
        ("data/*", "data-private/", False),
        ("da?a/", "data/", True),
        ("da?a/", "daa/", False),
        ("data/*", "DATA/x", False),
        ("a.b", "axb", False),
    ],
)
def test_string_like_follows_iams_wildcards(pattern, value, matches):
    assert string_like(pattern, value) is matches


def test_a_grant_covers_its_prefix_as_a_folder_not_as_a_string():
    """``data`` covers ``data/train`` and itself, not ``data-private`` (IAM's s3:prefix is a
    plain string prefix; a folder needs its slash)."""
    grant = DataBucket.parse("datasets/data:rw")
    assert grant.covers(DataBucket.parse("datasets/data/train:rw"))
    assert grant.covers(DataBucket.parse("datasets/data"))
    assert not grant.covers(DataBucket.parse("datasets/data-private"))
    assert not DataBucket.parse("datasets/data").covers(DataBucket.parse("datasets/data:rw"))
