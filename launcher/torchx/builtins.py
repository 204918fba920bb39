"""TorchX 0.7.0's own schedulers, re-registered beside ``efa_batch``.

TorchX 0.7.0 returns only the ``torchx.schedulers`` entry points once any exists (TorchX
issue 1009), so registering ``efa_batch`` alone would hide ``local_docker``, ``local_cwd`` and
the rest. The package declares each of 0.7.0's defaults again, pointing here, in 0.7.0's order
(TorchX's default scheduler is the first it finds; setup.py keeps the order); each loads the
TorchX module that 0.7.0 itself would load. Where that module is gone (torchx-nightly removed
``aws_batch`` and five others), the name says so in one line instead of a traceback.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any

# torchx.schedulers.DEFAULT_SCHEDULER_MODULES of TorchX 0.7.0, in its order.
MODULES = {
    "local_docker": "torchx.schedulers.docker_scheduler",
    "local_cwd": "torchx.schedulers.local_scheduler",
    "slurm": "torchx.schedulers.slurm_scheduler",
    "kubernetes": "torchx.schedulers.kubernetes_scheduler",
    "kubernetes_mcad": "torchx.schedulers.kubernetes_mcad_scheduler",
    "aws_batch": "torchx.schedulers.aws_batch_scheduler",
    "aws_sagemaker": "torchx.schedulers.aws_sagemaker_scheduler",
    "gcp_batch": "torchx.schedulers.gcp_batch_scheduler",
    "ray": "torchx.schedulers.ray_scheduler",
    "lsf": "torchx.schedulers.lsf_scheduler",
}

# A scheduler whose TorchX module fails with another error than ModuleNotFoundError when a
# package it needs is missing: 0.7.0's ray_scheduler.py names ray's JobSubmissionClient in a
# signature, a NameError without ray, and a traceback from `torchx runopts` even without us.
UNGUARDED = {"ray": "ray"}


@functools.cache
def _unavailable() -> type[ModuleNotFoundError]:
    """The error for a scheduler this TorchX does not have or cannot load. It is a
    ``ModuleNotFoundError``: ``torchx runopts`` catches that per scheduler, prints
    "NAME: MESSAGE" and goes on (torchx/cli/cmd_runopts.py). It is also a
    ``ComponentValidationException``, which ``torchx run`` prints as a line with exit 1 where
    it creates the scheduler inside its ``try`` (torchx/cli/cmd_run.py: ``_run`` in 0.7.0,
    ``_run_inner`` in nightly)."""
    from torchx.specs.finder import ComponentValidationException

    # Made with type(): TorchX's classes are Any to mypy (no TorchX in the lint venv).
    return type(
        "SchedulerUnavailable",
        (ModuleNotFoundError, ComponentValidationException),
        {"__module__": __name__},
    )


def _say_it_in_one_line(
    kind: type[BaseException], value: BaseException, tb: TracebackType | None
) -> None:
    """``sys.excepthook`` once a scheduler was found unavailable: that error, when nothing
    caught it, as its message alone (exit 1 as for any uncaught error); anything else as
    before. Nightly's ``torchx run`` creates the scheduler for its run options before its
    ``try`` (cmd_run.py ``_run_from_cli_args``: ``runner.scheduler_run_opts``), so no
    exception a scheduler can raise becomes a line there. ``torchx --log_level DEBUG`` shows
    the traceback."""
    debug = logging.getLogger().isEnabledFor(logging.DEBUG)
    if isinstance(value, _unavailable()) and not debug:
        print(value, file=sys.stderr)
        return
    sys.__excepthook__(kind, value, tb)


def _one_line(message: str, module: str) -> Exception:
    """The error saying ``message``, a line wherever it ends up (``module`` is what is missing)."""
    if sys.excepthook is sys.__excepthook__:  # a hook someone else set stays theirs
        sys.excepthook = _say_it_in_one_line
    return _unavailable()(message, name=module)


def _factory(name: str) -> Callable[..., Any]:
    def create_scheduler(session_name: str, **kwargs: Any) -> Any:  # a TorchX Scheduler
        import torchx

        try:
            module = importlib.import_module(MODULES[name])
        except ModuleNotFoundError as exc:
            if exc.name != MODULES[name]:
                raise  # the scheduler exists but needs a package that is not installed
            hint = "; its AWS Batch users: -s efa_batch" if name == "aws_batch" else ""
            message = f"scheduler {name} is not part of TorchX {torchx.__version__}{hint}"
            raise _one_line(message, MODULES[name]) from None
        except Exception:
            package = UNGUARDED.get(name)
            if package is None or importlib.util.find_spec(package) is not None:
                raise
            message = f"scheduler {name} needs the {package} package: pip install {package}"
            raise _one_line(message, package) from None
        return module.create_scheduler(session_name, **kwargs)

    create_scheduler.__name__ = name
    return create_scheduler


local_docker = _factory("local_docker")
local_cwd = _factory("local_cwd")
slurm = _factory("slurm")
kubernetes = _factory("kubernetes")
kubernetes_mcad = _factory("kubernetes_mcad")
aws_batch = _factory("aws_batch")
aws_sagemaker = _factory("aws_sagemaker")
gcp_batch = _factory("gcp_batch")
ray = _factory("ray")
lsf = _factory("lsf")
