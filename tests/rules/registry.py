"""A rule is a check with the AWS page that governs it; the registry keeps them in one list.

Each rule's docstring quotes its source; ``covers`` names the template properties (or job
definition fields) whose runtime behaviour it pins down, so that a property the project sets
without a rule is caught (``tests/test_aws_rules.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rule:
    name: str
    check: Callable[[Any], list[str]]
    source: str
    covers: tuple[str, ...]
    kind: str  # "stack" (a Deployment) | "job" (a RegisterJobDefinition request + cluster)

    @property
    def doc(self) -> str:
        return self.check.__doc__ or ""


RULES: list[Rule] = []


def rule(*, source: str, covers: tuple[str, ...] = (), kind: str = "stack"):
    def register(check: Callable[[Any], list[str]]) -> Callable[[Any], list[str]]:
        if not check.__doc__ or source not in check.__doc__:
            raise ValueError(f"rule {check.__name__}: its docstring must cite {source}")
        RULES.append(Rule(check.__name__, check, source, covers, kind))
        return check

    return register
