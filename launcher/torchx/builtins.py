"""TorchX 0.7.0's own schedulers, re-registered beside ``efa_batch``.

TorchX 0.7.0 returns only the ``torchx.schedulers`` entry points once any exists (TorchX
issue 1009), so registering ``efa_batch`` alone would hide ``local_docker``, ``local_cwd`` and
the rest. The package declares each of 0.7.0's defaults again, pointing here; each loads the
TorchX module that 0.7.0 itself would load. Where that module is gone (TorchX main removed
``aws_batch`` and others), the name says so in one line instead of a traceback.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

# torchx.schedulers.DEFAULT_SCHEDULER_MODULES of TorchX 0.7.0.
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


def _factory(name: str) -> Callable[..., Any]:
    def create_scheduler(session_name: str, **kwargs: Any) -> Any:  # a TorchX Scheduler
        try:
            module = importlib.import_module(MODULES[name])
        except ModuleNotFoundError as exc:
            if exc.name != MODULES[name]:
                raise  # the scheduler exists but needs a package that is not installed
            import torchx

            hint = " (its AWS Batch users: -s efa_batch)" if name == "aws_batch" else ""
            raise ValueError(
                f"scheduler {name} is not part of TorchX {torchx.__version__}{hint}"
            ) from None
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
