"""How the launcher registers with TorchX, through the real ``torchx`` CLI on both lines: it adds
``efa_batch`` and changes nothing for a user who never names it.

TorchX's default scheduler is the first it finds: TorchX 0.7.0's ``get_default_scheduler_name``
is the first key of ``get_scheduler_factories()``, the ``torchx.schedulers`` entry points in
file order once any exists (torchx/schedulers/__init__.py, torchx/util/entrypoints.py
``load_group``); nightly puts registered plugins first (torchx/schedulers/__init__.py,
torchx/plugins/_registry.py ``_find``). setup.py keeps pyproject.toml's order in
entry_points.txt, which setuptools would sort (``aws_batch`` first).
"""

from __future__ import annotations

import re

import pytest

from tests.support import tiers
from tests.support.processes import required_or_skip
from tests.torchx import test_scheduler as shared
from tests.torchx.test_scheduler import VENVS, python, run

pytestmark = pytest.mark.torchx

# TorchX 0.7.0's DEFAULT_SCHEDULER_MODULES, in its order, then ours.
ORDER = [
    "local_docker",
    "local_cwd",
    "slurm",
    "kubernetes",
    "kubernetes_mcad",
    "aws_batch",
    "aws_sagemaker",
    "gcp_batch",
    "ray",
    "lsf",
    "efa_batch",
]
BUILTINS_070 = {"local_docker", "local_cwd", "slurm", "kubernetes", "aws_batch", "ray", "lsf"}
BUILTINS_NIGHTLY = {"local_docker", "local_cwd", "slurm", "kubernetes"}
# What torchx-nightly 2026.10.26 removed from 0.7.0's DEFAULT_SCHEDULER_MODULES.
REMOVED_IN_NIGHTLY = ["kubernetes_mcad", "aws_batch", "aws_sagemaker", "gcp_batch", "ray", "lsf"]
NIGHTLY = "2026.10.26"
AWS_BATCH_LINE = (
    f"scheduler aws_batch is not part of TorchX {NIGHTLY}; its AWS Batch users: -s efa_batch"
)
SCHEDULERS = "from torchx.schedulers import get_scheduler_factories as f; print(list(f()))"
DEFAULT = "from torchx.schedulers import get_default_scheduler_name as d; print(d())"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


# test_scheduler's fixtures: each TorchX venv in turn, and the moto stack.
venv = shared.venv
stack = shared.stack


@pytest.fixture
def nightly():
    tiers.require("torchx")
    path = VENVS["torchx-nightly"]
    if not (path / "bin" / "torchx").exists():
        required_or_skip("torchx-nightly is not installed (make deps)")
    return path


def test_installing_it_keeps_every_builtin_scheduler(venv):
    """TorchX 0.7.0 shows only entry points once one exists (TorchX issue 1009)."""
    names = set(eval(python(venv, SCHEDULERS)))  # noqa: S307 - our own print of a list
    assert "efa_batch" in names
    assert (BUILTINS_070 if venv.name == ".venv-torchx" else BUILTINS_NIGHTLY) <= names


def test_the_default_scheduler_stays_torchxs_own(venv, tmp_path):
    """``local_docker``, as in a venv without the launcher, in ``torchx run --help`` too (its
    ``-s`` default and choices come from get_scheduler_factories, torchx/cli/cmd_run.py)."""
    assert python(venv, DEFAULT).strip() == "local_docker"
    assert eval(python(venv, SCHEDULERS)) == ORDER  # noqa: S307 - our own print of a list
    usage = run(venv, "torchx", "run", "--help", cwd=tmp_path)
    assert usage.returncode == 0, usage.stderr[-2000:]
    assert "[-s {" + ",".join(ORDER) + "}]" in " ".join(usage.stdout.split())


def test_a_run_without_a_scheduler_runs_on_local_docker(
    venv, docker_engine, registry, busybox_base, tmp_path
):
    """``torchx run utils.echo`` with no ``-s`` runs the job in the Docker engine, as plain
    TorchX does; before, 0.7.0 asked for aws_batch's ``queue`` and nightly failed. The image
    is the registry's busybox (TorchX's own image is on ghcr.io, out of reach here) and no
    workspace is built on it."""
    result = run(
        venv,
        "torchx",
        "run",
        "--workspace",
        "",
        "utils.echo",
        "--msg",
        "hello-from-the-default",
        "--image",
        busybox_base,
        env={"DOCKER_HOST": docker_engine.host},
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"^local_docker://torchx/echo-\w+$", result.stdout, re.M), result.stdout
    assert "hello-from-the-default" in result.stdout + result.stderr
    assert "queue" not in result.stderr and "Traceback" not in result.stderr


def test_runopts_lists_every_scheduler_without_a_traceback(venv, tmp_path):
    """nightly's ``torchx runopts`` catches ModuleNotFoundError per scheduler and prints
    "NAME: MESSAGE" (torchx/cli/cmd_runopts.py): each scheduler it removed is that line."""
    result = run(venv, "torchx", "runopts", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    out = ANSI.sub("", result.stdout)
    headings = [line.split(":", 1)[0] for line in out.splitlines() if re.match(r"^\w+:", line)]
    assert headings == ORDER
    if venv == VENVS["torchx-nightly"]:
        assert f"aws_batch: {AWS_BATCH_LINE}\n" in out
        for name in REMOVED_IN_NIGHTLY:
            assert f"{name}: scheduler {name} is not part of TorchX {NIGHTLY}" in out
    else:
        aws_batch = out.split("aws_batch:", 1)[1].split("aws_sagemaker:", 1)[0]
        assert "queue" in aws_batch  # 0.7.0's own aws_batch, untouched


def test_a_removed_scheduler_is_one_line_on_nightly(nightly, tmp_path):
    """nightly's ``torchx run`` creates the scheduler for its run options before its ``try``
    (torchx/cli/cmd_run.py ``_run_from_cli_args``), so the error is said by the launcher's
    ``sys.excepthook`` (launcher/torchx/builtins.py); ``--log_level DEBUG`` keeps the
    traceback."""
    ran = run(
        nightly,
        "torchx",
        "run",
        "-s",
        "aws_batch",
        "--dryrun",
        "utils.echo",
        "--msg",
        "hi",
        cwd=tmp_path,
    )
    assert (ran.returncode, ran.stdout, ran.stderr) == (1, "", AWS_BATCH_LINE + "\n")
    listed = run(nightly, "torchx", "list", "-s", "ray", cwd=tmp_path)
    assert (listed.returncode, listed.stderr) == (
        1,
        f"scheduler ray is not part of TorchX {NIGHTLY}\n",
    )
    opts = run(nightly, "torchx", "runopts", "aws_batch", cwd=tmp_path)
    assert opts.returncode == 0, opts.stderr[-2000:]
    assert ANSI.sub("", opts.stdout).strip() == f"aws_batch: {AWS_BATCH_LINE}"
    debug = run(
        nightly,
        "torchx",
        "--log_level",
        "DEBUG",
        "run",
        "-s",
        "aws_batch",
        "utils.echo",
        cwd=tmp_path,
    )
    assert debug.returncode == 1 and "Traceback" in debug.stderr


def test_the_plugin_registry_finds_it_without_entry_points(nightly):
    """TorchX main's namespace channel alone (TORCHX_PLUGINS_SOURCE=1), with no errors, and
    TorchX's default still first: the plugin module registers ``local_docker`` ahead of
    ``efa_batch`` (torchx_plugins/schedulers/efa_batch.py says why)."""
    env = {"TORCHX_PLUGINS_SOURCE": "1"}
    names = eval(python(nightly, SCHEDULERS, env))  # noqa: S307
    assert set(names) == BUILTINS_NIGHTLY | {"efa_batch"}
    assert python(nightly, DEFAULT, env).strip() == "local_docker"
    errors = "from torchx import plugins; print(plugins.registry().load_errors())"
    assert python(nightly, errors, env).strip() == "[]"
    assert python(nightly, errors).strip() == "[]"  # no cross-channel collision either


def test_no_credentials_chatter_on_efa_batch_commands(venv, stack, moto_server, tmp_path):
    """TorchX's CLI logs at INFO (torchx/cli/main.py ``run_main``: ``logging.basicConfig``),
    where botocore says "Found credentials in environment variables." on every command."""
    result = run(venv, "torchx", "list", "-s", "efa_batch", env=moto_server.env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Found credentials" not in result.stderr
    assert "botocore" not in result.stderr
