"""The retry decision the local backend makes as Batch would, rule by rule: evaluateOnExit read
in order, the first match decides, attempts run out (launcher/job/retry.py). Its rules were
pinned one by one where mutation testing (``make mutation``) found changes no test noticed."""

from __future__ import annotations

import pytest

from launcher.job import retry

CANNOT_PULL = "CannotPullContainerError: pull image manifest has been retried 5 time(s)"


def decide(strategy: dict, *, status_reason=None, reason=None, exit_code=None) -> str:
    return retry.action(strategy, status_reason=status_reason, reason=reason, exit_code=exit_code)


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        (CANNOT_PULL, "EXIT"),  # the rule's pattern matches the attempt's reason
        ("OutOfMemoryError: Container killed due to memory usage", "RETRY"),  # it does not
        (None, "RETRY"),  # no reason at all matches no pattern but "*"
    ],
)
def test_an_on_reason_rule_decides_only_for_the_reasons_it_names(reason, expected):
    """A rule that ends jobs whose image cannot be pulled must not end every other failure
    too: the guard against a decision that ignores onReason (or the attempt's reason)."""
    strategy = {"attempts": 3, "evaluateOnExit": [{"onReason": "CannotPull*", "action": "EXIT"}]}
    assert decide(strategy, reason=reason) == expected
    assert retry.retries(strategy, 1, status_reason=None, reason=reason, exit_code=1) is (
        expected == "RETRY"
    )


def test_a_prefix_pattern_needs_its_whole_prefix():
    """``Host EC2*`` is the prefix "Host EC2": a reason that shares all but its last character
    is another reason (the guard against a pattern cut one character short)."""
    strategy = {"evaluateOnExit": [{"onStatusReason": "Host EC2*", "action": "EXIT"}]}
    assert decide(strategy, status_reason="Host EC2 (instance i-0a) terminated.") == "EXIT"
    assert decide(strategy, status_reason="Host EC (a typo of a reason)") == "RETRY"


def test_a_pattern_never_matches_a_missing_value_except_star():
    """An attempt with no status reason (a job that never started) is the empty string to a
    pattern: neither a literal nor a prefix pattern matches it."""
    for pattern in ("X*", "XXXX", "None", "N*"):
        strategy = {"evaluateOnExit": [{"onStatusReason": pattern, "action": "EXIT"}]}
        assert decide(strategy, status_reason=None) == "RETRY", pattern
    assert decide({"evaluateOnExit": [{"onStatusReason": "*", "action": "EXIT"}]}) == "EXIT"


def test_an_exit_code_rule_never_matches_an_attempt_without_one():
    """A host lost before the container ran has no exit code: a rule on exit code 1 must not
    end it ("None" is not a code)."""
    strategy = {"evaluateOnExit": [{"onExitCode": "1*", "action": "EXIT"}]}
    assert decide(strategy, exit_code=None) == "RETRY"
    assert decide(strategy, exit_code=137) == "EXIT"
    assert decide({"evaluateOnExit": [{"onExitCode": "None", "action": "EXIT"}]}) == "RETRY"


def test_without_rules_every_failure_is_retried_while_attempts_remain():
    """A strategy with no evaluateOnExit retries ("If none of the listed conditions match,
    then the job is retried"), and one without attempts runs once (Batch's default: 1)."""
    assert decide({"attempts": 2}, reason="anything", exit_code=1) == "RETRY"
    assert retry.retries({"attempts": 2}, 1, status_reason=None, reason=None, exit_code=1)
    assert not retry.retries({}, 1, status_reason=None, reason=None, exit_code=1)
