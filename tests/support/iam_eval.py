"""A small IAM policy evaluation, for tests that ask what a synthesized policy allows.

No library on PyPI evaluates identity policies offline and is kept up (policyuniverse expands
and minimizes actions, parliament lints; neither decides a request). This keeps to what the
stack's documents use, as the IAM user guide's evaluation logic says it
(reference_policies_evaluation-logic.html): an explicit Deny wins, else an Allow is needed,
else the request is implicitly denied; an action with several resources (SubmitJob: the job
queue and the job definition) needs every one allowed. Actions match case-insensitively with
* and ?; resources with * and ? (reference_policies_elements_resource.html); conditions with
StringEquals, StringLike, ArnEquals, ArnLike, Bool and Null, each ``...IfExists`` variant,
all operators and keys of a statement ANDed and the values of a key ORed; a condition key
the request lacks fails every operator but Null and the IfExists ones
(reference_policies_elements_condition_operators.html).

Templates hold CloudFormation expressions; ``render`` writes each as a stable string (``Ref``
X as ``<X>``, ``GetAtt`` X.A as ``<X.A>``, ``ImportValue`` N as ``<import:N>``, the pseudo
parameters as the stack's values), so a request names a resource as the template does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

PSEUDO = {"AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012"}


def render(value: Any) -> Any:
    """A template value with its expressions written as strings (module docstring)."""
    if isinstance(value, list):
        return [render(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((fn, arg),) = value.items()
        if fn == "Ref":
            return PSEUDO.get(arg, f"<{arg}>")
        if fn == "Fn::GetAtt":
            return f"<{arg[0]}.{arg[1]}>"
        if fn == "Fn::ImportValue":
            return f"<import:{arg}>"
        if fn == "Fn::Join":
            return str(arg[0]).join(str(render(p)) for p in arg[1])
    return {k: render(v) for k, v in value.items()}


@dataclass(frozen=True)
class Request:
    action: str
    resources: tuple[str, ...]
    context: Mapping[str, str] = field(default_factory=dict)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _glob(pattern: str, value: str, *, case: bool) -> bool:
    """IAM's wildcards: * any run of characters (':' and '/' too), ? one character."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in str(pattern))
    return re.fullmatch(regex, value, 0 if case else re.IGNORECASE) is not None


def _matches(operator: str, wanted: list[Any], actual: str | None) -> bool:
    base = operator.removesuffix("IfExists")
    if base == "Null":
        present = actual is not None
        return any(str(w).lower() == ("false" if present else "true") for w in wanted)
    if actual is None:
        return operator.endswith("IfExists")
    if base in ("StringEquals", "ArnEquals"):
        return actual in [str(w) for w in wanted]
    if base in ("StringLike", "ArnLike"):
        return any(_glob(str(w), actual, case=True) for w in wanted)
    if base == "Bool":
        return actual.lower() in [str(w).lower() for w in wanted]
    raise AssertionError(f"condition operator {operator} is not modelled here")


def _applies(statement: Mapping[str, Any], action: str, resource: str, context: Mapping) -> bool:
    if not any(_glob(a, action, case=False) for a in _as_list(statement["Action"])):
        return False
    if not any(_glob(r, resource, case=True) for r in _as_list(statement["Resource"])):
        return False
    for operator, keys in statement.get("Condition", {}).items():
        for key, wanted in keys.items():
            if not _matches(operator, _as_list(wanted), context.get(key)):
                return False
    return True


def statements_of(documents: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [s for d in documents for s in _as_list(render(d)["Statement"])]


def decide(documents: Iterable[Mapping[str, Any]], request: Request) -> str:
    """``allow``, ``deny`` (an explicit Deny) or ``implicit-deny``."""
    statements = statements_of(documents)
    for resource in request.resources:
        hits = [s for s in statements if _applies(s, request.action, resource, request.context)]
        if any(s["Effect"] == "Deny" for s in hits):
            return "deny"
        if not any(s["Effect"] == "Allow" for s in hits):
            return "implicit-deny"
    return "allow"


def allowed(documents: Iterable[Mapping[str, Any]], request: Request) -> bool:
    return decide(documents, request) == "allow"
