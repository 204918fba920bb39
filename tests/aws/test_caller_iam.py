"""docs/security.md's table of what the launcher's user needs in IAM names every AWS action
the launcher calls: the table is what a platform team writes its users' policy from, and an
action missing there is an AccessDenied on a real account that no emulator shows (it once
lacked `ecs:DescribeTasks` and `ecs:ExecuteCommand`, which `launcher exec` calls).

Every AWS call of the launcher goes through launcher/aws/client.py (the page says so); its calls are
read from the source and each is named by the IAM action that authorizes it: the operation's
own name, unless botocore's model says another action does ("This operation requires
batch:TerminateJob permission for each job in the request. There is no separate
batch:TerminateJobs IAM action", TerminateJobs; "To delete an object from a bucket, you must
always specify the s3:DeleteObject permission", DeleteObjects).
"""

from __future__ import annotations

import ast
import re
from functools import cache

import botocore.session

from tests.conftest import ROOT

AWS_MODULE = ROOT / "launcher" / "aws" / "client.py"
SECTION = "## What the launcher's user needs in IAM"


@cache
def _model(service: str):
    return botocore.session.get_session().get_service_model(service)


def _client_service(node: ast.AST) -> str | None:
    """NAME of a ``self.client("NAME", ...)`` expression, else None."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "client"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        return str(node.args[0].value)
    return None


def _operation(service: str, method: str) -> str | None:
    names = {botocore.xform_name(op): op for op in _model(service).operation_names}
    return names.get(method)


def called_operations() -> set[tuple[str, str]]:
    """(service, operation) for every client method aws.py calls or pages through: on
    ``self.client("NAME")`` or a name bound to one in the same function; a method called on
    anything else (a client passed in) is the one service of the module that has it."""
    tree = ast.parse(AWS_MODULE.read_text())
    services = {s for node in ast.walk(tree) if (s := _client_service(node))}
    found = set()
    for function in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        bound = {
            target.id: service
            for node in ast.walk(function)
            if isinstance(node, ast.Assign) and (service := _client_service(node.value))
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(function):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            method, base = node.func.attr, node.func.value
            if method == "get_paginator" and isinstance(node.args[0], ast.Constant):
                method = node.args[0].value
            known = _client_service(base) or (
                bound.get(base.id) if isinstance(base, ast.Name) else None
            )
            owners = [known] if known else sorted(services)
            owners = [s for s in owners if _operation(s, method)]
            assert len(owners) <= 1, f"{method}: one of {owners}? call it on its own client"
            if owners:
                found.add((owners[0], str(_operation(owners[0], method))))
    return found


def action(service: str, operation: str) -> str:
    """The IAM action: the model's word where it names another, else service:Operation."""
    prefix = _model(service).signing_name
    documentation = re.sub(r"<[^>]+>", "", _model(service).operation_model(operation).documentation)
    other = re.search(
        rf"(?:requires|you must always specify the) ({prefix}:\w+) permission", documentation
    )
    return other.group(1) if other else f"{prefix}:{operation}"


def documented_actions() -> set[str]:
    page = (ROOT / "docs" / "security.md").read_text()
    table = page.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`([a-z0-9-]+:[A-Za-z*]+)`", table))


def test_the_calls_are_read_from_the_source():
    calls = called_operations()
    assert ("ecs", "ExecuteCommand") in calls and ("batch", "TerminateJobs") in calls
    assert ("batch", "ListJobs") in calls  # through a paginator
    assert action("batch", "TerminateJobs") == "batch:TerminateJob"
    assert action("logs", "FilterLogEvents") == "logs:FilterLogEvents"
    assert action("s3", "DeleteObjects") == "s3:DeleteObject"


def test_every_action_the_launcher_calls_is_in_the_users_table():
    missing = sorted({action(*call) for call in called_operations()} - documented_actions())
    assert missing == []
