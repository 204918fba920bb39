"""``launcher check``: prove a cluster with one short multi-node job, then say what is wrong.

The job (``launcher.node.check_script``) reports per node: EFA devices, libfabric's EFA provider,
GPUs, EFS writable and shared, the rendezvous port reachable task interface to task interface;
and from the main node an NCCL ``all_reduce_perf`` across all nodes. ``evaluate`` turns the
job's log into a per-node table and a verdict (pure; tested on the tools' real output).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from launcher.job.info import JobInfo
from launcher.node import check_script
from launcher.stack import catalog
from launcher.stack.cluster import ClusterInfo
from launcher.stack.outputs import Egress

if TYPE_CHECKING:
    from launcher.job.jobspec import JobSpec
    from launcher.job.readiness import Finding
    from launcher.stack.security import Findings

# AWS publishes nccl-tests with EFA and aws-ofi-nccl (aws-samples/awsome-distributed-training,
# 1.architectures/3.aws-batch/aws-batch-distributed-training-p6.yaml uses this tag).
DEFAULT_IMAGE = (
    "public.ecr.aws/hpc-cloud/nccl-tests:cuda12.8.1-efa1.42.0-ofiv1.16.0-ncclv2.27.5-1-testsv2.16.4"
)
NAME = "launcher-check"
PASS, FAIL, NA = "pass", "FAIL", "n/a"
SKIPPED = "skipped"  # a preflight read the identity may not make: said, never a failure

_LINE = re.compile(r"^LAUNCHER_CHECK node=(\d+) (\w+)=(.*)$")
_NCCL = "LAUNCHER_CHECK_NCCL "
_NETWORK = re.compile(r"NCCL INFO Using network (.+?)\s*$")
_ROW = re.compile(r"^\s*(\d+)\s+\d+\s+\w+\s+\w+\s+-?\d+\s+[0-9.]+\s+[0-9.]+\s+([0-9.]+)\s+(\d+)")


# --- parsing the tools' output ----------------------------------------------------------------


def strip_mpi_prefix(line: str) -> str:
    """A launcher's rank label off a line: OpenMPI's ``--tag-output`` (``[1,0]<stdout>:``) or
    Slurm's ``srun --label`` (``0: ``)."""
    return re.sub(r"^\s*(\[\d+,\d+\]<std(?:out|err)>:|\d+: )", "", line)


class AllReduce(TypedDict):
    busbw: float | None  # GB/s, the mean of the large sizes; None: no large size finished
    peak_busbw: float | None
    wrong: int
    network: str | None


def parse_all_reduce(lines: Iterable[str], min_bytes: int = check_script.MIN_BYTES) -> AllReduce:
    """``all_reduce_perf`` output -> bus bandwidth (GB/s), wrong values, and the network NCCL
    named (``AWS Libfabric``/``Libfabric`` over EFA, ``Socket`` without).

    ``busbw`` is the mean out-of-place bus bandwidth of the sizes from ``min_bytes`` up, where
    the network, not the latency, sets the pace; the footer's "Avg bus bandwidth" averages
    every size of the sweep, so it depends on where the sweep starts (52.98 GB/s for a 2 x p5
    run from 0 B whose sizes from 256 MiB averaged 299 GB/s).
    """
    found: AllReduce = {"busbw": None, "peak_busbw": None, "wrong": 0, "network": None}
    large: list[float] = []
    for raw in lines:
        line = strip_mpi_prefix(raw)
        if (m := _NETWORK.search(line)) is not None and found["network"] is None:
            found["network"] = m.group(1)
        elif (m := _ROW.match(line)) is not None:
            size, busbw, wrong = int(m.group(1)), float(m.group(2)), int(m.group(3))
            found["peak_busbw"] = max(found["peak_busbw"] or 0.0, busbw)
            found["wrong"] += wrong
            if size >= min_bytes:
                large.append(busbw)
    if large:
        found["busbw"] = round(sum(large) / len(large), 2)
    return found


def uses_efa(network: str | None) -> bool:
    return network is not None and "libfabric" in network.lower()


# --- the verdict --------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    check: str
    status: str  # pass | FAIL | n/a
    detail: str


@dataclass
class Report:
    nodes: dict[int, list[Result]] = field(default_factory=dict)
    cluster: list[Result] = field(default_factory=list)
    job: JobInfo | None = None

    @property
    def passed(self) -> bool:
        results = [r for rs in self.nodes.values() for r in rs] + self.cluster
        return bool(results) and all(r.status != FAIL for r in results)

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": "pass" if self.passed else "fail",
            "job": self.job.as_dict() if self.job else None,
            "nodes": {
                str(n): [dataclasses.asdict(r) for r in rs] for n, rs in sorted(self.nodes.items())
            },
            "cluster": [dataclasses.asdict(r) for r in self.cluster],
        }

    def table(self) -> str:
        rows = [("node", "check", "result", "detail")]
        for node, results in sorted(self.nodes.items()):
            rows += [(str(node), r.check, r.status, r.detail) for r in results]
        rows += [("all", r.check, r.status, r.detail) for r in self.cluster]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        lines = [
            "  ".join(cell.ljust(widths[i]) if i < 3 else cell for i, cell in enumerate(row))
            for row in rows
        ]
        verdict = "PASS: the cluster is ready" if self.passed else "FAIL: see the rows marked FAIL"
        return "\n".join([*lines, "", verdict])


def evaluate(
    lines: Iterable[str], nodes: int, cluster: ClusterInfo, *, local: bool = False
) -> Report:
    """The job's log lines -> per-node results and the cluster-wide NCCL result."""
    seen: dict[int, dict[str, str]] = {}
    nccl_lines: list[str] = []
    for line in lines:
        if line.startswith(_NCCL):
            nccl_lines.append(line[len(_NCCL) :])
        elif (m := _LINE.match(line.strip())) is not None:
            seen.setdefault(int(m.group(1)), {})[m.group(2)] = m.group(3)
    report = Report()
    here = "not available here (local run)"
    want_efa, want_gpus = cluster.efa_interfaces, cluster.gpus_per_node
    for node in range(nodes):
        facts = seen.get(node)
        if facts is None:
            report.nodes[node] = [Result("report", FAIL, "the node never reported")]
            continue
        results = []
        devices = int(facts.get("efa_devices", "0"))
        if want_efa:
            if local and devices == 0:
                results.append(Result("efa devices", NA, here))
            else:
                ok = devices == want_efa
                listing = facts.get("infiniband", "").strip() or "no /dev/infiniband"
                detail = f"{devices}/{want_efa} ({listing})"
                results.append(Result("efa devices", PASS if ok else FAIL, detail))
            provider = facts.get("efa_provider", "none")
            if provider == "none":
                status = NA if local else FAIL
                results.append(Result("efa provider", status, "no fi_info in the image"))
            elif local and devices == 0:
                results.append(Result("efa provider", NA, here))
            else:
                ok = provider.isdigit() and int(provider) > 0
                results.append(
                    Result("efa provider", PASS if ok else FAIL, "fi_info -p efa: " + provider)
                )
        if want_gpus:
            gpus = facts.get("gpus", "none")
            if local and gpus in ("none", "0"):
                results.append(Result("gpus", NA, here))
            else:
                ok = gpus.isdigit() and int(gpus) == want_gpus
                results.append(Result("gpus", PASS if ok else FAIL, f"{gpus}/{want_gpus}"))
        results += _credentials(facts, local, single=nodes == 1)
        results += _buckets(facts, cluster, local)
        if cluster.fsx_file_system_id:
            write, shared = facts.get("fsx_write"), facts.get("fsx_shared", "0")
            fsx_ok = write == "ok" and shared == str(nodes)
            results.append(
                Result(
                    "fsx", PASS if fsx_ok else FAIL, f"write {write}, sees {shared}/{nodes} nodes"
                )
            )
        write, shared = facts.get("efs_write"), facts.get("efs_shared", "0")
        efs_ok = write == "ok" and shared == str(nodes)
        results.append(
            Result("efs", PASS if efs_ok else FAIL, f"write {write}, sees {shared}/{nodes} nodes")
        )
        if nodes > 1:
            rdzv = facts.get("rendezvous", "missing")
            ok = rdzv == "ok" or rdzv == f"{nodes - 1}/{nodes - 1}"
            status = PASS if ok else (NA if rdzv == "none" else FAIL)
            detail = {"none": "no python3 or nc in the image"}.get(rdzv, rdzv)
            results.append(Result("rendezvous port", status, detail))
        report.nodes[node] = results
    report.cluster.append(_nccl(seen.get(0, {}), nccl_lines, cluster, nodes, local))
    report.cluster.append(
        Result("internet", PASS if cluster.internet_egress is Egress.NAT else NA, cluster.internet)
    )
    return report


def _buckets(facts: dict[str, str], cluster: ClusterInfo, local: bool) -> list[Result]:
    """One row per data bucket location: listed from the node with the job role, or why not."""
    results = []
    for index, bucket in enumerate(cluster.data_buckets):
        name, found = f"s3 {bucket.uri}", facts.get(f"s3_{index}", facts.get("s3", "missing"))
        kind, _, detail = found.partition(":")
        if found == "ok":
            results.append(Result(name, PASS, "listed with the job role"))
        elif found == "none":
            results.append(Result(name, NA, "no python3 in the image"))
        elif kind == "no-credentials" and local:
            results.append(Result(name, NA, "not on ECS (local run)"))
        elif kind == "region":
            where = (
                "reachable through the NAT gateway only"
                if cluster.internet_egress is Egress.NAT
                else "unreachable: the S3 gateway endpoint serves its own Region only"
            )
            status = NA if cluster.internet_egress is Egress.NAT else FAIL
            results.append(Result(name, status, f"in {detail}, not {cluster.region}: {where}"))
        else:
            results.append(Result(name, FAIL, _bucket_failure(kind, detail)))
    return results


def _bucket_failure(kind: str, detail: str) -> str:
    status, _, code = detail.partition(":")
    if kind == "error" and code == "AccessDenied":
        return (
            "AccessDenied: the job role is granted it (data_buckets); a bucket of another "
            "account must also grant the role in its bucket policy"
        )
    if kind == "error" and code == "NoSuchBucket":
        return "no such bucket"
    if kind == "error":
        return f"S3 answered {status} {code}"
    if kind == "unreachable":
        return "no route to S3 (the VPC's S3 gateway endpoint, or NAT)"
    if kind == "no-credentials":
        return "no job-role credentials in the container"
    return "the node never probed it"


# A single-node job runs in the instance's network namespace ("ECS-EC2 simple job | host",
# Batch user guide, networking-modes-jobs), where nothing keeps IMDS from it: "It's not
# possible to prevent access with the host networking mode, because the Amazon ECS agent runs
# on the host networking namespace and requires access to it" (AWS knowledge center,
# ecs-container-ec2-metadata). ECS_AWSVPC_BLOCK_IMDS covers awsvpc (multi-node) tasks only, and
# the launch template's hop limit of 1 keeps out bridge-mode containers, not host-mode ones.
HOST_MODE_IMDS = (
    "reachable, as for every single-node job: host network mode, which ECS cannot fence off; "
    "the instance role (the ECS agent's and Session Manager's rights, no data or secrets) is "
    'within reach of the job (docs/security.md, "What each job shape can reach through its '
    'node")'
)


def _credentials(facts: dict[str, str], local: bool, single: bool = False) -> list[Result]:
    """The job role through the ECS agent, and the instance's metadata service out of reach
    (a multi-node job; a single-node job cannot be kept from it)."""
    role, imds = facts.get("job_role"), facts.get("imds")
    if role is None and imds is None:
        if local:
            return [Result(name, NA, "not on ECS (local run)") for name in ("job role", "imds")]
        why = "the container has no job-role credentials endpoint (not run by ECS with a role?)"
        return [Result("job role", FAIL, why), Result("imds", NA, "not probed")]
    tools = "no python3 or curl in the image"
    if role == "ok":
        role_result = Result("job role", PASS, "credentials from the ECS agent (169.254.170.2)")
    elif role == "none":
        role_result = Result("job role", NA, tools)
    else:
        role_result = Result("job role", FAIL, f"credentials endpoint: {role}")
    if imds == "blocked":
        imds_result = Result("imds", PASS, "the instance's metadata service is out of reach")
    elif imds == "none":
        imds_result = Result("imds", NA, tools)
    elif single:
        imds_result = Result("imds", NA, HOST_MODE_IMDS)
    else:
        imds_result = Result(
            "imds",
            FAIL,
            "reachable: job containers can read the instance role's credentials "
            "(the nodes' ECS_AWSVPC_BLOCK_IMDS is not in effect)",
        )
    return [role_result, imds_result]


def _nccl(
    main: dict[str, str], lines: list[str], cluster: ClusterInfo, nodes: int, local: bool
) -> Result:
    if not cluster.gpus_per_node:
        return Result("nccl all_reduce", NA, "no GPUs on this instance type")
    if main.get("nccl") != "ran":
        if local:
            return Result("nccl all_reduce", NA, "not available here (local run)")
        return Result("nccl all_reduce", FAIL, "the image has no all_reduce_perf, mpirun and sshd")
    found = parse_all_reduce(lines)
    instance = catalog.lookup(cluster.instance_type)
    floor = instance.allreduce_floor_gbs if instance else 0.0
    busbw, network = found["busbw"], found["network"]
    if busbw is None:
        return Result("nccl all_reduce", FAIL, "all_reduce_perf did not finish")
    detail = f"{busbw:g} GB/s bus bandwidth over {network or 'an unnamed network'}"
    if nodes > 1 and not uses_efa(network):
        return Result("nccl all_reduce", FAIL, detail + ": NCCL did not use EFA")
    if found["wrong"]:
        return Result("nccl all_reduce", FAIL, detail + f": {found['wrong']} wrong values")
    if nodes > 1 and busbw < floor:
        return Result("nccl all_reduce", FAIL, detail + f", below the {floor:g} GB/s floor")
    return Result("nccl all_reduce", PASS, detail + (f" (floor {floor:g})" if nodes > 1 else ""))


def task_group_result(findings: Findings) -> Result:
    """The account's part: the VPC's default group keeps what jobs need
    (launcher.stack.security)."""
    if not findings.ok:
        return Result("task security group", FAIL, findings.line())
    detail = f"{findings.group_id} admits all traffic from itself and lets jobs out"
    if findings.notes:
        detail += f" (warning: {'; '.join(findings.notes)})"
    return Result("task security group", PASS, detail)


def readiness_results(findings: Iterable[Finding]) -> list[Result]:
    """The preflight's findings (``launcher.job.readiness``) as rows: ``POOL: CHECK``."""
    status = {True: PASS, False: FAIL, None: SKIPPED}
    return [Result(f"{f.pool}: {f.check}", status[f.ok], f.text) for f in findings]


# --- running it -------------------------------------------------------------------------------


def spec(
    cluster: ClusterInfo,
    nodes: int,
    image: str,
    port: int,
    timeout_seconds: int,
    share_id: str | None = None,
) -> JobSpec:
    from launcher.job.jobspec import EfaMode, JobSpec

    locations = " ".join(f"{b.bucket}/{b.prefix}" for b in cluster.data_buckets)
    env = (("LAUNCHER_CHECK_REGION", cluster.region), ("LAUNCHER_CHECK_BUCKETS", locations))
    return JobSpec(
        name=NAME,
        command=("/bin/sh", "-c", check_script.SCRIPT),
        env=env if locations else (),
        image=image,
        nodes=nodes,
        efa=EfaMode.AUTO if cluster.efa_interfaces else EfaMode.OFF,
        timeout_seconds=timeout_seconds,
        attempts=1,
        rendezvous_port=port,
        share_id=share_id,
    )
