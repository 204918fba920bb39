"""Where a cluster's jobs run, chosen once: AWS (the stack's queues) or the local Docker engine.

Everything that differs between the two lives behind ``Target``, so the API never asks which
it holds: the backend jobs run on and the one copy jobs run on, whether an image exists, what
the account must hold before a run, where a copy job reads a base, and how each says where
things went. ``Cluster.from_stack`` makes the AWS target, ``cluster.local()`` the local one
(the dress rehearsal: the same job definitions, one container per node).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from launcher.backend import Backend, Payloads
from launcher.errors import RemoteError, UsageError
from launcher.job.info import BackendName
from launcher.job.jobspec import JobSpec
from launcher.progress import ProgressFn, say
from launcher.stack.cluster import ClusterInfo
from launcher.stack.outputs import Egress

if TYPE_CHECKING:
    from launcher.aws.client import Aws
    from launcher.image.pullers import Puller
    from launcher.image.reference import Reference
    from launcher.stack.security import Findings

LOCAL_EFS_ENV = "LAUNCHER_LOCAL_EFS"  # the directory standing in for EFS in local runs
LOCAL_FSX_ENV = "LAUNCHER_LOCAL_FSX"  # ... and for the nodes' FSx for Lustre mount


def shape(spec: JobSpec, instance_type: str | None = None) -> str:
    """A job's nodes in words (``2 x p5.48xlarge``), for the line that says where it went."""
    nodes = f"{spec.nodes} x {instance_type}" if instance_type else f"{spec.nodes} node(s)"
    return nodes if spec.array_size is None else f"an array of {spec.array_size}, each {nodes}"


class Target(Protocol):
    name: BackendName
    # A stand-in for the cluster: no EFA devices, GPUs or ECS (launcher check says n/a).
    rehearsal: bool

    @property
    def jobs(self) -> Backend:
        """Where training jobs run."""
        ...

    @property
    def copies(self) -> Backend:
        """Where copy jobs run."""
        ...

    def account_findings(self) -> Findings | None:
        """What the account lacks for jobs (its VPC's default group), or None where no
        account is involved."""
        ...

    def preflight(self, progress: ProgressFn | None = None) -> None:
        """RemoteError when the account cannot run jobs as it is; before anything is built."""
        ...

    def has_image(self, image: str) -> bool: ...

    def admit(self, spec: JobSpec) -> None:
        """UsageError when the job asks for more of the machine it runs on than this place
        allows (its host's paths and devices); no I/O."""
        ...

    def seen_from(self, info: ClusterInfo) -> Target:
        """The same place for another pool's view of the cluster (``ClusterInfo.pool``)."""
        ...

    def submitted(self, spec: JobSpec) -> str:
        """The line that says where a job went."""
        ...

    def copy_source(self, base: Reference) -> Reference:
        """Where a copy job here reads ``base`` (pinned); UsageError when it cannot."""
        ...

    def copy_where(self) -> str:
        """Where a copy job here moves the bytes, for the plan's line."""
        ...

    def puller(self) -> Puller:
        """Who pulls images here: the layer compressions it reads (``launcher.image.pullers``)."""
        ...

    def payloads(self, call_id: str, efs_path: str) -> Payloads:
        """Where a Python function's call ``call_id`` lives, for the launcher and the nodes
        (``efs_path``: where the job's nodes mount EFS). UsageError where there is none."""
        ...

    def image_environment(self, image: str, platform: str) -> dict[str, str]:
        """The variables the image's config sets, as its nodes would get them."""
        ...


class AwsTarget:
    """The stack's job and copy queues, in the stack's account."""

    name = BackendName.AWS
    rehearsal = False

    def __init__(self, info: ClusterInfo, aws: Aws) -> None:
        from launcher.aws.batch import BatchBackend

        self.info, self.aws = info, aws
        self._jobs = BatchBackend(aws, info.job_queue_arn)
        self._copies = BatchBackend(aws, info.copy_queue_arn)

    def seen_from(self, info: ClusterInfo) -> AwsTarget:
        return AwsTarget(info, self.aws)

    @property
    def jobs(self) -> Backend:
        return self._jobs

    @property
    def copies(self) -> Backend:
        return self._copies

    def account_findings(self) -> Findings:
        """What the VPC's default group lacks for jobs (``launcher.stack.security``); one call."""
        from launcher.stack.security import default_group_findings

        group = self.info.task_security_group_id
        return default_group_findings(group, self.aws.security_group_rules(group))

    def preflight(self, progress: ProgressFn | None = None) -> None:
        """A default group found fine is not asked about again for an hour (a cache file)."""
        from launcher.aws import preflight

        group = self.info.task_security_group_id
        if preflight.recently_fine(group):
            return
        findings = self.account_findings()
        for note in findings.notes:
            say(progress)(f"warning: {note}")
        if not findings.ok:
            raise RemoteError(f"cluster {self.info.stack_name}: {findings.line()}")
        preflight.remember_fine(group)

    def has_image(self, image: str) -> bool:
        from launcher.image.build import image_exists

        return image_exists(image, self.aws)

    def admit(self, spec: JobSpec) -> None:
        """The node's paths and devices only where the stack runs privileged jobs."""
        from launcher.job.validation import check_host_mounts

        check_host_mounts(spec, self.info)

    def submitted(self, spec: JobSpec) -> str:
        where = self.info.job_queue_name
        return f"submitted {spec.name} to {where}: {shape(spec, self.info.instance_type)}"

    def copy_source(self, base: Reference) -> Reference:
        """The cluster's route to ``base``; without NAT a pull-through cache rule serves only
        what ECR already holds (DescribeImages, which never pulls through, tells)."""
        from launcher.copyjob import plan
        from launcher.image.auth import ECR_HOST

        route = plan.cache_route(base, self.info)
        cached = False
        if route is not None and self.info.internet_egress is Egress.NONE:
            ecr = ECR_HOST.match(route.registry)
            cached = ecr is not None and self.aws.has_image(
                route.repository, route.digest or "", ecr["account"], ecr["region"]
            )
        return plan.route(base, self.info, cached)

    def copy_where(self) -> str:
        queue = self.info.copy_queue_arn.rsplit("/", 1)[-1]
        return f"in AWS (copy job on {queue})"

    def puller(self) -> Puller:
        from launcher.image.pullers import CLUSTER_NODES

        return CLUSTER_NODES

    def payloads(self, call_id: str, efs_path: str) -> Payloads:
        """The stack's function bucket, under the team's prefix (launcher.stack.functions)."""
        from launcher.aws.payloads import S3Payloads
        from launcher.stack.functions import payload_prefix

        bucket = self.info.function_bucket
        if bucket is None:
            raise UsageError(
                f"stack {self.info.stack_name} has no bucket for Python functions (it was "
                "deployed before them): deploy it again with cdk deploy, or call locally "
                "with cluster.local()"
            )
        prefix = f"{payload_prefix(self.info.team)}{call_id}/"
        return S3Payloads(self.aws, bucket, prefix, self.info.region)

    def image_environment(self, image: str, platform: str) -> dict[str, str]:
        from launcher.image.build import image_environment

        return image_environment(image, platform, self.aws)


class LocalTarget:
    """The local Docker engine: one container per node, the job's own network (``network``:
    launcher.local.containers.LocalNetwork), a directory for EFS; this machine's own paths and
    devices only with ``host_mounts`` (``--allow-host-mounts``), a privileged container only
    with ``privileged`` (``--privileged`` on the command line)."""

    name = BackendName.LOCAL
    rehearsal = True

    def __init__(
        self,
        info: ClusterInfo,
        efs_dir: str | os.PathLike[str] | None,
        aws: Aws | None,
        fsx_dir: str | os.PathLike[str] | None = None,
        network: str | None = None,
        host_mounts: bool = False,
        privileged: bool = False,
    ) -> None:
        from launcher.local import LocalBackend

        self.info, self.aws, self.network = info, aws, network
        self.host_mounts, self.privileged = host_mounts, privileged
        share = Path.home() / ".local" / "share" / "efa-batch"
        # Absolute, as the engine's bind mounts need and as "EFS at DIR" should say.
        self.efs_dir = os.path.abspath(
            efs_dir or os.environ.get(LOCAL_EFS_ENV) or share / "efs" / info.stack_name
        )
        self.fsx_dir = (
            os.path.abspath(
                fsx_dir or os.environ.get(LOCAL_FSX_ENV) or share / "fsx" / info.stack_name
            )
            if info.fsx_file_system_id
            else None
        )
        self._backend = LocalBackend(
            queue=info.job_queue_name,
            pool=info.pool_name,
            efs_dir=self.efs_dir,
            fsx_dir=self.fsx_dir,
            network=network,
        )

    def seen_from(self, info: ClusterInfo) -> LocalTarget:
        return LocalTarget(
            info,
            self.efs_dir,
            self.aws,
            self.fsx_dir,
            self.network,
            self.host_mounts,
            self.privileged,
        )

    @property
    def jobs(self) -> Backend:
        return self._backend

    @property
    def copies(self) -> Backend:
        """Copy jobs run on this machine's network: the copier is the stack's own image (not the
        user's), and it reads a base where this machine reads it (``copy_source``)."""
        from launcher.local import LocalBackend
        from launcher.local.containers import LocalNetwork

        return LocalBackend(
            queue=self.info.job_queue_name,
            pool=self.info.pool_name,
            efs_dir=self.efs_dir,
            fsx_dir=self.fsx_dir,
            network=LocalNetwork.HOST,
        )

    def account_findings(self) -> None:
        return None

    def admit(self, spec: JobSpec) -> None:
        """This machine's paths and devices, and a privileged container, only when the command
        line (or the caller's code) says so, never a job file alone: a job file that came with
        a cloned repository could otherwise mount ``/`` or the Docker socket, or run privileged
        (every device, every capability: Docker's run reference, "Runtime privilege"), and act
        as root here, around the job's own network and dropped capabilities. The stack's
        allow_privileged speaks for its nodes, not for this machine."""
        from launcher.job.validation import host_mounts_words

        if spec.privileged and not self.privileged:
            raise UsageError(
                "privileged: a local run starts a privileged container (root on this machine: "
                "its devices, its network, its files) only when the command line asks for it; "
                "pass --privileged (allow_privileged=True in the Python API and TorchX), not a "
                "job file's privileged: true"
            )

        mounts = spec.host_mounts
        if mounts and not self.host_mounts:
            raise UsageError(
                f"{host_mounts_words(mounts)}: a local run mounts this machine's paths or "
                "devices only when the command line allows it; pass --allow-host-mounts "
                "(allow_host_mounts=True in the Python API and TorchX)"
            )

    def preflight(self, progress: ProgressFn | None = None) -> None:
        pass  # nothing of the account's network stands between the engine and its jobs

    def has_image(self, image: str) -> bool:
        """In the local engine, or else in its registry (where the engine pulls it from)."""
        import docker.errors

        from launcher.docker_client import docker_client
        from launcher.image.build import image_exists

        try:
            docker_client().images.get(image)
            return True
        except docker.errors.ImageNotFound:
            return image_exists(image, self.aws)

    def submitted(self, spec: JobSpec) -> str:
        fsx = f", FSx at {self.fsx_dir}" if self.fsx_dir else ""
        return f"started {spec.name} locally: {shape(spec)}, EFS at {self.efs_dir}{fsx}"

    def copy_source(self, base: Reference) -> Reference:
        return base  # the local engine reads what this machine reads

    def copy_where(self) -> str:
        return "in a local copy job (Docker engine)"

    def puller(self) -> Puller:
        """The local engine, by its version (one call to it)."""
        from launcher.docker_client import docker_client
        from launcher.image.pullers import docker_engine

        return docker_engine(str(docker_client().version().get("Version", "")))

    def payloads(self, call_id: str, efs_path: str) -> Payloads:
        """A directory of the EFS stand-in, which every local node mounts at ``efs_path``."""
        from launcher.local.payloads import DirectoryPayloads

        return DirectoryPayloads(self.efs_dir, efs_path, call_id)

    def image_environment(self, image: str, platform: str) -> dict[str, str]:
        """From the local engine's copy, else from its registry (as ``has_image``)."""
        import docker.errors

        from launcher.docker_client import docker_client
        from launcher.image.build import image_environment, variables

        try:
            env = docker_client().images.get(image).attrs.get("Config", {}).get("Env") or []
        except docker.errors.ImageNotFound:
            return image_environment(image, platform, self.aws)
        return variables(env)
