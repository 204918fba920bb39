"""Job shapes as a user meets them: the array and dependency refusals word for word, the ends
of Batch's ranges, and dependencies as ``describe`` shows them (the mutants ``make mutation``
found alive in launcher/job/shapes.py)."""

from __future__ import annotations

import pytest

from launcher.errors import UsageError
from launcher.job import shapes
from launcher.job.shapes import Dependency

CHILD = "6f1c2d3e-0000-4000-8000-000000000001:3"  # an array child's job id: JOB:INDEX


@pytest.mark.parametrize(
    ("size", "nodes", "line"),
    [
        (
            1,
            1,
            "--array 1: AWS Batch runs arrays of 2-10,000 children (Batch user guide, array "
            "jobs); for one job leave --array out",
        ),
        (
            10_001,
            1,
            "--array 10001: AWS Batch runs arrays of 2-10,000 children (Batch user guide, array "
            "jobs); for one job leave --array out",
        ),
        (
            4,
            2,
            "--array with --nodes 2: array jobs are single-node here (AWS documents no "
            "multi-node array jobs); submit one multi-node job per shard instead",
        ),
    ],
)
def test_array_refusals_are_one_whole_line(size, nodes, line):
    """The line the user reads, all of it: a guard against a refusal that loses its advice."""
    with pytest.raises(UsageError) as info:
        shapes.check_array(size, nodes)
    assert str(info.value) == line


@pytest.mark.parametrize("size", [shapes.ARRAY_MIN, shapes.ARRAY_MAX])
def test_the_ends_of_the_array_range_are_accepted(size):
    """2 and 10,000 children are what Batch takes: neither end may be refused."""
    shapes.check_array(size, 1)


def test_a_job_named_twice_in_after_is_one_whole_line():
    twice = (Dependency("a"), Dependency("a"))
    with pytest.raises(UsageError) as info:
        shapes.check_dependencies(twice, None)
    assert str(info.value) == "--after: a job is named twice; name each once"


def test_each_is_read_from_the_end_of_a_job_id_that_has_colons():
    """An array child's id has a colon of its own (JOB:INDEX): ``:each`` is the last part,
    and the child's id stays whole."""
    assert shapes.parse_after(f"{CHILD}:each") == Dependency(CHILD, True)
    assert shapes.parse_after(CHILD) == Dependency(CHILD, False)


@pytest.mark.parametrize(
    ("entry", "shown"),
    [
        ({"jobId": "j1"}, "j1"),
        ({"jobId": "j2", "type": "N_TO_N"}, "j2:each"),
        ({"type": "SEQUENTIAL"}, ""),  # an entry cut short names no job, not "None"
    ],
)
def test_dependencies_read_back_as_describe_shows_them(entry, shown):
    """``launcher describe`` shows a DescribeJobs dependsOn entry as --after takes it: a whole
    job without ``:each``."""
    assert str(Dependency.from_batch(entry)) == shown


def test_a_described_job_without_a_container_reads_as_an_empty_one():
    """Callers ask the container for its environment and image: an entry that has none is an
    empty container, never None."""
    assert shapes.single_container({"jobId": "j", "jobName": "x"}) == {}
    assert shapes.single_container({"container": {"image": "i"}}) == {"image": "i"}
