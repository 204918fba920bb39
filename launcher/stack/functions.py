"""Where the Python functions' payloads and results live in the stack's function bucket
(``OutputKey.FUNCTION_BUCKET``): one prefix per team, so IAM can keep each team's jobs to
their own (infra/function_payloads.py grants exactly these), and one directory per call.

Pure: no I/O. The key of a call is unguessable (128 random bits): jobs of one team share a
role, so a call's name is what keeps another job of the team from finding it.
"""

from __future__ import annotations

FUNCTIONS_PREFIX = "functions/"


def payload_prefix(team: str | None) -> str:
    """``functions/`` in a stack without teams, ``functions/TEAM/`` for a team's calls. Every
    prefix ends in ``/``: IAM compares keys as plain strings, so ``functions/vision`` would also
    match ``functions/vision-x/`` (TRAPS: ``s3:prefix`` is a plain string prefix)."""
    return FUNCTIONS_PREFIX if team is None else f"{FUNCTIONS_PREFIX}{team}/"
