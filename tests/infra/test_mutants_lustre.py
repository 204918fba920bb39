"""FsxLustre.validate: what it accepts, the stack can build (a mutant ``make mutation`` found
alive in infra/lustre.py)."""

from __future__ import annotations

import pytest

from infra.lustre import FsxLustre, LustreError


@pytest.mark.parametrize(
    "s3",
    ["datasets/train", "datasets/train:rw", "s3://datasets/train/", "datasets/train ", "datasets"],
)
def test_a_link_that_validates_has_a_location(s3):
    """Whatever validate() lets through, the stack reads as a data location (the file
    system's link, granted to the job role) without an error at deploy time: either the
    setting is refused under fsx_lustre.s3, or its location parses."""
    settings = FsxLustre(s3=s3)
    try:
        settings.validate()
    except LustreError as exc:
        assert str(exc).startswith("s3: ")
        return
    assert settings.repository is not None
    assert settings.repository.writable
