"""The requests of a one-node ``sh -c`` job for the local engine, as the CLI would build them
from the emulated cluster's outputs (no EFA: the test machine has none)."""

from __future__ import annotations

from typing import Any

from devenv.clusters import cluster_info
from launcher.api import make_spec
from launcher.job import jobdef
from tests.support.processes import rendezvous_port


def one_node_requests(command: str, image: str, **spec: Any) -> dict[str, Any]:
    """``sh -c COMMAND`` on one node of ``image``, on a free rendezvous port; ``spec``: more
    of make_spec's keywords (secrets, tmpfs, ulimits, ...)."""
    job = make_spec(
        ["sh", "-c", command],
        image=image,
        nodes=1,
        efa="off",
        rendezvous_port=rendezvous_port(),
        **spec,
    )
    return jobdef.build(job, cluster_info(efa=False))
