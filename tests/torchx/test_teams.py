"""The TorchX front door on a stack with teams (cdk.json's teams environment on the moto
server): ``-cfg team`` chooses the team as ``--team`` does, and each refusal reads in TorchX's
words (``-cfg pool=...``, ``-cfg team=NAME``), one line, nothing submitted."""

from __future__ import annotations

import pytest

from launcher.stack.teams import TEAM_TAG, team_definition_prefix
from tests.torchx.test_options import one_line, request, submitted, torchx
from tests.torchx.test_options import venv as venv  # noqa: F401 (the fixture, re-exported)
from tests.torchx.test_scheduler import on_one_line

pytestmark = pytest.mark.torchx


@pytest.fixture(scope="module")
def stack(moto_server, synth_teams):
    moto_server.reset()
    moto_server.deploy(synth_teams.outdir, synth_teams.stack_names)
    return synth_teams.config.stack_name


def test_cfg_team_submits_as_the_team(venv, stack, moto_server, tmp_path):
    submit = request(torchx(venv, moto_server, tmp_path, cfg=f"stack={stack},team=vision"))
    assert submit["submitJob"]["tags"][TEAM_TAG] == "vision"
    assert submit["submitJob"]["shareIdentifier"] == "vision"
    name = submit["registerJobDefinition"]["jobDefinitionName"]
    assert name.startswith(team_definition_prefix("vision"))


@on_one_line
@pytest.mark.parametrize(
    ("cfg", "line"),
    [
        (
            "team=vision,pool=llm-cb",
            "-cfg pool=llm-cb: team vision may submit to pools default, cpu; llm-cb is llm's",
        ),
        (
            "team=vision,share_id=llm",
            "-cfg share_id=llm: team vision submits with its own share id, vision (llm is team "
            "llm's); leave it out",
        ),
        (
            "",
            "stack EfaBatch has teams llm, speech, vision: choose yours with -cfg team=NAME or "
            "LAUNCHER_TEAM=NAME",
        ),
        (
            "team=robotics",
            "-cfg team=robotics: stack EfaBatch has no such team; its teams: llm, speech, vision",
        ),
    ],
)
def test_refusals_read_in_torchx_words(venv, stack, moto_server, tmp_path, cfg, line):
    before = submitted(moto_server)
    given = f"stack={stack}" + (f",{cfg}" if cfg else "")
    result = torchx(venv, moto_server, tmp_path, cfg=given, dryrun=False)
    assert one_line(result) == line
    assert submitted(moto_server) == before
