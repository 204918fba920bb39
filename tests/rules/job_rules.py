"""What AWS Batch, ECS and NCCL do with the job definitions the launcher registers."""

from __future__ import annotations

from dataclasses import dataclass

from launcher.cluster import ClusterInfo
from tests.rules.registry import rule

ECS_AWSVPC = (
    "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-networking-awsvpc.html"
)
NCCL_ENV = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"


@dataclass(frozen=True)
class Job:
    """A ``RegisterJobDefinition`` request and the cluster it was built for."""

    register: dict
    cluster: ClusterInfo

    @property
    def containers(self) -> list[dict]:
        return [r["container"] for r in self.register["nodeProperties"]["nodeRangeProperties"]]

    def env(self, container: dict) -> dict[str, str]:
        return {e["name"]: e["value"] for e in container.get("environment", [])}


def nccl_selects(ifname_setting: str, interface: str) -> bool:
    """Whether NCCL's bootstrap may use ``interface`` under ``NCCL_SOCKET_IFNAME``.

    NCCL's environment reference (NCCL_SOCKET_IFNAME): a list of prefixes; "^" in front
    excludes the listed interfaces instead, "=" in front makes the names exact.
    """
    value = ifname_setting.strip()
    exclude = value.startswith("^")
    value = value.removeprefix("^")
    exact = value.startswith("=")
    value = value.removeprefix("=")
    names = [n for n in value.split(",") if n]
    hit = any(interface == n if exact else interface.startswith(n) for n in names)
    return not hit if exclude else hit


@rule(kind="job", source=ECS_AWSVPC, covers=("environment.NCCL_SOCKET_IFNAME",))
def nccl_bootstrap_uses_the_task_interface_only(job: Job) -> list[str]:
    """NCCL's socket bootstrap never picks loopback, Docker or ECS's link-local interface.

    https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-networking-awsvpc.html:
    on EC2, an awsvpc task gets its elastic network interface and, beside it, ``ecs-eth0`` in
    169.254.172.0/22, which other nodes cannot reach. NCCL takes the first interface that
    NCCL_SOCKET_IFNAME admits (NCCL env reference, https://docs.nvidia.com/deeplearning/nccl/
    user-guide/docs/env.html), so the setting must exclude ``ecs`` as well as ``lo`` and
    ``docker``, and still admit the task's ``eth0``.
    """
    problems = []
    for container in job.containers:
        setting = job.env(container).get("NCCL_SOCKET_IFNAME")
        if setting is None:
            if job.cluster.efa_interfaces:
                problems.append("NCCL_SOCKET_IFNAME is unset on an EFA job")
            continue
        for bad in ("lo", "docker0", "ecs-eth0"):
            if nccl_selects(setting, bad):
                problems.append(f"NCCL_SOCKET_IFNAME={setting} lets NCCL bind {bad}")
        if not nccl_selects(setting, "eth0"):
            problems.append(f"NCCL_SOCKET_IFNAME={setting} excludes the task interface eth0")
    return problems
