"""cdk.json's ``teams`` environment (vision, speech, llm) synthesized once per test session, as
``cdk synth`` does (cdk-nag on), and the pieces of its templates the team tests read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import cdk_context

_SYNTHESIZED: dict[str, Any] = {}


def synth_teams(tmp_path_factory) -> Any:
    if "teams" not in _SYNTHESIZED:
        from devenv.synth import synthesize

        out: Path = tmp_path_factory.mktemp("cdk-teams")
        _SYNTHESIZED["teams"] = synthesize(cdk_context(env="teams"), out)
    return _SYNTHESIZED["teams"]


def resource_id(template: dict, prefix: str, type_: str) -> str:
    """The one logical id of ``type_`` that starts with ``prefix``."""
    (found,) = [
        k for k, v in template["Resources"].items() if k.startswith(prefix) and v["Type"] == type_
    ]
    return found


def role_documents(template: dict, role_prefix: str) -> list[dict]:
    """The inline policy documents attached to the role whose logical id starts so."""
    role = resource_id(template, role_prefix, "AWS::IAM::Role")
    return [
        v["Properties"]["PolicyDocument"]
        for v in template["Resources"].values()
        if v["Type"] == "AWS::IAM::Policy" and {"Ref": role} in v["Properties"]["Roles"]
    ]


def user_policy(template: dict, team: str) -> dict:
    name = "Team" + "".join(p.capitalize() for p in team.split("-"))
    found = resource_id(template, f"{name}UserPolicy", "AWS::IAM::ManagedPolicy")
    document: dict = template["Resources"][found]["Properties"]["PolicyDocument"]
    return document
