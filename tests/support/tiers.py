"""Test tiers: what a test needs beyond Python and the installed packages, as pytest markers.

A test is marked for what it needs (the markers are registered in pyproject.toml):
automatically when it uses a fixture that starts a service or synthesizes (``FIXTURES``),
explicitly where it reaches something itself. A test with none of them is marked ``fast``:
that tier needs nothing and is the inner loop (``make test-fast``, ``pytest -m fast``).

A test reaches only what it is marked for, in every run, so none can slip into ``fast``:

- devenv refuses to start a service (or synthesize) unless ``DEVENV_SERVICES`` names it, and
  ``phase`` sets it from the test's marks (a process the test starts inherits it); a test not
  marked ``docker`` gets a DOCKER_HOST where no engine listens;
- ``require(mark)`` guards the rest where the tests reach it (the CDK CLI, the TorchX and
  checkov venvs, the Covalent venv, torch);
- a test not marked ``cdk`` that makes aws-cdk-lib create objects (a construct tree, in any
  way) fails; importing aws-cdk-lib (the infra modules' constants) is allowed.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from devenv.processes import SERVICES

NEEDS = ("emulator", "docker", "cdk", "torchx", "covalent", "torch", "checkov")
FAST = "fast"
# What devenv may start (DEVENV_SERVICES) for each mark.
SERVICES_OF = {"emulator": ("moto",), "docker": ("docker", "registry"), "cdk": ("cdk",)}
# DOCKER_HOST for a test not marked docker: a socket that cannot exist.
NO_ENGINE = "unix:///nonexistent/no-docker-engine-for-this-test.sock"
# Fixtures (in tests/conftest.py) and the mark a test that uses them, directly or through
# another fixture, gets; every ``synth_*`` fixture is ``cdk``.
FIXTURES = {
    "moto_server": "emulator",
    "docker_engine": "docker",
    "registry": "docker",
    "auth_registry": "docker",
}


class Unmarked(Exception):
    """A test reached something its marks do not name."""


_marks: frozenset[str] | None = None  # of the test running now; None outside a test


def fixture_marks(fixturenames: list[str]) -> set[str]:
    return {FIXTURES[f] for f in fixturenames if f in FIXTURES} | {
        "cdk" for f in fixturenames if f.startswith("synth_")
    }


def check_registered(registered: list[str]) -> None:
    """Every tier is a registered marker (``--strict-markers`` then refuses misspellings)."""
    names = {line.split(":", 1)[0].strip() for line in registered}
    missing = [m for m in (*NEEDS, FAST) if m not in names]
    if missing:
        raise ValueError(f"markers not registered in pyproject.toml: {', '.join(missing)}")


def mark(items) -> None:
    """Add the marks the fixtures imply, then ``fast`` to every test that needs nothing."""
    import pytest

    for item in items:
        if item.get_closest_marker(FAST) is not None:
            raise Unmarked(f"{item.nodeid}: `fast` is set automatically, never by hand")
        for name in sorted(fixture_marks(item.fixturenames)):
            item.add_marker(getattr(pytest.mark, name))
        if not needs(item):
            item.add_marker(pytest.mark.fast)


# The longest files of `make test` (its --durations, 2026-11-28: the docs examples about 330 s,
# the rest 40-100 s each), longest first.
LONGEST_FILES = (
    "tests/project/test_demo.py",
    "tests/torchx/test_ddp_local.py",
    "tests/node/test_restarts.py",
    "tests/project/test_emulate_region.py",
    "tests/copyjob/test_base_copy.py",
    "tests/infra/test_checks.py",
)


def longest_files_first(items: list) -> list:
    """The tests in their order, LONGEST_FILES' first. `make test` hands each worker a file at
    a time (xdist --dist loadfile, --no-loadscope-reorder): xdist's own order puts the files
    with the most tests first, so the docs examples (13 tests, minutes) started last and kept
    one worker busy long after the other had finished."""

    def rank(item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return LONGEST_FILES.index(path) if path in LONGEST_FILES else len(LONGEST_FILES)

    return sorted(items, key=rank)


def needs(item) -> set[str]:
    return {m.name for m in item.iter_markers()} & set(NEEDS)


def require(mark: str) -> None:
    """Raise Unmarked if the running test is not marked ``mark`` (outside a test: no-op)."""
    if _marks is not None and mark not in _marks:
        raise Unmarked(f"this test needs {mark}: mark it @pytest.mark.{mark}")


def _cdk_objects() -> int:
    """Objects aws-cdk-lib's jsii kernel holds (it never deletes one), 0 before it started."""
    if "jsii" not in sys.modules:
        return 0
    import jsii

    return jsii.kernel.stats().object_count


def environment(marks: frozenset[str]) -> dict[str, str]:
    """The variables a test's phase runs with: what devenv may start, and, unless the test is
    marked ``docker``, a DOCKER_HOST where no engine listens (so the launcher cannot reach a
    developer's own engine at the default socket either)."""
    env = {SERVICES: ",".join(s for m in sorted(marks) for s in SERVICES_OF.get(m, ()))}
    if "docker" not in marks:
        env["DOCKER_HOST"] = NO_ENGINE
    return env


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def phase(item) -> Iterator[None]:
    """A test's setup, call or teardown, limited to what the test is marked for."""
    global _marks
    marks = frozenset(needs(item))
    previous, _marks = _marks, marks
    before = _cdk_objects() if "cdk" not in marks else 0
    try:
        with _environ(environment(marks)):
            yield
    finally:
        _marks = previous
    if "cdk" not in marks and (made := _cdk_objects() - before) > 0:
        raise Unmarked(f"this test made {made} aws-cdk-lib objects: mark it @pytest.mark.cdk")
