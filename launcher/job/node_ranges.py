"""A job definition's node ranges, read and rewritten: each range's bounds and container
(``node_ranges``, ``groups_of``), a container job as a one-node job (``as_one_node``), and a
submit's environment overrides, as SubmitJob carries them (``node_overrides``) and as Batch
applies them when a node starts (``with_overrides``).

The Batch backend reads described jobs with these; the local backend runs a definition itself
with them, so both see a job's nodes one way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from launcher.errors import UsageError
from launcher.job.shapes import is_single, single_container
from launcher.node import prelude

if TYPE_CHECKING:
    from launcher.job.info import GroupInfo


def node_ranges(definition: dict[str, Any]) -> list[tuple[tuple[int, int], dict[str, Any]]]:
    """((first, last), container) for each node range of a job definition (or a job); a
    container job is its own one node."""
    if is_single(definition):
        return [((0, 0), single_container(definition))]
    props = definition["nodeProperties"]
    last_node = props["numNodes"] - 1
    ranges = []
    for node_range in props["nodeRangeProperties"]:
        first, _, last = node_range["targetNodes"].partition(":")
        bounds = (int(first or 0), int(last) if last else last_node)
        ranges.append((bounds, node_range["container"]))
    return ranges


def groups_of(definition: dict[str, Any]) -> tuple[GroupInfo, ...]:
    """The node groups of a job definition (or a job), named after their ``LAUNCHER_GROUP``."""
    from launcher.job.info import GroupInfo

    groups = []
    for (first, last), container in node_ranges(definition):
        env = {e["name"]: e["value"] for e in container.get("environment", [])}
        name = env.get("LAUNCHER_GROUP") or (
            "main" if len(node_ranges(definition)) == 1 else f"{first}-{last}"
        )
        groups.append(
            GroupInfo(
                name,
                first,
                last,
                container.get("image"),
                command=tuple(_user_command(container.get("command") or [])),
                env=tuple(sorted(env.items())),
                **_resources(container.get("resourceRequirements") or []),
            )
        )
    return tuple(groups)


def _user_command(command: list[str]) -> list[str]:
    """The user's command in a container's: the node prelude's (``prelude.command``) taken off,
    where it is there."""
    if command[:2] == ["/bin/sh", "-c"] and command[3:4] == [prelude.ARGV0]:
        return prelude.user_command(command)
    return command


def _resources(requirements: list[dict[str, str]]) -> dict[str, int]:
    """Batch's resourceRequirements (VCPU, MEMORY in MiB, GPU) as GroupInfo's fields."""
    names = {"VCPU": "vcpus", "MEMORY": "memory_mib", "GPU": "gpus"}
    return {
        names[r["type"]]: int(float(r["value"])) for r in requirements if r.get("type") in names
    }


def as_one_node(register: dict[str, Any], parameters: dict[str, str]) -> dict[str, Any]:
    """A container job (a copy job) as a one-node job, for code that runs both kinds one way
    (the local backend), with its ``Ref::NAME`` command arguments replaced by the submitted
    parameters, or the definition's defaults, as Batch does."""
    if "nodeProperties" in register:
        return register
    values = {**register.get("parameters", {}), **parameters}
    container = dict(register["containerProperties"])
    container["command"] = [
        values.get(arg[len("Ref::") :], arg) if arg.startswith("Ref::") else arg
        for arg in container.get("command", [])
    ]
    rest = {k: v for k, v in register.items() if k != "containerProperties"}
    return {
        **rest,
        "nodeProperties": {
            "numNodes": 1,
            "mainNode": 0,
            "nodeRangeProperties": [{"targetNodes": "0:", "container": container}],
        },
    }


def node_overrides(definition: dict[str, Any], environment: list[dict[str, str]]) -> dict[str, Any]:
    """SubmitJob ``nodeOverrides`` giving ``environment`` to each node range of a multi-node
    definition (or job), named as the definition names it."""
    return {
        "nodePropertyOverrides": [
            {"targetNodes": r["targetNodes"], "containerOverrides": {"environment": environment}}
            for r in definition["nodeProperties"]["nodeRangeProperties"]
        ]
    }


def with_overrides(definition: dict[str, Any], submit: dict[str, Any]) -> dict[str, Any]:
    """A job definition in ``nodeProperties`` form (``as_one_node``) with a submit's environment
    overrides in its containers, as Batch applies them when each node starts: for the local
    backend, which runs the definition itself."""
    result = definition
    if "containerOverrides" in submit:  # a container job's, now its one node's
        result = with_environment(result, _override_env(submit["containerOverrides"]))
    ranges = [r["targetNodes"] for r in result["nodeProperties"]["nodeRangeProperties"]]
    for override in submit.get("nodeOverrides", {}).get("nodePropertyOverrides", []):
        if override["targetNodes"] not in ranges:
            raise UsageError(
                f"nodeOverrides: targetNodes {override['targetNodes']} is none of the job "
                f"definition's node ranges ({', '.join(ranges)})"
            )
        env = _override_env(override.get("containerOverrides", {}))
        result = with_environment(result, env, override["targetNodes"])
    return result


def _override_env(overrides: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in overrides.get("environment", [])}


def with_environment(
    definition: dict[str, Any], env: dict[str, str], target_nodes: str | None = None
) -> dict[str, Any]:
    """A copy of a job definition with ``env`` set in every node range's container (or only in
    the range named ``target_nodes``)."""
    import copy

    result = copy.deepcopy(definition)
    for node_range in result["nodeProperties"]["nodeRangeProperties"]:
        if target_nodes is not None and node_range["targetNodes"] != target_nodes:
            continue
        container = node_range["container"]
        merged = {e["name"]: e["value"] for e in container.get("environment", [])} | env
        container["environment"] = [{"name": k, "value": v} for k, v in sorted(merged.items())]
    return result
