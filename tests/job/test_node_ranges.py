"""A job definition's node ranges, read and rewritten (launcher/job/node_ranges.py), as the local
backend, ``resume`` and ``describe`` read a definition back: each range's bounds and container,
the groups it names, a container job (a copy job) run as one node with its parameters, and a
submit's overrides and environment reaching the ranges they name. Many were added where mutation
testing (``make mutation``) found changes to these readers that no test noticed."""

from __future__ import annotations

import pytest

from devenv.clusters import cluster_info
from launcher.errors import UsageError
from launcher.job import jobdef
from launcher.job.jobspec import JobSpec
from launcher.job.node_ranges import (
    as_one_node,
    groups_of,
    node_ranges,
    with_environment,
    with_overrides,
)
from launcher.job.shapes import is_single

COPY = {
    "jobDefinitionName": "copy",
    "type": "container",
    "parameters": {"src": "a", "dst": "b"},
    "containerProperties": {
        "image": "copier",
        "command": ["copy", "Ref::src", "Ref::dst", "Ref::missing", "--Ref::src", "--in-dst"],
        "environment": [{"name": "A", "value": "1"}],
    },
    "retryStrategy": {"attempts": 2},
}


def gang() -> dict:
    return {
        "nodeProperties": {
            "numNodes": 4,
            "mainNode": 0,
            "nodeRangeProperties": [
                {"targetNodes": "0:0", "container": {"image": "ps", "environment": []}},
                {
                    "targetNodes": "1:",
                    "container": {"image": "w", "environment": [{"name": "B", "value": "0"}]},
                },
            ],
        }
    }


def test_node_ranges_are_read_with_their_bounds():
    definition = gang()
    definition["nodeProperties"]["nodeRangeProperties"].insert(
        1, {"targetNodes": "2:2", "container": {}}
    )
    assert [bounds for bounds, _ in node_ranges(definition)] == [(0, 0), (2, 2), (1, 3)]
    assert node_ranges({"container": {"image": "i"}}) == [((0, 0), {"image": "i"})]
    # "If the starting range value is omitted (:n), then 0 is used" (Batch API, NodeRangeProperty)
    leading = {
        "nodeProperties": {
            "numNodes": 3,
            "nodeRangeProperties": [
                {"targetNodes": ":1", "container": {}},
                {"targetNodes": "2:", "container": {}},
            ],
        }
    }
    assert [bounds for bounds, _ in node_ranges(leading)] == [(0, 1), (2, 2)]
    assert is_single({"container": {}})


def test_groups_read_back_by_name_or_by_their_nodes():
    """describe names a group by LAUNCHER_GROUP, else by its nodes; one range is "main"."""
    assert [g.name for g in groups_of(gang())] == ["0-0", "1-3"]
    assert [g.name for g in groups_of({"container": {"image": "i"}})] == ["main"]


def test_a_container_job_runs_as_one_node_with_its_parameters_in_the_command():
    """Batch replaces Ref::NAME with the submitted parameter, else the definition's default,
    and leaves an unknown one as it is (the local backend runs copy jobs this way)."""
    assert as_one_node(COPY, {"dst": "c"}) == {
        "jobDefinitionName": "copy",
        "type": "container",
        "parameters": {"src": "a", "dst": "b"},
        "retryStrategy": {"attempts": 2},
        "nodeProperties": {
            "numNodes": 1,
            "mainNode": 0,
            "nodeRangeProperties": [
                {
                    "targetNodes": "0:",
                    "container": {
                        "image": "copier",
                        "command": ["copy", "a", "c", "Ref::missing", "--Ref::src", "--in-dst"],
                        "environment": [{"name": "A", "value": "1"}],
                    },
                }
            ],
        },
    }
    no_parameters = {k: v for k, v in COPY.items() if k != "parameters"}
    bare = {"type": "container", "containerProperties": {"image": "i"}}
    assert as_one_node(no_parameters, {})["nodeProperties"]["nodeRangeProperties"][0]["container"][
        "command"
    ] == ["copy", "Ref::src", "Ref::dst", "Ref::missing", "--Ref::src", "--in-dst"]
    assert as_one_node(bare, {})["nodeProperties"]["nodeRangeProperties"][0]["container"] == {
        "image": "i",
        "command": [],
    }
    two_nodes = JobSpec(
        name="train", command=("python", "train.py"), image="repo@sha256:ab", nodes=2
    )
    multinode = jobdef.build(two_nodes, cluster_info()).register
    assert as_one_node(multinode, {}) is multinode


def test_overrides_reach_the_node_ranges_they_name_as_batch_applies_them():
    submit = {
        "nodeOverrides": {
            "nodePropertyOverrides": [
                {
                    "targetNodes": "1:",
                    "containerOverrides": {
                        "environment": [{"name": "B", "value": "1"}, {"name": "A", "value": "2"}]
                    },
                },
                {"targetNodes": "0:0"},
            ]
        }
    }
    result = with_overrides(gang(), submit)
    ps, workers = result["nodeProperties"]["nodeRangeProperties"]
    assert ps["container"]["environment"] == []
    assert workers["container"]["environment"] == [
        {"name": "A", "value": "2"},
        {"name": "B", "value": "1"},
    ]
    assert with_overrides(gang(), {}) == gang()


def test_a_container_jobs_overrides_reach_its_one_node():
    one = as_one_node(COPY, {})
    submit = {"containerOverrides": {"environment": [{"name": "C", "value": "3"}]}}
    (node,) = with_overrides(one, submit)["nodeProperties"]["nodeRangeProperties"]
    assert node["container"]["environment"] == [
        {"name": "A", "value": "1"},
        {"name": "C", "value": "3"},
    ]
    assert with_overrides(one, {"containerOverrides": {}}) == one


def test_an_override_for_a_range_the_definition_lacks_is_one_whole_line():
    submit = {"nodeOverrides": {"nodePropertyOverrides": [{"targetNodes": "2:3"}]}}
    with pytest.raises(UsageError) as info:
        with_overrides(gang(), submit)
    assert str(info.value) == (
        "nodeOverrides: targetNodes 2:3 is none of the job definition's node ranges (0:0, 1:)"
    )


def test_environment_goes_to_the_named_range_only_and_keeps_what_it_had():
    result = with_environment(gang(), {"C": "9"}, "0:0")
    ps, workers = result["nodeProperties"]["nodeRangeProperties"]
    assert ps["container"]["environment"] == [{"name": "C", "value": "9"}]
    assert workers["container"]["environment"] == [{"name": "B", "value": "0"}]
    no_env = {"nodeProperties": {"nodeRangeProperties": [{"targetNodes": "0:", "container": {}}]}}
    (only,) = with_environment(no_env, {"C": "9"})["nodeProperties"]["nodeRangeProperties"]
    assert only["container"]["environment"] == [{"name": "C", "value": "9"}]
