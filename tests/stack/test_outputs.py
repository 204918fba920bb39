"""Reading the stack: states, schema versions and missing outputs are refused clearly."""

from __future__ import annotations

import pytest

from launcher.errors import UsageError
from launcher.stack.cluster import from_stack
from launcher.stack.outputs import Egress, OutputKey


def stack(status="CREATE_COMPLETE", drop=(), **values):
    outputs = {k.value: k.example for k in OutputKey}
    outputs.update(values)
    return {
        "StackName": "EfaBatch",
        "StackStatus": status,
        "Outputs": [
            {"OutputKey": k, "OutputValue": v} for k, v in outputs.items() if k not in drop
        ],
    }


def test_parses_every_output():
    info = from_stack(stack(InstanceType="p5.48xlarge", MaxNodes="16"))
    assert (info.instance_type, info.max_nodes, info.scheduling_policy_arn) == (
        "p5.48xlarge",
        16,
        None,
    )
    assert (info.internet_egress, info.pull_through_cache, info.registry_secrets) == (
        Egress.NONE,
        {"ecr-public": "public.ecr.aws"},
        {},
    )


def test_unknown_internet_egress_is_refused():
    with pytest.raises(UsageError, match="output InternetEgress is 'maybe'"):
        from_stack(stack(InternetEgress="maybe"))


@pytest.mark.parametrize("status", ["CREATE_IN_PROGRESS", "ROLLBACK_COMPLETE", "DELETE_FAILED"])
def test_incomplete_stack_is_refused(status):
    with pytest.raises(UsageError, match=f"state {status}; the launcher needs one of"):
        from_stack(stack(status))


def test_missing_outputs_are_named():
    with pytest.raises(UsageError, match="missing outputs JobQueueArn, LogGroupName"):
        from_stack(stack(drop=("JobQueueArn", "LogGroupName")))


def test_other_schema_version_is_refused():
    with pytest.raises(UsageError, match="output schema version 0; this launcher reads"):
        from_stack(stack(SchemaVersion="0"))


def test_every_output_renders_what_it_parses():
    """One declaration per output: what the stack renders, the launcher parses back."""
    for key in OutputKey:
        assert key.render(key.parse(key.example)) == key.example, key


def test_non_integer_output_is_refused():
    with pytest.raises(UsageError, match="output MaxNodes is not an integer"):
        from_stack(stack(MaxNodes="many"))
