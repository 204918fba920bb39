"""The test tiers hold: a test is marked for what its fixtures start, and a test reaches
nothing it is not marked for (so none slips into the fast tier), checked on real pytest runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from devenv.processes import SERVICES, NotAllowed, allowed
from devenv.registry_server import RegistryServer
from devenv.synth import synthesize
from tests.conftest import ROOT
from tests.support import tiers
from tests.support.processes import REQUIRE_ALL

INNER_CONFTEST = """
from tests.conftest import *  # noqa: F403 - the suite's fixtures and tier hooks
"""
INNER_TESTS = """
import pytest


def test_uses_the_emulator(moto_server):
    pass


def test_needs_nothing():
    pass


def test_reaches_the_registry_unmarked(request):
    request.getfixturevalue("registry")


def test_uses_the_registry(registry):
    pass


def test_builds_constructs_unmarked():
    import aws_cdk as cdk

    cdk.Stack(cdk.App(), "Unmarked")


@pytest.mark.cdk
def test_builds_constructs_marked():
    import aws_cdk as cdk

    cdk.Stack(cdk.App(), "Marked")
"""


def test_devenv_starts_only_the_services_named(monkeypatch, tmp_path):
    monkeypatch.setenv(SERVICES, "moto,docker")
    allowed("moto")
    with pytest.raises(NotAllowed, match="registry may not start here"):
        RegistryServer.start(tmp_path / "registry")
    assert not (tmp_path / "registry").exists()  # refused before anything was made
    with pytest.raises(NotAllowed, match="cdk may not start here"):
        synthesize({}, tmp_path / "cdk.out")
    monkeypatch.delenv(SERVICES)
    allowed("registry")  # unset: every service (the demo, the benchmarks)


def test_a_test_marked_for_nothing_starts_no_server_even_in_a_child_process():
    assert os.environ[SERVICES] == ""
    result = subprocess.run(
        [sys.executable, "-m", "devenv.emulator", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "NotAllowed: moto may not start here" in result.stderr


def test_a_test_marked_for_nothing_reaches_no_docker_engine():
    from launcher.docker_client import docker_client
    from launcher.errors import RemoteError

    assert os.environ["DOCKER_HOST"] == tiers.NO_ENGINE  # not the default socket either
    with pytest.raises(RemoteError, match="no Docker daemon"):
        docker_client()


@pytest.fixture
def inner(pytester, monkeypatch, pytestconfig):
    """A pytest project with the suite's conftest, markers and a few tests of its own."""
    tiers_ = (*tiers.NEEDS, tiers.FAST)
    markers = "\n    ".join(m for m in pytestconfig.getini("markers") if m.split(":")[0] in tiers_)
    pytester.makeini(f"[pytest]\naddopts = --strict-markers\nmarkers =\n    {markers}\n")
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TESTS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return pytester


def _selected(pytester, expression: str) -> set[str]:
    result = pytester.runpytest("--collect-only", "-q", "-m", expression)
    return {line.split("::")[1] for line in result.outlines if "::" in line}


def test_fixtures_mark_their_tests_and_the_rest_are_fast(inner):
    assert _selected(inner, "emulator") == {"test_uses_the_emulator"}
    assert _selected(inner, "docker") == {"test_uses_the_registry"}
    assert _selected(inner, "cdk") == {"test_builds_constructs_marked"}
    assert _selected(inner, "fast") == {
        "test_needs_nothing",
        "test_reaches_the_registry_unmarked",
        "test_builds_constructs_unmarked",
    }


def test_a_fast_test_that_reaches_a_service_fails_before_it_starts(inner):
    result = inner.runpytest_subprocess("-m", "fast", "-k", "not constructs")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*NotAllowed: registry may not start here*"])


@pytest.mark.cdk  # aws-cdk-lib on Node.js, in the inner runs
def test_a_fast_test_that_builds_constructs_fails(inner):
    result = inner.runpytest_subprocess("-k", "constructs")
    result.assert_outcomes(passed=1, failed=1)
    failure = ["*_ test_builds_constructs_unmarked _*", "*Unmarked: this test made * objects*"]
    result.stdout.fnmatch_lines(failure)


@pytest.mark.parametrize(
    "ci, make_test, outcome",
    [("true", "", "errors"), ("false", "1", "errors"), ("false", "", "skipped")],
)
def test_a_missing_registry_fails_under_ci_and_make_test_and_is_skipped_elsewhere(
    inner, monkeypatch, ci, make_test, outcome
):
    """`make test` installs every service, so a missing one fails it as it fails CI; only a
    developer's own pytest run skips."""
    monkeypatch.setenv("CI", ci)
    monkeypatch.setenv(REQUIRE_ALL, make_test)
    monkeypatch.setenv("PATH", str(inner.mkdir("no-programs")))  # no docker-registry
    result = inner.runpytest_subprocess("-k", "test_uses_the_registry")
    result.assert_outcomes(**{outcome: 1})
