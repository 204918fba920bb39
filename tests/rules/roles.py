"""IAM trust shared by the rules: who may assume a role, and template text helpers."""

from __future__ import annotations

import json
import re

from tests.rules.deployment import Deployment, Resource
from tests.rules.registry import Page

EXECUTION_ROLE_TRUST = Page(
    "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task_execution_IAM_role.html",
    "The task execution role grants the Amazon ECS container and Fargate agents permission to "
    "make AWS API calls on your behalf.",
)
CONFUSED_DEPUTY = Page(
    "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-iam-roles.html",
    "It is recommended that you use the aws:SourceAccount or aws:SourceArn condition keys to "
    "scope the permissions further to prevent the confused deputy security issue.",
)


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def template_text(d: Deployment, value) -> str:
    """A template string expression as text: pseudo parameters filled in, other references as
    <LogicalId> or <import name>."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((fn, arg),) = value.items()
        if fn == "Fn::Join":
            return arg[0].join(template_text(d, v) for v in arg[1])
        if fn == "Ref":
            pseudo = {
                "AWS::Partition": "aws",
                "AWS::Region": d.config.region,
                "AWS::AccountId": d.config.account,
                "AWS::URLSuffix": "amazonaws.com",
            }
            return pseudo.get(arg, f"<{arg}>")
        if fn == "Fn::Sub" and isinstance(arg, str):
            return re.sub(r"\$\{([^}]+)\}", lambda m: template_text(d, {"Ref": m[1]}), arg)
        if fn == "Fn::ImportValue":
            return f"<import {arg}>"
        if fn == "Fn::GetAtt":
            return f"<{'.'.join(as_list(arg))}>"
    return json.dumps(value)


def trust_statements(role: Resource) -> list[dict]:
    return as_list(role.props.get("AssumeRolePolicyDocument", {}).get("Statement", []))


def trusts(role: Resource, service: str) -> bool:
    return any(
        s.get("Effect") == "Allow" and service in as_list(s.get("Principal", {}).get("Service"))
        for s in trust_statements(role)
    )


def ecs_trust_problems(
    d: Deployment, role: Resource | None, what: str, *, task_role: bool
) -> list[str]:
    """ECS tasks may assume the role; a task (job) role only for tasks of this account and
    region (the conditions the ECS guide recommends for task roles), an execution role with
    the unconditioned trust the ECS and Batch guides document for execution roles."""
    if role is None or role.type != "AWS::IAM::Role":
        return [f"{what}: the output names no role of the stacks"]
    problems = []
    if not trusts(role, "ecs-tasks.amazonaws.com"):
        problems.append(f"{what}: not assumable by ecs-tasks.amazonaws.com")
    conditions = [s.get("Condition", {}) for s in trust_statements(role)]
    if not task_role:
        if any(conditions):
            problems.append(
                f"{what}: trust conditions AWS documents for task roles, not execution roles"
            )
        return problems
    accounts = [c.get("StringEquals", {}).get("aws:SourceAccount") for c in conditions]
    sources = [template_text(d, c.get("ArnLike", {}).get("aws:SourceArn", "")) for c in conditions]
    ecs = f"arn:aws:ecs:{d.config.region}:{d.config.account}:"
    if d.config.account not in accounts or not any(s.startswith(ecs) for s in sources):
        problems.append(f"{what}: trust not limited to ECS tasks of this account and region")
    return problems


AWS_MANAGED = "arn:aws:iam::aws:policy/"


def aws_managed_document(arn: str) -> dict | None:
    """An AWS managed policy's current default version, as moto bundles AWS's documents (its
    copy of AmazonEC2ContainerServiceforEC2Role is v10 of 2026-02-12, as the AWS managed policy
    reference gives it); None for a policy that is not AWS's or that moto does not carry."""
    if not arn.startswith(AWS_MANAGED):
        return None
    from moto.iam.aws_managed_policies import aws_managed_policies_data

    name = arn.removeprefix(AWS_MANAGED).rsplit("/", 1)[-1]
    found = json.loads(aws_managed_policies_data).get(name)
    return found["Document"] if found else None


def iam_glob(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    """IAM's wildcards: * any run of characters, ? exactly one, the rest literal."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.S | (re.I if ignore_case else 0)) is not None


def action_matches(pattern: str, action: str) -> bool:
    """IAM's Action matching, which ignores case."""
    return iam_glob(pattern, action, ignore_case=True)


def reachable_statements(d: Deployment, role: Resource) -> tuple[list[dict], list[str]]:
    """Every statement a role's policies hold, its managed policies' included, and the managed
    policies whose document cannot be seen (so nothing can be said of them)."""
    statements = list(d.role_statements(role))
    unseen = []
    for value in role.props.get("ManagedPolicyArns", []):
        arn = template_text(d, value)
        document = aws_managed_document(arn)
        if document is None:
            unseen.append(arn)
            continue
        statements += as_list(document.get("Statement", []))
    return statements, unseen
