"""Who pulls the images a build makes, and which layer compressions each reads: the facts a
build's compression is chosen from, with their sources.

- **The cluster's nodes.** Batch runs them on the ECS-optimized Amazon Linux 2023 AMIs
  (``ECS_AL2023_NVIDIA`` for GPU types, ``ECS_AL2023`` otherwise; ``launcher.stack.catalog``),
  where the ECS agent pulls through Docker. The AMI's package list (aws/amazon-ecs-ami,
  ``release-al2023.auto.pkrvars.hcl``) pins Docker 25.0.16 and containerd 2.2.5; its
  changelog shows Docker 25.0 on every AL2023 AMI since 20240328, before Batch offered
  ``ECS_AL2023_NVIDIA``. Docker reads zstd layers from 23.0 ("Add support for pulling zstd
  compressed layers", Docker Engine 23.0.0 release notes, moby/moby#41759). ECR stores and
  serves them (AWS Containers blog, "Reducing AWS Fargate Startup Times with zstd Compressed
  Container Images", 2022, whose images live in ECR and whose update notes ECR's scanning of
  them). So zstd, automatically.
- **The local Docker engine** (``--local``): zstd from Docker 23.0, gzip before; Debian 12's
  ``docker.io`` is 20.10 and fails such a pull (``tests/image/test_compression.py``).
- **Anyone else** (``launcher build --repo``): unknown, so gzip, which every runtime reads;
  zstd when asked for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from launcher.errors import UsageError
from launcher.image.compress import Compression

ZSTD_SINCE_DOCKER = (23, 0)


@dataclass(frozen=True)
class Puller:
    """Who pulls: the compressions it reads, and the one a build uses when none is asked."""

    name: str  # for messages: "the local Docker engine 20.10.24"
    reads: tuple[Compression, ...]
    default: Compression


BOTH = (Compression.GZIP, Compression.ZSTD)
CLUSTER_NODES = Puller("the cluster's nodes (ECS AL2023 AMI, Docker 25.0)", BOTH, Compression.ZSTD)
ANYONE = Puller("whoever pulls from that repository", BOTH, Compression.GZIP)


def docker_engine(version: str) -> Puller:
    """A Docker engine of ``version`` (its /version answer, e.g. "20.10.24+dfsg1")."""
    parts = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    if parts >= ZSTD_SINCE_DOCKER:
        return Puller(f"the local Docker engine {version}", BOTH, Compression.ZSTD)
    return Puller(f"the local Docker engine {version}", (Compression.GZIP,), Compression.GZIP)


def choose(asked: Compression | str | None, puller: Puller) -> Compression:
    """The compression of a build: the one asked for, if the puller reads it, else its
    default; UsageError (before anything moves) for one it cannot read."""
    if asked is None:
        return puller.default
    try:
        chosen = Compression(asked)
    except ValueError:
        allowed = ", ".join(c.value for c in Compression)
        raise UsageError(f"--compression {asked!r}: allowed {allowed}") from None
    if chosen not in puller.reads:
        readable = ", ".join(c.value for c in puller.reads)
        raise UsageError(
            f"--compression {chosen}: {puller.name} cannot read {chosen} layers "
            f"(it reads {readable}; Docker reads zstd from 23.0)"
        )
    return chosen
