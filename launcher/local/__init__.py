"""The local backend: a multi-node job on the local Docker engine, run as AWS Batch runs it.

``containers`` turns a job definition's nodes into containers (pure), ``engine`` is the one
layer that talks to Docker, ``state`` keeps each job's record with one writer at a time,
``backend`` is the ``Backend`` the API uses, and ``supervisor`` follows a job to its end in a
process of its own.

May import the backend protocol, images, the job, the stack, the node and the shared modules;
never the AWS backend: the two backends are independent floors (pyproject.toml's
import-linter contracts hold this).
"""

from launcher.local.backend import LOST_REASON, LocalBackend, job_info
from launcher.local.containers import LABEL, PREFIX, is_local, node_container
from launcher.local.state import Owner, Process, Record, Store
from launcher.local.supervisor import EXIT_REASON, TIMEOUT_REASON

__all__ = [
    "EXIT_REASON",
    "LABEL",
    "LOST_REASON",
    "PREFIX",
    "TIMEOUT_REASON",
    "LocalBackend",
    "Owner",
    "Process",
    "Record",
    "Store",
    "is_local",
    "job_info",
    "node_container",
]
