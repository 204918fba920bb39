"""The launcher's wheel, as pip builds it: what TorchX reads from its metadata.

TorchX takes the first ``torchx.schedulers`` entry point it finds as its default scheduler
(0.7.0: torchx/schedulers/__init__.py ``get_default_scheduler_name`` over
torchx/util/entrypoints.py ``load_group``; nightly: torchx/plugins/_registry.py ``_find``), and
setuptools writes entry_points.txt sorted by name (setuptools/_entry_points.py ``render``), so
setup.py puts pyproject.toml's order back. tests/torchx/test_registration.py checks the
editable installs in the TorchX venvs; this checks a wheel, what a user's ``pip install`` gets.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import tomllib

from tests.conftest import ROOT

# What the metadata is made from: the packages' code changes no entry point, and without it
# the build takes a second instead of six.
SOURCES = ["pyproject.toml", "setup.py", "README.md"]


def test_the_wheel_lists_torchxs_schedulers_in_pyprojects_order(tmp_path):
    """``local_docker`` first (TorchX's own default), ``efa_batch`` last; built from a copy,
    so the checkout gets no build/ directory."""
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        shutil.copy2(ROOT / name, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (path,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = archive.read(path).decode()
    section = text.split("[torchx.schedulers]\n", 1)[1].split("\n\n", 1)[0]
    names = [line.split("=", 1)[0].strip() for line in section.splitlines()]
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert names == list(declared["torchx.schedulers"])
    assert names[0] == "local_docker" and names[-1] == "efa_batch"
    assert "[console_scripts]\nlauncher = launcher.cli.main:run\n" in text  # the rest kept
