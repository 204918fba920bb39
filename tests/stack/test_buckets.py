"""Data bucket locations as IAM grants: the listing condition stays inside the location."""

from __future__ import annotations

import pytest

from launcher.stack.buckets import DataBucket
from tests.rules.data_rules import literal_head, string_like

SIBLINGS = ("data-private/", "data-private/x", "data", "datax/", "Data/", "data.bak/")
INSIDE = ("data/", "data/train/", "data/train/shard-0001")


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
