"""docs/torchx.md's migration table answers every ``aws_batch`` run option of TorchX 0.7.0,
read from 0.7.0's own scheduler (torchx/schedulers/aws_batch_scheduler.py ``_run_opts`` with
the Docker workspace's ``workspace_opts``), and ``efa_batch`` declares each of them, so a
``.torchxconfig`` written for ``aws_batch`` is answered rather than dropped."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT
from tests.support import tiers
from tests.support.processes import required_or_skip
from tests.torchx.test_scheduler import VENVS, python

pytestmark = pytest.mark.torchx

OPTIONS = (
    "from torchx.schedulers.{module} import create_scheduler\n"
    "print(' '.join(name for name, _ in create_scheduler('s').run_opts()))"
)
SECTION = "### Every `aws_batch` run option"


def _table_options() -> set[str]:
    text = (ROOT / "docs" / "torchx.md").read_text()
    section = text[text.index(SECTION) :].split("\n### ", 1)[0]
    return set(re.findall(r"^\| `([a-z_]+)` \|", section, re.MULTILINE))


def test_every_aws_batch_option_of_torchx_070_is_in_the_migration_table():
    tiers.require("torchx")
    venv = VENVS["torchx-0.7.0"]
    if not (venv / "bin" / "torchx").exists():
        required_or_skip(f"{venv.name} is not installed (make deps)")
    old = set(python(venv, OPTIONS.format(module="aws_batch_scheduler")).split())
    assert {"queue", "job_role_arn", "image_repo"} <= old  # what 0.7.0 is known to have
    assert _table_options() == old
    ours = set(
        python(
            venv,
            "from launcher.torchx.options import run_options as r\n"
            "print(' '.join(name for name, _ in r()))",
        ).split()
    )
    assert old <= ours, old - ours
