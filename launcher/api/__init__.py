"""The Python API: a cluster found by its stack, and the jobs run on it.

    from launcher import Cluster
    cluster = Cluster.from_stack("EfaBatch")
    job = cluster.run(["python", "train.py"], nodes=2, image=BASE, workspace=".")
    job.wait(timeout=3600)
    for line in job.logs(follow=True): ...

Every run goes validate (spec and cluster) -> workspace image -> register and submit, so bad
input raises ``UsageError`` before anything is uploaded or submitted. Nothing here prints:
steps and transfers go to the optional ``progress`` callback (``launcher.progress``). The CLI
and the TorchX scheduler are front doors to this package: they act through it, and use the pure
values below it (``launcher.job``, ``launcher.stack``) only to parse and to print.

This module is the door; each piece is a module named for what it is:

- ``cluster``: ``Cluster``, found by its stack and bound to where its jobs run;
- ``functions``: Python functions on the cluster (``Cluster.remote``: ``RemoteFunction``,
  ``FunctionCall``);
- ``jobs``: ``Job``, and what acts on jobs by id alone (``attach``, ``cancel_jobs``,
  ``local_jobs``, ``local_jobs_elsewhere``);
- ``images``: workspace images (``build_image``, ``ImageOptions``, ``BuildOptions``);
- ``capacity_block``: what a run in a Capacity Block's pool is told;
- ``backends``: the stack named by default, an AWS session, and every backend a job id may
  belong to (``backends``: a new backend goes there);
- ``elsewhere``: where the user's jobs and endpoint may be instead (a ``./.demo/env`` naming
  others), said in the lines of an unknown job, an empty listing, an endpoint that is down.

The API floor: it may import the target and every floor below it (copy jobs, the backends,
images, the job, the stack, the node, the shared modules); only the front doors
(``launcher.cli``, ``launcher.torchx``) import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from launcher.api.backends import aws_session, backends, default_stack
from launcher.api.cluster import COPY_IMAGE_ENV, Cluster
from launcher.api.images import BuildOptions, ImageOptions, build_image
from launcher.api.jobs import Job, attach, cancel_jobs, local_jobs, local_jobs_elsewhere
from launcher.errors import FunctionError
from launcher.job.options import make_spec  # the keywords of Cluster.spec and Cluster.run

if TYPE_CHECKING:
    from launcher.api.functions import FunctionCall, RemoteFunction


def __getattr__(name: str) -> Any:
    """``FunctionCall`` and ``RemoteFunction`` on first use: what a call needs (the runner,
    assembled from its file; cloudpickle) is no command's start-up cost but the calls'."""
    if name in ("FunctionCall", "RemoteFunction"):
        from launcher.api import functions

        return getattr(functions, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "COPY_IMAGE_ENV",
    "BuildOptions",
    "Cluster",
    "FunctionCall",
    "FunctionError",
    "ImageOptions",
    "Job",
    "RemoteFunction",
    "attach",
    "aws_session",
    "backends",
    "build_image",
    "cancel_jobs",
    "default_stack",
    "local_jobs",
    "local_jobs_elsewhere",
    "make_spec",
]
