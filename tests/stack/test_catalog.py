"""The instance-type table against EC2's own documentation of each type it lists.

The figures below are copied from the EC2 instance types guide (performance and network
specifications: https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html for accelerated
computing, co.html for c5n and c7i, gp.html for m7i, mo.html for r7i, hpc.html for hpc7g) and
from the EC2 user guide's EFA pages: "Instance types that support multiple network cards can be
configured with one EFA per network card. All other supported instance types support only one
EFA per instance" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html, EFA
limitations), and the cards that take none (efa-acc-inst-types.html). A type added to the
catalog without its row here fails the test.
"""

from __future__ import annotations

import pytest

from launcher.stack import catalog

# name: (vCPUs, memory GiB, GPUs, network cards, network Gbps, EFA) as the guide's tables give
# them ("4x 100 Gigabit" is 400). Types without EFA carry their burst figure, unused here.
DOCUMENTED = {
    # ac.html
    "p4d.24xlarge": (96, 1152, 8, 4, 400, True),
    "p4de.24xlarge": (96, 1152, 8, 4, 400, True),
    "p5.48xlarge": (192, 2048, 8, 32, 3200, True),
    "p5e.48xlarge": (192, 2048, 8, 32, 3200, True),
    "p5en.48xlarge": (192, 2048, 8, 16, 3200, True),
    "p6-b200.48xlarge": (192, 2048, 8, 8, 3200, True),
    "p6-b300.48xlarge": (192, 4096, 8, 17, 6400, True),
    "g5.48xlarge": (192, 768, 8, 1, 100, True),
    "g5.12xlarge": (48, 192, 4, 1, 40, True),
    "g6e.48xlarge": (192, 1536, 8, 4, 400, True),
    "g4dn.12xlarge": (48, 192, 4, 1, 50, True),
    "g5.xlarge": (4, 16, 1, 1, 10, False),
    "g5.2xlarge": (8, 32, 1, 1, 10, False),
    "g4dn.xlarge": (4, 16, 1, 1, 25, False),
    # co.html, gp.html, mo.html, hpc.html
    "c5n.18xlarge": (72, 192, 0, 1, 100, True),
    "c7i.48xlarge": (192, 384, 0, 1, 50, True),
    "c7i.metal-48xl": (192, 384, 0, 1, 50, True),
    "m7i.48xlarge": (192, 768, 0, 1, 50, True),
    "m7i.metal-48xl": (192, 768, 0, 1, 50, True),
    "r7i.48xlarge": (192, 1536, 0, 1, 50, True),
    "r7i.metal-48xl": (192, 1536, 0, 1, 50, True),
    "hpc7g.16xlarge": (64, 128, 0, 1, 200, True),
}
# Network cards that take no EFA device: P6-B300 has "8 GPUs and 17 network cards, where the
# primary network card supports only an ENA network interface with up to 350 Gbps of
# bandwidth" (efa-acc-inst-types.html, EFA configuration for P6-B300 instances).
ENA_ONLY_CARDS = {"p6-b300.48xlarge": 1}


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_the_catalog_has_the_documented_figures(name):
    """vCPUs, memory, GPUs and network bandwidth as the EC2 instance types guide gives them
    (https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html and its co, gp, mo and hpc
    pages); one EFA device per network card that takes one ("Instance types that support
    multiple network cards can be configured with one EFA per network card",
    https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html)."""
    vcpus, memory, gpus, cards, gbps, efa = DOCUMENTED[name]
    it = catalog.CATALOG[name]
    assert (it.vcpus, it.memory_gib, it.gpus) == (vcpus, memory, gpus)
    efa_cards = cards - ENA_ONLY_CARDS.get(name, 0) if efa else 0
    assert it.efa_interfaces == efa_cards
    if efa:  # one EFA device on each card that takes one, up to the last card
        assert it.efa_cards == range(cards - efa_cards, cards)
    assert it.efa_gbps == (gbps if efa else 0)


def test_every_efa_or_gpu_type_is_documented_here():
    listed = {n for n, t in catalog.CATALOG.items() if t.efa_capable or t.gpus}
    assert sorted(listed - set(DOCUMENTED)) == []


def test_p6_b300_is_in_the_catalog_as_ec2_documents_it():
    """EC2 instance types guide, accelerated computing
    (https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html): p6-b300.48xlarge, 4096.00
    GiB, Intel Xeon Emerald Rapids, 192 vCPUs, "8 x NVIDIA B300 GPU", "2148 GiB (8 x 268
    GiB)"; network "6400 Gigabit", 17 network cards, 68 network interfaces at most. EFA guide
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html): "P6-B300
    instances have a total network bandwidth capacity of up to 6400 Gbps for EFA traffic, and
    up to 3870 Gbps for ENA traffic. They have 8 GPUs and 17 network cards, where the primary
    network card supports only an ENA network interface with up to 350 Gbps of bandwidth. The
    secondary network cards support up to 400 Gbps EFA and up to 220 Gbps of ENA bandwidth":
    16 EFA devices, on cards 1-16. RDMA read and write: "p6-b300.48xlarge | Yes | Yes" under
    Nitro v6 (EFA v4) (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html).
    Capacity Blocks: listed first under "Instance Capacity Blocks", in US West (Oregon) only
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html).
    """
    it = catalog.CATALOG["p6-b300.48xlarge"]
    assert (it.vcpus, it.memory_gib, it.gpus, it.architecture) == (192, 4096, 8, "amd64")
    assert (it.efa_interfaces, it.efa_gbps, it.efa_cards) == (16, 6400, range(1, 17))
    assert it.gpudirect_rdma and it.capacity_blocks
    assert it.image_type == "ECS_AL2023_NVIDIA"
    # Half the line rate, in GB/s: 6400 Gbps / 8 / 2.
    assert it.allreduce_floor_gbs == 400


def test_the_other_types_take_efa_from_card_0():
    """Every other multi-card type's card 0 takes an EFA device: the guide's layouts put an
    EFA-only interface at "network card index 0, device index 1" for P5 and P6-B200
    (efa-acc-inst-types.html), which the launch template folds into an "EFA with ENA" primary
    (infra/compute_pool.py, efa_network_interfaces)."""
    assert {
        n for n, t in catalog.CATALOG.items() if t.efa_capable and not t.primary_card_efa
    } == set(ENA_ONLY_CARDS)
    assert all(
        t.efa_cards.start == 0 for n, t in catalog.CATALOG.items() if n not in ENA_ONLY_CARDS
    )
