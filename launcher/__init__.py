"""efa-batch launcher: multi-node EFA jobs on AWS Batch, or on the local Docker engine.

    from launcher import Cluster
    cluster = Cluster.from_stack()              # $LAUNCHER_STACK, else EfaBatch
    job = cluster.run(["python", "train.py"], nodes=2, image=BASE, workspace=".")
    job.wait()

Names are imported lazily so that ``import launcher`` (and ``launcher --help``) stays light:
boto3, docker and requests load when first used. The package's floors, and what each may import,
are drawn in docs/design.md and held by the import-linter contracts in pyproject.toml.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Cluster": "launcher.api",
    "Job": "launcher.api",
    "JobSpec": "launcher.job.jobspec",
    "NodeGroup": "launcher.job.jobspec",
    "Mount": "launcher.job.jobspec",
    "JobInfo": "launcher.job.info",
    "JobState": "launcher.job.info",
    "NodeStatus": "launcher.job.info",
    "LogLine": "launcher.job.info",
    "Event": "launcher.progress",
    "LauncherError": "launcher.errors",
    "UsageError": "launcher.errors",
    "RemoteError": "launcher.errors",
    "FunctionError": "launcher.errors",
}

__all__ = [
    "Cluster",
    "Event",
    "FunctionError",
    "Job",
    "JobInfo",
    "JobSpec",
    "JobState",
    "LauncherError",
    "LogLine",
    "Mount",
    "NodeGroup",
    "NodeStatus",
    "RemoteError",
    "UsageError",
]

if TYPE_CHECKING:  # pragma: no cover
    from launcher.api import Cluster, Job
    from launcher.errors import FunctionError, LauncherError, RemoteError, UsageError
    from launcher.job.info import JobInfo, JobState, LogLine, NodeStatus
    from launcher.job.jobspec import JobSpec, Mount, NodeGroup
    from launcher.progress import Event


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'launcher' has no attribute {name!r}")
