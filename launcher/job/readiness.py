"""Whether a pool's nodes can start, decided from what AWS says about the account: the rules of
the preflight (``launcher check --preflight`` and ``python -m infra.predeploy``).

A multi-node job waits in RUNNABLE, silently, for things Batch's own status reason does not
name: an EC2 vCPU quota too small for the pool, an instance type the zone does not offer, a
subnet without the addresses the nodes take, a Capacity Block that has not started or has
ended, an AMI the Region lacks, a compute environment Batch marked INVALID (Batch user guide,
job_stuck_in_runnable.html, lists these places to look). Each rule here is pure: it takes what
was read and says one line, with what to do; ``launcher.aws.readiness`` reads.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from launcher.job.capacity import ENDED_STATES, Window, clock
from launcher.job.waiting import duration_text

# EC2's vCPU-based quotas, by instance family (Service Quotas, service code "ec2"). On-Demand
# limits count the vCPUs of running instances; Spot limits the vCPUs of Spot requests (EC2 user
# guide, ec2-on-demand-instances.html#ec2-on-demand-instances-limits and
# using-spot-limits.html). A family the table lacks gets no quota line.
ON_DEMAND_QUOTAS: dict[str, tuple[str, str]] = {
    "standard": ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
    "p": ("L-417A185B", "Running On-Demand P instances"),
    "g": ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    "f": ("L-74FC7D96", "Running On-Demand F instances"),
    "inf": ("L-1945791B", "Running On-Demand Inf instances"),
    "trn": ("L-2C3B7624", "Running On-Demand Trn instances"),
    "x": ("L-7295265B", "Running On-Demand X instances"),
    "dl": ("L-6E869C2A", "Running On-Demand DL instances"),
}
SPOT_QUOTAS: dict[str, tuple[str, str]] = {
    "standard": ("L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"),
    "p": ("L-7212CCBC", "All P Spot Instance Requests"),
    "g": ("L-3819A6DF", "All G and VT Spot Instance Requests"),
    "f": ("L-88CF9481", "All F Spot Instance Requests"),
    "inf": ("L-B5D1601B", "All Inf Spot Instance Requests"),
    "trn": ("L-6B0D517C", "All Trn Spot Instance Requests"),
    "x": ("L-E3A00192", "All X Spot Instance Requests"),
    "dl": ("L-85EED4F7", "All DL Spot Instance Requests"),
}
_BUCKETS = {
    **{letter: "standard" for letter in "acdhimrtz"},
    "p": "p",
    "g": "g",
    "vt": "g",
    "f": "f",
    "inf": "inf",
    "trn": "trn",
    "x": "x",
    "dl": "dl",
}

# The AMI Batch launches for each Ec2Configuration imageType: the ECS-optimized AMI's public
# parameter (ECS developer guide, ecs-optimized_AMI.html, "Retrieving Amazon ECS-Optimized AMI
# metadata"); Batch resolves the latest of it when it scales (Batch API, Ec2Configuration).
_AMI_ROOT = "/aws/service/ecs/optimized-ami"
AMI_PARAMETERS = {
    "ECS_AL2023_NVIDIA": f"{_AMI_ROOT}/amazon-linux-2023/gpu/recommended/image_id",
    "ECS_AL2023": f"{_AMI_ROOT}/amazon-linux-2023/recommended/image_id",
    "ECS_AL2_NVIDIA": f"{_AMI_ROOT}/amazon-linux-2/gpu/recommended/image_id",
    "ECS_AL2": f"{_AMI_ROOT}/amazon-linux-2/recommended/image_id",
}

QUOTA_REQUEST = (
    "aws service-quotas request-service-quota-increase --service-code ec2 "
    "--quota-code {code} --desired-value {value}"
)


@dataclass(frozen=True)
class PoolNeed:
    """What one pool asks of the account when it runs its largest job."""

    pool: str
    instance_type: str
    vcpus_per_node: int
    max_nodes: int
    spot: bool
    # Private IPv4 addresses one node takes: its interfaces that carry an address (EFA-only
    # ones do not) plus, for a multi-node job, its container's own task interface.
    addresses_per_node: int
    subnets: tuple[str, ...] = ()
    reservation_id: str | None = None  # a Capacity Block's or Capacity Reservation's cr- id
    block: bool = False  # the reservation is a Capacity Block
    fallback: str | None = None  # the pool whose nodes the queue uses when this one has none
    image_type: str | None = None
    zone: str | None = None  # where a subnet not created yet will be (the pre-deploy check)

    @property
    def vcpus(self) -> int:
        return self.vcpus_per_node * self.max_nodes

    @property
    def addresses(self) -> int:
        return self.addresses_per_node * self.max_nodes


def addresses_per_node(template: dict[str, Any], multi_node: bool) -> int:
    """Private IPv4 addresses a node takes: each interface of its launch template but the
    EFA-only ones, which carry none (EC2 user guide, efa.html: "EFA-only interfaces ... do not
    have IP addresses"), or one where the template names none; plus, for multi-node jobs, the
    job container's own task interface (Batch runs them in awsvpc mode: infra/cluster.py)."""
    interfaces = template.get("NetworkInterfaces") or []
    addressed = sum(1 for i in interfaces if i.get("InterfaceType") != "efa-only") or 1
    return addressed + (1 if multi_node else 0)


def reservation_of(template: dict[str, Any]) -> str | None:
    """The cr- id the launch template targets, if any (a group's ARN is not read)."""
    target = (template.get("CapacityReservationSpecification") or {}).get(
        "CapacityReservationTarget"
    ) or {}
    found = target.get("CapacityReservationId")
    return str(found) if found else None


@dataclass(frozen=True)
class Finding:
    """One line of the preflight. ``ok`` None: could not be read (said, never fatal)."""

    pool: str
    check: str
    ok: bool | None
    text: str

    def line(self) -> str:
        mark = {True: "ok", False: "WAITS", None: "skipped"}[self.ok]
        return f"{self.pool}: {self.check}: {mark}: {self.text}"

    def as_dict(self) -> dict[str, Any]:
        return {"pool": self.pool, "check": self.check, "ok": self.ok, "text": self.text}


def family(instance_type: str) -> str:
    """``p5`` of ``p5.48xlarge``, ``trn`` of ``trn1n.32xlarge``: the letters before the
    generation digit."""
    match = re.match(r"^([a-z]+?)(?=\d)", instance_type.split(".")[0])
    return match.group(1) if match else instance_type.split(".")[0]


def quota_of(instance_type: str, spot: bool) -> tuple[str, str] | None:
    """The (code, name) of the quota that caps ``instance_type``, or None when not known."""
    letters = family(instance_type)
    bucket = _BUCKETS.get(letters) or _BUCKETS.get(letters[:1] if len(letters) == 1 else "")
    if bucket is None:
        return None
    return (SPOT_QUOTAS if spot else ON_DEMAND_QUOTAS)[bucket]


def quota_finding(need: PoolNeed, limit: float, others: Sequence[PoolNeed] = ()) -> Finding:
    """The pool's largest job against the quota's vCPUs (``others``: pools on the same quota,
    which draw from it at the same time)."""
    code, name = quota_of(need.instance_type, need.spot) or ("", "")
    got = int(limit)
    asks = f"{need.max_nodes} x {need.instance_type} = {need.vcpus} vCPUs"
    if need.block:  # the block holds their capacity; its row says whether they can start
        text = f"{name} ({code}) is {got} vCPUs; the pool's nodes are the Capacity Block's"
        return Finding(need.pool, "quota", None, text)
    if got < need.vcpus:
        nodes = got // need.vcpus_per_node
        can = "no node" if nodes == 0 else f"at most {nodes} node{'s' if nodes > 1 else ''}"
        return Finding(
            need.pool,
            "quota",
            False,
            f"{name} ({code}) is {got} vCPUs; max_nodes {asks}, so {can} can start: "
            + QUOTA_REQUEST.format(code=code, value=need.vcpus),
        )
    together = need.vcpus + sum(o.vcpus for o in others)
    text = f"{name} ({code}) is {got} vCPUs; max_nodes {asks}"
    if together > got:
        names = ", ".join(o.pool for o in others)
        text += f" (with {names}: {together}, so their jobs take turns)"
    return Finding(need.pool, "quota", True, text)


def zone_finding(need: PoolNeed, zones: dict[str, str], offered: set[str]) -> Finding:
    """The instance type offered where the pool's subnets are (``zones``: subnet -> zone;
    ``offered``: the zones that offer the type)."""
    where = sorted(set(zones.values()))
    missing = [z for z in where if z not in offered]
    if not where:
        return Finding(need.pool, "zone", None, "the pool's subnet could not be read")
    if missing:
        elsewhere = sorted(offered) or ["no zone of this Region"]
        return Finding(
            need.pool,
            "zone",
            False,
            f"{need.instance_type} is not offered in {', '.join(missing)}: offered in "
            f"{', '.join(elsewhere)}; deploy the stack in one of those (availability_zone)",
        )
    return Finding(need.pool, "zone", True, f"{need.instance_type} offered in {', '.join(where)}")


def addresses_finding(need: PoolNeed, free: int, others: Sequence[PoolNeed] = ()) -> Finding:
    """The subnet's free IPv4 addresses against the pool's nodes (``others``: pools in the same
    subnet)."""
    asks = f"{need.max_nodes} nodes x {need.addresses_per_node} = {need.addresses}"
    if free < need.addresses:
        return Finding(
            need.pool,
            "addresses",
            False,
            f"the subnet has {free} free IPv4 addresses; max_nodes {asks} needed: free "
            "addresses in it, or deploy with a larger subnet (subnet_id) or a smaller max_nodes",
        )
    together = need.addresses + sum(o.addresses for o in others)
    text = f"{free} free IPv4 addresses; max_nodes {asks}"
    if together > free:
        text += f" (with {', '.join(o.pool for o in others)}: {together}, so they take turns)"
    return Finding(need.pool, "addresses", True, text)


def reservation_finding(need: PoolNeed, found: dict[str, Any], now: float | None = None) -> Finding:
    """A Capacity Block or reservation (a DescribeCapacityReservations entry): started, not
    ended, large enough for the pool's largest job. With a fallback pool the queue runs jobs
    there meanwhile, so a block not started (or ended) keeps nothing waiting."""
    now = time.time() if now is None else now
    kind = "Capacity Block" if need.block else "Capacity Reservation"
    rid = need.reservation_id
    total = int(found.get("TotalInstanceCount") or 0)
    state = str(found.get("State", ""))
    meanwhile = f"; meanwhile jobs run on pool {need.fallback}" if need.fallback else ""
    window = Window.of(found) if found.get("StartDate") and found.get("EndDate") else None
    if state in ENDED_STATES or (window is not None and window.ended(now)):
        word = state if state in ENDED_STATES else "ended"
        when = f" at {clock(window.end)}" if window else ""
        return Finding(
            need.pool,
            "reservation",
            bool(need.fallback),
            f"{kind} {rid} {word}{when}{meanwhile}: buy another and deploy with its id "
            f"({'capacity_block_id' if need.block else 'capacity_reservation_id'})",
        )
    if state in ("scheduled", "payment-pending", "pending") or (
        window is not None and now < window.start
    ):
        start = ""
        if window is not None:
            start = f" at {clock(window.start)} (in {duration_text(window.start - now)})"
        return Finding(
            need.pool,
            "reservation",
            bool(need.fallback),
            f"{kind} {rid} starts{start}{meanwhile or ': jobs wait until then'}",
        )
    if state and state != "active":
        return Finding(need.pool, "reservation", False, f"{kind} {rid} is {state}")
    if total and total < need.max_nodes:
        return Finding(
            need.pool,
            "reservation",
            False,
            f"{kind} {rid} holds {total} instances; max_nodes is {need.max_nodes}: a job of "
            f"more than {total} nodes waits for ever: submit at most {total} --nodes",
        )
    until = f" until {clock(window.end)}" if window else ""
    size = f", {total} instances" if total else ""
    return Finding(need.pool, "reservation", True, f"{kind} {rid} active{until}{size}")


def image_finding(need: PoolNeed, region: str, exists: bool) -> Finding:
    """The AMI the compute environment's image type resolves to, published in the Region."""
    parameter = AMI_PARAMETERS.get(need.image_type or "", "")
    if exists:
        return Finding(need.pool, "image", True, f"{need.image_type} AMI published in {region}")
    return Finding(
        need.pool,
        "image",
        False,
        f"no {need.image_type} AMI in {region} ({parameter} not found): Batch cannot launch "
        "nodes; deploy in a Region that has it",
    )


def environment_finding(need: PoolNeed, environment: dict[str, Any] | None) -> Finding:
    """The pool's compute environment (a DescribeComputeEnvironments entry) ENABLED and VALID."""
    if environment is None:
        return Finding(
            need.pool, "environment", False, "the compute environment does not exist: deploy"
        )
    name = environment.get("computeEnvironmentName", "")
    state, status = environment.get("state"), environment.get("status")
    reason = environment.get("statusReason") or ""
    if status == "INVALID":
        return Finding(
            need.pool,
            "environment",
            False,
            f"{name} is INVALID: {reason or 'no reason given'}; fix what it names and deploy",
        )
    if state != "ENABLED":
        return Finding(
            need.pool,
            "environment",
            False,
            f"{name} is {state}: jobs wait; `aws batch update-compute-environment "
            f"--compute-environment {name} --state ENABLED`",
        )
    if status != "VALID":
        return Finding(need.pool, "environment", None, f"{name} is {status}: try again shortly")
    return Finding(need.pool, "environment", True, f"{name} ENABLED, VALID")


def passed(findings: Sequence[Finding]) -> bool:
    """A job can start: no finding says it would wait (one that could not be read does not)."""
    return all(f.ok is not False for f in findings)


# --- while a job waits: what EC2 said when the pool tried to launch ----------------------------

# EC2's error codes and messages in a failed Auto Scaling activity's StatusMessage (EC2 API
# reference, errors-overview.html), the first match wins, each with what to do.
_LAUNCH_FAILURES: tuple[tuple[str, str], ...] = (
    (
        r"VcpuLimitExceeded|vCPU limit|vCPU capacity than your current",
        "the account's EC2 vCPU quota is too small: `launcher check --preflight` names the "
        "quota and the request that raises it",
    ),
    (
        r"InsufficientInstanceCapacity|sufficient .* capacity",
        "EC2 has no capacity for this type in the zone now: wait, or use a Capacity Block or "
        "reservation",
    ),
    (
        r"ReservationCapacityExceeded|InsufficientCapacityReservation|[Cc]apacity [Rr]eservation",
        "the Capacity Block or reservation is full, not active yet, or ended: "
        "`launcher check --preflight` shows its window",
    ),
    (
        r"Unsupported|not supported in your requested Availability Zone",
        "the zone does not offer this instance type: deploy the stack in another zone",
    ),
    (
        r"InsufficientFreeAddressesInSubnet|free (IP )?addresses",
        "the subnet has no free IPv4 addresses for the nodes' interfaces",
    ),
    (
        r"InvalidAMIID",
        "the AMI the compute environment launches is not in this Region: `launcher check "
        "--preflight` names its parameter",
    ),
    (
        r"[Ll]aunch ?[Tt]emplate|InvalidParameter|InvalidBlockDeviceMapping",
        "EC2 refused the launch template: fix the stack and deploy",
    ),
)
LAUNCH_MESSAGE_CHARS = 160
# The tag EC2 Auto Scaling puts on every instance it launches: its group's name.
GROUP_TAG = "aws:autoscaling:groupName"
JOIN_GRACE_SECONDS = 600  # an instance up this long and not in the ECS cluster will not join


def failed_launch(activities: Sequence[dict[str, Any]], now: float | None = None) -> str | None:
    """The newest scaling activity (DescribeScalingActivities, newest first) when it failed, in
    the user's terms with EC2's own message trimmed; None when the newest did not fail."""
    if not activities:
        return None
    newest = activities[0]
    if newest.get("StatusCode") not in ("Failed", "Cancelled"):
        return None
    message = " ".join(str(newest.get("StatusMessage") or newest.get("Description")).split())
    advice = next(
        (words for pattern, words in _LAUNCH_FAILURES if re.search(pattern, message)), None
    )
    if len(message) > LAUNCH_MESSAGE_CHARS:
        message = message[: LAUNCH_MESSAGE_CHARS - 3].rstrip() + "..."
    started = newest.get("StartTime")
    ago = ""
    if started is not None and hasattr(started, "timestamp"):
        now = time.time() if now is None else now
        ago = f" {duration_text(now - started.timestamp())} ago"
    text = f"latest launch failed{ago}: {message}"
    return f"{text} ({advice})" if advice else text


def unjoined(
    instances: Sequence[dict[str, Any]], registered: int | None, now: float | None = None
) -> tuple[str | None, str | None]:
    """Instances (DescribeInstances entries) up past JOIN_GRACE_SECONDS while the ECS cluster
    has fewer registered: (the line, the oldest one's id where every instance is unjoined,
    whose console is worth reading); (None, None) when all have joined or it is too soon."""
    if registered is None or len(instances) <= registered:
        return None, None
    clock: float = time.time() if now is None else now

    def launched(instance: dict[str, Any]) -> float:
        value: Any = instance.get("LaunchTime")
        return float(value.timestamp()) if hasattr(value, "timestamp") else clock

    old = sorted((i for i in instances if clock - launched(i) >= JOIN_GRACE_SECONDS), key=launched)
    if not old:
        return None, None
    missing = len(instances) - registered
    up = duration_text(clock - launched(old[0]))
    text = (
        f"{missing} of {len(instances)} instances not in the cluster, the oldest up {up}: "
        "their ECS agent never registered (a failed user-data step, a file system that would "
        "not mount, or no route to the ECS endpoints)"
    )
    return text, (old[0]["InstanceId"] if registered == 0 else None)


def in_group(instances: Sequence[dict[str, Any]], group: str) -> list[dict[str, Any]]:
    """The instances (DescribeInstances entries) that Auto Scaling group ``group`` launched."""
    return [
        i
        for i in instances
        if any(t.get("Key") == GROUP_TAG and t.get("Value") == group for t in i.get("Tags") or [])
    ]


def console_tail(output: str) -> str | None:
    """The last non-empty line of an instance's console output (GetConsoleOutput's, which
    botocore decodes from base64: its handlers' decode_console_output)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if not lines:
        return None
    last = lines[-1]
    return last if len(last) <= LAUNCH_MESSAGE_CHARS else last[: LAUNCH_MESSAGE_CHARS - 3] + "..."


def scaling_groups(environments: Sequence[str], groups: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Each compute environment's Auto Scaling group (DescribeAutoScalingGroups entries). Batch
    does not document the name; the groups it makes are named after the environment,
    ``NAME-asg-UUID`` (NCBI's ElasticBLAST finds its environment's group the same way, by the
    environment's name in the group's: bin/aws-get-auto-scaling-events.sh)."""
    found = {}
    for name in environments:
        prefix = f"{name}-asg-"
        mine = [
            g["AutoScalingGroupName"]
            for g in groups
            if g["AutoScalingGroupName"].startswith(prefix)
        ]
        if mine:
            found[name] = sorted(mine)[0]
    return found
