"""ClusterInfo values with no stack behind them (pure tests, local runs in the tests and the
benchmarks): the outputs' own examples (launcher.stack.outputs), with the instance figures from the
same catalog the infra uses."""

from __future__ import annotations

import dataclasses
from typing import Any

from launcher.stack import buckets, catalog
from launcher.stack.cluster import ClusterInfo
from launcher.stack.outputs import Egress, OutputKey


def cluster_info(
    instance_type: str = "p4d.24xlarge",
    *,
    max_nodes: int = 4,
    efa: bool = True,
    fair_share: bool = False,
    internet_egress: str = "none",
    pull_through_cache: dict[str, str] | None = None,
    registry_secrets: dict[str, str] | None = None,
    data_buckets: tuple[str, ...] = (),
    fsx_file_system_id: str | None = None,
    allow_privileged: bool = False,
) -> ClusterInfo:
    example = ClusterInfo.from_outputs("EfaBatch", {k.value: k.example for k in OutputKey})
    it = catalog.CATALOG[instance_type]
    account, region = "123456789012", example.region
    changes: dict[str, Any] = {
        "instance_type": instance_type,
        "max_nodes": max_nodes,
        "efa_interfaces": it.efa_interfaces if efa else 0,
        "gpus_per_node": it.gpus,
        "vcpus_per_node": it.vcpus,
        "memory_mib_per_node": it.usable_memory_mib,
        "scheduling_policy_arn": (
            f"arn:aws:batch:{region}:{account}:scheduling-policy/fs" if fair_share else None
        ),
        "internet_egress": Egress(internet_egress),
        "data_buckets": buckets.parse_all(data_buckets),
        "fsx_file_system_id": fsx_file_system_id,
        "allow_privileged": allow_privileged,
    }
    # The pool the fields describe, as the Pools output would give it.
    default = dataclasses.replace(
        example.current_pool,
        instance_type=instance_type,
        max_nodes=max_nodes,
        efa_interfaces=changes["efa_interfaces"],
        gpus_per_node=it.gpus,
        vcpus_per_node=it.vcpus,
        memory_mib_per_node=it.usable_memory_mib,
    )
    changes["pools"] = tuple(default if p.name == example.pool_name else p for p in example.pools)
    if pull_through_cache is not None:
        changes["pull_through_cache"] = pull_through_cache
    if registry_secrets is not None:
        changes["registry_secrets"] = registry_secrets
    return dataclasses.replace(example, **changes)
