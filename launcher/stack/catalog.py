"""What one instance of each supported type offers to a multi-node job.

One table serves both packages: the CDK app sizes the launch template's EFA interfaces from
it, and the launcher derives per-node resource requirements and EFA devices from it. Figures
are from the EC2 accelerated-computing instance pages and the EFA "supported instance types"
list (network cards that accept an EFA interface).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypedDict

# Memory the kernel, the ECS agent and the OS keep on a container instance. A node registers
# /proc/meminfo's MemTotal (less than the nominal memory) minus ECS_RESERVED_MEMORY, and AWS
# recommends "reserving a 5% memory buffer" (Batch user guide, memory-management.html and
# ecs-reserved-memory.html); a job that asks for more than a node registers never leaves
# RUNNABLE.
_RESERVED_FRACTION = 0.05
_RESERVED_MIN_MIB = 2048


@dataclass(frozen=True)
class InstanceType:
    name: str
    vcpus: int
    memory_gib: int
    gpus: int
    efa_interfaces: int
    gpudirect_rdma: bool = False
    architecture: str = "amd64"  # images are resolved for linux/<this>, never the laptop's
    # EFA network bandwidth of one instance, Gbps (EC2 instance type specifications).
    efa_gbps: int = 0
    # Offered as EC2 Capacity Blocks for ML, so a capacity_block_id may target it. The EC2 user
    # guide lists the types under "Capacity Blocks for ML", supported instance types and
    # Regions (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html):
    # p6-b300 (us-west-2 only), p6-b200, p5, p5e, p4d, p4de, trn1 and trn2; "How Amazon EC2
    # Capacity Blocks work" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/
    # capacity-blocks-how.html) names p5en too. Trainium is unsupported here (UNSUPPORTED).
    capacity_blocks: bool = False
    # Network card 0 takes an EFA device. P6-B300's does not: it has "17 network cards, where
    # the primary network card supports only an ENA network interface", so its EFA devices sit
    # on cards 1-16 (EC2 user guide, efa-acc-inst-types.html).
    primary_card_efa: bool = True

    @property
    def efa_cards(self) -> range:
        """The network cards that carry an EFA device, one each ("Instance types that support
        multiple network cards can be configured with one EFA per network card", EC2 user
        guide, efa.html)."""
        first = 0 if self.primary_card_efa else 1
        return range(first, first + self.efa_interfaces)

    @property
    def allreduce_floor_gbs(self) -> float:
        """The lowest acceptable all_reduce_perf bus bandwidth across nodes (GB/s).

        nccl-tests defines bus bandwidth so that it compares with the hardware's peak
        (nccl-tests, doc/PERFORMANCE.md); across nodes that peak is the node's network, the EFA
        line rate here. The floor is half of it: a run on NCCL's socket fallback or with dead
        EFA rails lands far below, a busy but healthy fabric does not. It is a smoke test, not
        a benchmark.
        """
        return self.efa_gbps / 8 / 2

    @property
    def usable_memory_mib(self) -> int:
        """Memory a job can request on one instance, leaving headroom for the ECS agent."""
        total = self.memory_gib * 1024
        return total - max(_RESERVED_MIN_MIB, math.ceil(total * _RESERVED_FRACTION))

    @property
    def default_shm_mib(self) -> int:
        """A quarter of the job's memory: NCCL and DataLoader workers live in /dev/shm."""
        return self.usable_memory_mib // 4

    @property
    def efa_capable(self) -> bool:
        return self.efa_interfaces > 0

    @property
    def image_type(self) -> str:
        """Batch's ECS AMI for the type (Batch API, Ec2Configuration.imageType): the NVIDIA
        variant for GPU types, plain AL2023 otherwise. AL2 AMIs are not offered: Batch blocks
        new compute environments on them from 2026-06-30."""
        return "ECS_AL2023_NVIDIA" if self.gpus else "ECS_AL2023"


class _Flags(TypedDict):
    gpudirect_rdma: bool
    capacity_blocks: bool


# The NVIDIA training types: GPUDirect RDMA over EFA, and offered as Capacity Blocks for ML.
_TRAINING: _Flags = {"gpudirect_rdma": True, "capacity_blocks": True}

# CPU types for data preparation and evaluation pools: vCPUs and memory per size from the EC2
# instance type specifications (https://docs.aws.amazon.com/ec2/latest/instancetypes/gp.html,
# co.html, mo.html; EC2 DescribeInstanceTypes VCpuInfo.DefaultVCpus, MemoryInfo.SizeInMiB).
# GiB per vCPU: c7i 2, m7i 4, r7i 8. EFA only on the 48xlarge and metal-48xl sizes, one
# interface of 50 Gbps (DescribeInstanceTypes NetworkInfo.EfaInfo.MaximumEfaInterfaces 1;
# the EC2 user guide's EFA "supported instance types", efa.html).
_CPU_SIZES = {
    "large": 2,
    "xlarge": 4,
    "2xlarge": 8,
    "4xlarge": 16,
    "8xlarge": 32,
    "12xlarge": 48,
    "16xlarge": 64,
    "24xlarge": 96,
    "48xlarge": 192,
    "metal-24xl": 96,
    "metal-48xl": 192,
}
_GIB_PER_VCPU = {"c7i": 2, "m7i": 4, "r7i": 8}
_CPU_TYPES = tuple(
    InstanceType(
        f"{family}.{size}",
        vcpus,
        vcpus * gib,
        0,
        1 if vcpus == 192 else 0,
        efa_gbps=50 if vcpus == 192 else 0,
    )
    for family, gib in _GIB_PER_VCPU.items()
    for size, vcpus in _CPU_SIZES.items()
)

_TYPES = (
    # NVIDIA training instances: one EFA interface per network card.
    InstanceType("p4d.24xlarge", 96, 1152, 8, 4, efa_gbps=400, **_TRAINING),
    InstanceType("p4de.24xlarge", 96, 1152, 8, 4, efa_gbps=400, **_TRAINING),
    InstanceType("p5.48xlarge", 192, 2048, 8, 32, efa_gbps=3200, **_TRAINING),
    InstanceType("p5e.48xlarge", 192, 2048, 8, 32, efa_gbps=3200, **_TRAINING),
    InstanceType("p5en.48xlarge", 192, 2048, 8, 16, efa_gbps=3200, **_TRAINING),
    InstanceType("p6-b200.48xlarge", 192, 2048, 8, 8, efa_gbps=3200, **_TRAINING),
    # 8 NVIDIA B300 GPUs (2148 GiB of GPU memory, 8 x 268 GiB), 192 vCPUs, 4096 GiB, 6400
    # Gigabit, 17 network cards (https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html);
    # "up to 6400 Gbps for EFA traffic", card 0 ENA only, EFA on each of the 16 others
    # (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html, EFA
    # configuration for P6-B300 instances); RDMA read and write (efa.html, Nitro v6 (EFA v4));
    # Capacity Blocks in us-west-2 (ec2-capacity-blocks.html).
    InstanceType(
        "p6-b300.48xlarge",
        192,
        4096,
        8,
        16,
        efa_gbps=6400,
        primary_card_efa=False,
        **_TRAINING,
    ),
    InstanceType("g5.48xlarge", 192, 768, 8, 1, efa_gbps=100),
    InstanceType("g5.12xlarge", 48, 192, 4, 1, efa_gbps=40),
    InstanceType("g6e.48xlarge", 192, 1536, 8, 4, efa_gbps=400),
    InstanceType("g4dn.12xlarge", 48, 192, 4, 1, efa_gbps=50),
    # CPU instances with EFA, for CPU-only MPI or small rehearsals.
    InstanceType("c5n.18xlarge", 72, 192, 0, 1, efa_gbps=100),
    InstanceType("hpc7g.16xlarge", 64, 128, 0, 1, architecture="arm64", efa_gbps=200),
    # GPU instances without EFA: accepted with EFA off only.
    InstanceType("g5.xlarge", 4, 16, 1, 0),
    InstanceType("g5.2xlarge", 8, 32, 1, 0),
    InstanceType("g4dn.xlarge", 4, 16, 1, 0),
    *_CPU_TYPES,
)

CATALOG: dict[str, InstanceType] = {t.name: t for t in _TYPES}

# Types a cluster could name but on which no job would ever run, and why (one line each).
UNSUPPORTED: dict[str, str] = {
    **dict.fromkeys(
        ("p3dn.24xlarge", "p3.16xlarge", "g3.16xlarge"),
        "Batch's ECS_AL2023_NVIDIA AMI does not support p3 and g3 (Batch API, "
        "Ec2Configuration.imageType), and Batch blocks new compute environments on its AL2 "
        "AMIs from 2026-06-30",
    ),
    **dict.fromkeys(
        ("trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "inf2.48xlarge"),
        "Trainium and Inferentia need the ECS Neuron AMI and /dev/neuron* devices, which this "
        "project does not configure; Batch's ECS_AL2023 AMI has no Neuron driver",
    ),
}


def lookup(name: str) -> InstanceType | None:
    return CATALOG.get(name)


def known_names() -> str:
    return ", ".join(sorted(CATALOG))
