"""Every setting of docs/configuration.md, on its own and in the combinations the docs show,
synthesizes the way ``cdk synth`` and ``cdk deploy`` run the app: cdk-nag's AwsSolutions pack
on (its unacknowledged finding raises ValidationFailed inside the synth) and no error
annotation on any stack (the CDK CLI stops on one unless ``--ignore-errors``: "Ignores
synthesis errors, which will likely produce an invalid output", ``cdk --help``).

``ecs_exec=true`` once passed every test, which synthesized with the pack off, and failed
``cdk synth`` on AwsSolutions-IAM5: no test synthesizes any other way now
(devenv.synth.synth_app, infra.app.create_app), and this one walks every setting.
"""

from __future__ import annotations

import json
import re

import pytest

from infra.updates import UPDATES
from tests.conftest import ROOT, synth_templates

CONFIGURATION = ROOT / "docs" / "configuration.md"
# The settings the update table gives no example of: another account and Region (the docs'
# prod, whose zones cdk.json knows), another stack name.
_PROD_PLACE = {"account": "210987654321", "region": "us-west-2", "availability_zone": "us-west-2b"}
WITHOUT_EXAMPLE = {
    "account": _PROD_PLACE,
    "region": _PROD_PLACE,
    "stack_name": {"stack_name": "Vision"},
}


def documented_settings() -> set[str]:
    """The keys of the Settings table (a row may name several: `a`, `b` or `a` + `b`)."""
    section = CONFIGURATION.read_text().split("## Settings", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return {key for row in rows for key in re.findall(r"`([a-z_]+)`", row)}


def _cli_values(settings: dict) -> dict:
    """A docs block's JSON values as synth_templates takes them (lists as -c gives them)."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()}


def documented_environments() -> list[tuple[str, dict]]:
    """Every environment the docs show as a cdk.json block (``"NAME": {...}``), as the keys a
    reader adds to that environment of cdk.json."""
    found = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        blocks = re.findall(r"```json\n(.*?)```", page.read_text(), re.S)
        for number, block in enumerate(blocks, start=1):
            named = re.match(r'\s*"([a-z0-9-]+)":\s*(\{.*\})\s*$', block, re.S)
            if named:
                env, settings = named.group(1), json.loads(named.group(2))
                name = f"{page.stem}-block{number}-{env}"
                found.append((name, {"env": env, **_cli_values(settings)}))
    return found


def one_setting_cases() -> list[tuple[str, dict]]:
    """Each setting (and each key of fsx_lustre and part of a data bucket) changed on its own
    over the default environment: the update table's example, from its baseline."""
    cases = [(key, {**u.baseline, **u.example}) for key, u in UPDATES.items() if u.example]
    return cases + sorted(WITHOUT_EXAMPLE.items())


CASES = [("defaults", {}), *one_setting_cases(), *documented_environments()]


def test_every_documented_setting_is_walked():
    """A setting added to the table without a case here would go unsynthesized."""
    walked = {key for _, settings in CASES for key in settings}
    assert sorted(documented_settings() - walked) == []


def test_the_docs_environments_are_found():
    """The prod example and the pools example of configuration.md, getting-started's."""
    names = [name for name, _ in documented_environments()]
    assert names == [
        "configuration-block1-prod",
        "configuration-block2-prod",
        "getting-started-block1-prod",
    ]


@pytest.mark.cdk
@pytest.mark.parametrize(("name", "settings"), CASES, ids=[name for name, _ in CASES])
def test_the_setting_synthesizes_as_cdk_synth_does(name, settings, tmp_path_factory):
    stack = settings.get("stack_name", "EfaBatch")
    templates = synth_templates(tmp_path_factory, **settings)  # raises where cdk synth fails
    assert sorted(templates) == [stack, f"{stack}-Network", f"{stack}-Storage"]
