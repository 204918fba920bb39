"""A copy job, planned: a small Fargate job that copies a base image into the cluster's
repository, next to the registries.

Pure: ``requests`` turns a source, a target and the cluster into RegisterJobDefinition and
SubmitJob requests (no I/O), as ``jobdef.build`` does for training jobs. One job definition per
cluster and copier image (named by its content); the source and target are SubmitJob
``parameters`` (``Ref::source``/``Ref::target`` in the command), so every copy reuses it.

``route`` decides where the job reads the base: from the region's ECR directly, through one of
the stack's ECR pull-through cache rules when one serves the base's registry (ECR fetches and
keeps it), or from the internet where the VPC has a route to it, and refuses, before anything
moves, a base the job could not reach. ``launcher.copyjob.run`` runs it on a backend;
``launcher.copyjob.program`` is what runs in it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from launcher.errors import UsageError
from launcher.image.auth import ECR_HOST
from launcher.image.reference import Reference
from launcher.job.jobdef import Requests, definition_name
from launcher.job.jobspec import Mount
from launcher.stack.cluster import ClusterInfo
from launcher.stack.outputs import Egress
from launcher.stack.teams import TEAM_TAG

COPY_DEFINITION_PREFIX = "efa-batch-copy"
PROGRAM = ("python3", "-m", "launcher.copyjob.program")
# Credentials for the source registry, given to a copy job from a Secrets Manager secret
# (the job definition names the secret; ECS puts its JSON keys in these variables).
SOURCE_USER_ENV = "LAUNCHER_SOURCE_USERNAME"
SOURCE_SECRET_ENV = "LAUNCHER_SOURCE_TOKEN"
# Fargate sizes: 1 vCPU takes 2-8 GiB (RegisterJobDefinition, ResourceRequirement value);
# the copy streams 1 MiB at a time, so the smallest memory for a full vCPU is plenty.
VCPU, MEMORY_MIB = "1", "2048"
TIMEOUT_SECONDS = 3 * 3600
ATTEMPTS = 3  # a copy resumes where it stopped, so another attempt costs little
USAGE_EXIT = "2"  # the copy program's exit code for a bad request: never worth another attempt


def job_name(source: Reference, target: Reference) -> str:
    """One name per base and target repository, so a run finds a copy already under way
    (ListJobs' JOB_NAME filter) instead of starting a second."""
    key = hashlib.sha256(f"{source.digest} {target.name}".encode()).hexdigest()
    return f"copy-{key[:32]}"


@dataclass(frozen=True)
class CopierImage:
    """What runs the copy: an image with the launcher's copy program (the stack's, by default),
    the command that starts it, and bind mounts (only for the local backend: Fargate has no
    host volumes)."""

    image: str
    command: tuple[str, ...] = PROGRAM
    mounts: tuple[Mount, ...] = ()


def cache_route(base: Reference, cluster: ClusterInfo) -> Reference | None:
    """``base`` as one of the stack's pull-through cache rules serves it, if one does."""
    for prefix, upstream in sorted(cluster.pull_through_cache.items()):
        if base.registry == upstream:
            registry = cluster.repository_uri.split("/", 1)[0]
            return Reference(registry, f"{prefix}/{base.repository}", None, base.digest)
    return None


def route(base: Reference, cluster: ClusterInfo, cached: bool = False) -> Reference:
    """Where a copy job in this cluster reads ``base`` (pinned by digest), or UsageError.

    ``cached``: the base already sits in the pull-through cache (the caller looked). Without
    NAT a rule serves only such images: ECR's first pull through a rule from a VPC that reaches
    ECR by interface endpoints needs a NAT gateway (ECR user guide, vpc-endpoints.html).
    """
    ecr = ECR_HOST.match(base.registry)
    if ecr and ecr["region"] == cluster.region:
        return base  # direct, through the VPC's ECR and S3 endpoints: no rule needed
    route = cache_route(base, cluster)
    if route and (cached or cluster.internet_egress is not Egress.NONE):
        return route
    if cluster.internet_egress is not Egress.NONE:
        return base
    if route:
        raise UsageError(
            f"--image {base}: not yet in the pull-through cache {route.repository}, and ECR's "
            "first pull through a rule needs a NAT gateway in the cluster's VPC (ECR user "
            "guide, vpc-endpoints.html); deploy with nat_gateway=true, or give `launcher run` or "
            "`build` --stream-base to send it through this machine (`launcher mirror` copies "
            "with a copy job only)"
        )
    hosts = ", ".join(sorted(cluster.pull_through_cache.values())) or "none"
    raise UsageError(
        f"--image {base}: the cluster's VPC has no route to {base.registry} (no NAT, and no "
        f"pull-through cache rule for it; rules serve: {hosts}), so a copy job cannot read "
        "it; deploy with nat_gateway=true, or give `launcher run` or `build` --stream-base to "
        "send it through this machine (`launcher mirror` copies with a copy job only)"
    )


def requests(
    source: Reference, target: Reference, cluster: ClusterInfo, copier: CopierImage
) -> Requests:
    """Requests for one copy job: ``source`` (pinned) into ``target``'s repository."""
    if not source.digest:
        raise UsageError(f"copy source {source}: pin it by digest (REPO@sha256:...)")
    container: dict[str, Any] = {
        "image": copier.image,
        "command": [*copier.command, "Ref::source", "Ref::target"],
        "jobRoleArn": cluster.copy_job_role_arn,
        "executionRoleArn": cluster.copy_execution_role_arn,
        "resourceRequirements": [
            {"type": "VCPU", "value": VCPU},
            {"type": "MEMORY", "value": MEMORY_MIB},
        ],
        # Private subnet: ECR, S3 and CloudWatch Logs through the VPC's endpoints (or its NAT).
        "networkConfiguration": {"assignPublicIp": "DISABLED"},
        "fargatePlatformConfiguration": {"platformVersion": "LATEST"},
        "environment": [{"name": "AWS_REGION", "value": cluster.region}],
        "logConfiguration": {
            "logDriver": "awslogs",
            "options": {
                "awslogs-group": cluster.log_group_name,
                "awslogs-region": cluster.region,
                "awslogs-stream-prefix": "copy",
            },
        },
    }
    secret = cluster.registry_secrets.get(source.registry)
    if secret:
        # ECS reads the secret's JSON keys at start (execution role); only the ARN is here.
        container["secrets"] = [
            {"name": SOURCE_USER_ENV, "valueFrom": f"{secret}:username::"},
            {"name": SOURCE_SECRET_ENV, "valueFrom": f"{secret}:accessToken::"},
        ]
    if copier.mounts:
        volumes, points = [], []
        for index, mount in enumerate(copier.mounts):
            name = f"copier{index}"
            volumes.append({"name": name, "host": {"sourcePath": mount.src}})
            points.append(
                {"sourceVolume": name, "containerPath": mount.dst, "readOnly": mount.readonly}
            )
        container["volumes"], container["mountPoints"] = volumes, points
    body = {
        "type": "container",
        "platformCapabilities": ["FARGATE"],
        "containerProperties": container,
        "retryStrategy": {
            "attempts": ATTEMPTS,
            "evaluateOnExit": [
                {"onExitCode": USAGE_EXIT, "action": "EXIT"},
                {"onReason": "*", "action": "RETRY"},
            ],
        },
        "timeout": {"attemptDurationSeconds": TIMEOUT_SECONDS},
        "propagateTags": True,
    }
    name = definition_name(body).replace("efa-batch-", f"{COPY_DEFINITION_PREFIX}-", 1)
    tags = {"efa-batch:stack": cluster.stack_name, "efa-batch:copy": source.digest}
    team = cluster.current_team
    if team is not None:
        # Tags given at submission are a TagResource too, which a team's user policy allows
        # only with the team's own tag (infra/teams.py user_statements).
        tags[TEAM_TAG] = team.name
    submit = {
        "jobName": job_name(source, target),
        "jobQueue": cluster.copy_queue_arn,
        "jobDefinition": name,
        "parameters": {"source": str(source), "target": target.name},
        "propagateTags": True,
        "tags": tags,
    }
    return Requests({"jobDefinitionName": name, **body}, submit)
