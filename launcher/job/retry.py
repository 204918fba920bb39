"""AWS Batch's retry decision, for the local backend to follow the same rules.

RetryStrategy.evaluateOnExit (Batch API reference): the first entry whose every condition
matches decides RETRY or EXIT; "If none of the listed conditions match, then the job is
retried". A pattern may end with ``*`` so that only its start must match; otherwise the whole
string must. Attempts count every run, the first included.
"""

from __future__ import annotations

from typing import Any


def _matches(pattern: str | None, value: str | None) -> bool:
    if pattern is None:
        return True
    value = value or ""
    if pattern.endswith("*"):
        return value.startswith(pattern[:-1])
    return value == pattern


def action(
    strategy: dict[str, Any],
    *,
    status_reason: str | None,
    reason: str | None,
    exit_code: int | None,
) -> str:
    """RETRY or EXIT for an attempt that failed."""
    for entry in strategy.get("evaluateOnExit", []):
        if (
            _matches(entry.get("onStatusReason"), status_reason)
            and _matches(entry.get("onReason"), reason)
            and _matches(entry.get("onExitCode"), None if exit_code is None else str(exit_code))
        ):
            decision: str = entry["action"].upper()
            return decision
    return "RETRY"


def retries(
    strategy: dict[str, Any],
    attempt: int,
    *,
    status_reason: str | None,
    reason: str | None,
    exit_code: int | None,
) -> bool:
    """Whether a failed ``attempt`` (1-based) is followed by another."""
    return (
        attempt < strategy.get("attempts", 1)
        and action(strategy, status_reason=status_reason, reason=reason, exit_code=exit_code)
        == "RETRY"
    )
