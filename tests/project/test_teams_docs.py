"""docs/teams.md, the platform team's runbook, held to what it describes: its cdk.json entry
is cdk.json's `teams` environment, and its onboarding steps run against the emulator
(tests/project/test_demo.py runs them and compares the refusals with the page's lines)."""

from __future__ import annotations

import json

from tests.conftest import ROOT
from tests.support import examples

PAGE = ROOT / "docs" / "teams.md"


def test_the_pages_teams_entry_is_cdk_jsons_teams_environment():
    (shown,) = [b for b in examples.blocks(PAGE) if b.lang == "json"]
    entry = json.loads("{" + shown.text + "}")
    environment = json.loads((ROOT / "cdk.json").read_text())["context"]["environments"]["teams"]
    assert entry == {key: environment[key] for key in entry}


def test_the_onboarding_runs_on_the_emulator_as_written():
    """Deployed with the one documented command, then the announcement's dry run as vision and
    vision's refusals (llm's secret, llm's pool, no team picked), then the emulator stopped:
    all run by the tests, none marked not run."""
    run = [b for b in examples.blocks(PAGE) if b.lang == "console" and b.not_run is None]
    commands = [c for b in run for c in b.commands()]
    assert commands[0].startswith("python -m devenv.emulator deploy -c env=teams --region ")
    assert commands[1] == "source .emulator/env"
    assert "export LAUNCHER_TEAM=vision" in commands
    assert any("--secret HF_TOKEN=llm/" in c for c in commands)
    assert any("--pool llm-cb" in c for c in commands)
    assert commands[-1] == "python -m devenv.emulator stop"
    refusals = [x for b in run for x in b.text.splitlines() if x.startswith("launcher: error:")]
    assert len(refusals) == 3
    not_run = [b.not_run for b in examples.blocks(PAGE) if b.not_run is not None]
    assert all("account" in why for why in not_run), not_run  # only what needs a real one
