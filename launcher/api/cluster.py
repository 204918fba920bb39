"""The cluster of one efa-batch stack (``Cluster``): found by its stack's outputs, bound once to
where its jobs run (``launcher.target``), and the one way a job is checked, built and sent.

Every run goes validate (spec and cluster) -> workspace image -> register and submit, so bad
input raises ``UsageError`` before anything is uploaded or submitted. What a run in a Capacity
Block's pool is told is ``launcher.api.capacity_block``'s, the workspace images
``launcher.api.images``'s, and the jobs it returns ``launcher.api.jobs``'.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from launcher.api import capacity_block, images
from launcher.api.backends import aws_session, default_stack
from launcher.api.images import BuildOptions
from launcher.api.jobs import Job
from launcher.backend import newest_first
from launcher.errors import UsageError
from launcher.job import capacity, jobdef, teams, validation
from launcher.job.info import JobInfo
from launcher.job.jobspec import DEFAULT_RENDEZVOUS_PORT, JobSpec
from launcher.job.options import make_spec
from launcher.progress import ProgressFn, say
from launcher.stack.cluster import ClusterInfo
from launcher.target import AwsTarget, LocalTarget, Target

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's own from Python 3.11

    from launcher.api.functions import RemoteFunction
    from launcher.aws.client import Aws
    from launcher.copyjob.plan import CopierImage
    from launcher.copyjob.run import CopyJobRunner
    from launcher.image.patch import Patched
    from launcher.job.check import Report
    from launcher.job.readiness import Finding

T = TypeVar("T")
COPY_IMAGE_ENV = "LAUNCHER_COPY_IMAGE"  # another image for copy jobs than the stack's


class Cluster:
    """The cluster of one efa-batch stack, discovered from its outputs, and where its jobs run
    (``launcher.target``): AWS from ``from_stack``, the local Docker engine from ``local()``."""

    def __init__(
        self,
        info: ClusterInfo,
        aws: Aws | None = None,
        copier: CopierImage | None = None,
        target: Target | None = None,
    ) -> None:
        self.info = info
        self._aws = aws
        self._copier = copier
        self._target = target
        self._block: capacity.Lookup | None = None  # the pool's Capacity Block, once read

    @property
    def target(self) -> Target:
        """Where this cluster's jobs run; AWS unless the cluster was made ``local()``."""
        if self._target is None:
            self._target = AwsTarget(self.info, self.aws)
        return self._target

    @classmethod
    def from_stack(
        cls,
        name: str | None = None,
        *,
        profile: str | None = None,
        region: str | None = None,
        aws: Aws | None = None,
        team: str | None = None,
    ) -> Cluster:
        """The stack named ``name`` (default: ``$LAUNCHER_STACK``, then ``EfaBatch``); one
        DescribeStacks call. ``aws``: a ``launcher.aws.client.Aws`` to share (it counts calls).

        On a stack with teams, the cluster as one team sees it (``launcher.job.teams.choose``):
        ``team``, else ``$LAUNCHER_TEAM``, else the stack's only team; with several and none
        chosen, whatever submits is refused in one line. SettingError, before any call after
        DescribeStacks, for a team the stack lacks or ``team`` on a stack without teams."""
        from launcher.stack.cluster import from_stack

        aws = aws or aws_session(profile, region)
        info = from_stack(aws.describe_stack(name or default_stack()))
        return cls(teams.choose(info, team, os.environ.get(teams.TEAM_ENV)), aws)

    def local(
        self,
        efs_dir: str | os.PathLike[str] | None = None,
        fsx_dir: str | os.PathLike[str] | None = None,
        network: str | None = None,
        *,
        allow_host_mounts: bool = False,
        allow_privileged: bool = False,
    ) -> Cluster:
        """This cluster's jobs on the local Docker engine instead: the same job definitions,
        one container per node, ``efs_dir`` (default ``$LAUNCHER_LOCAL_EFS``, then
        ``~/.local/share/efa-batch/efs/STACK``) standing in for EFS and ``fsx_dir`` (likewise
        ``$LAUNCHER_LOCAL_FSX``, ``.../fsx/STACK``) for FSx for Lustre, where the stack has
        it; secrets from ``$LAUNCHER_LOCAL_SECRETS`` (launcher.local.secret_values);
        ``network`` (default ``$LAUNCHER_LOCAL_NETWORK``, then ``none``): ``none`` (the job's
        own, loopback only), ``bridge`` (and outbound traffic) or ``host`` (this machine's);
        ``allow_host_mounts``: jobs may mount this machine's paths and devices (``type=bind``,
        ``type=device``; ``--allow-host-mounts``), which a job file alone never allows;
        ``allow_privileged``: jobs may run privileged (root here; ``--privileged`` on the
        command line), likewise."""
        return Cluster(
            self.info,
            self._aws,
            self._copier,
            LocalTarget(
                self.info,
                efs_dir,
                self._aws,
                fsx_dir,
                network,
                allow_host_mounts,
                allow_privileged,
            ),
        )

    def in_pool(self, name: str | None) -> Cluster:
        """The cluster as one of its pools sees it: that pool's queue and nodes (None: this
        view). UsageError naming the pools there are; no I/O."""
        info = self.info.pool(name)
        if info is self.info:
            return self
        target = self._target.seen_from(info) if self._target is not None else None
        return Cluster(info, self._aws, self._copier, target)

    @property
    def aws(self) -> Aws:
        if self._aws is None:
            self._aws = aws_session(region=self.info.region)
        return self._aws

    @property
    def copier(self) -> CopierImage:
        """What copy jobs run: the stack's copier image (``$LAUNCHER_COPY_IMAGE`` overrides
        it), unless the cluster was given another."""
        from launcher.copyjob.plan import CopierImage

        if self._copier is not None:
            return self._copier
        return CopierImage(os.environ.get(COPY_IMAGE_ENV) or self.info.copy_image)

    @property
    def platform(self) -> str:
        instance = self.info.instance
        return f"linux/{instance.architecture if instance else 'amd64'}"

    # --- building requests (no side effects) --------------------------------------------

    def spec(
        self,
        command: Sequence[str] | None = None,
        *,
        spec: JobSpec | None = None,
        **options: object,
    ) -> JobSpec:
        """A spec (``make_spec``'s options, or one made already) checked against this cluster
        and where it runs: node count, GPUs, EFA, shared memory, fair share, host mounts.
        Raises UsageError; no I/O."""
        if spec is None:
            if command is None:
                raise UsageError(
                    "no command given; put it after --, e.g. launcher run -- python train.py"
                )
            spec = make_spec(command, **options)
        validation.validate(spec, self.info)
        self.target.admit(spec)
        return spec

    def requests(self, spec: JobSpec, progress: ProgressFn | None = None) -> jobdef.Requests:
        """The RegisterJobDefinition and SubmitJob requests. In a Capacity Block's pool the
        timeout is checked against the block's window (UsageError) and every node gets its end
        in the submit's overrides (``launcher.job.capacity``): one call, the first time."""
        self.target.admit(spec)  # also for a spec that did not come through ``spec``
        requests = jobdef.build(spec, self.info)
        pool = self.in_pool(spec.pool)
        window = pool.window_for(spec, progress)
        env = pool.checkpoint_environment(spec, window, progress) if window else {}
        return jobdef.with_submit_environment(requests, env)

    def checkpoint_environment(
        self, spec: JobSpec, window: capacity.Window, progress: ProgressFn | None = None
    ) -> dict[str, str]:
        """What every node of a job in this view's block gets (``capacity.environment``), with
        the names of the queue's compute environments, which the prelude's timer compares with
        the attempt's own; a line where the signal will not come as the user may expect."""
        return capacity_block.checkpoint_environment(self.info, spec, window, progress)

    def block(self) -> capacity.Lookup | None:
        """The Capacity Block this view's pool runs in, read once (one call); None: none."""
        block_id = self.info.current_pool.capacity_block_id
        if block_id is None:
            return None
        if self._block is None:
            self._block = capacity_block.read_block(self.aws, block_id)
        return self._block

    def window_for(
        self, spec: JobSpec, progress: ProgressFn | None = None
    ) -> capacity.Window | None:
        """The window of this view's Capacity Block while it has not ended (None: no block,
        or its window could not be read: a warning says so); UsageError when the spec's
        timeout reaches past it."""
        return capacity_block.open_window(self.block(), spec, self.info.pool_name, progress)

    # --- workspace images and bases ---------------------------------------------------------

    def copy_jobs(self, progress: ProgressFn | None = None) -> CopyJobRunner:
        """Copy jobs on this cluster's target (the copy queue, or the local engine)."""
        from launcher.copyjob.run import CopyJobRunner

        if self.copier.mounts and not self.target.rehearsal:
            raise UsageError("a copier with bind mounts runs on the local backend only")
        target = self.target
        return CopyJobRunner(
            self.info,
            target.copies,
            target.copy_source,
            target.copy_where(),
            self.copier,
            progress,
        )

    def build(
        self,
        image: str,
        workspace: str | os.PathLike[str] = ".",
        *,
        builder: str = "auto",
        platform: str | None = None,
        dryrun: bool = False,
        progress: ProgressFn | None = None,
        stream_base: bool = False,
        compression: str | None = None,
        registry: str | None = None,
        dockerfile: str | None = None,
    ) -> Patched:
        """Patch ``workspace`` into ``image`` in the cluster's registry (or ``registry``, a
        HOST[:PORT], with the same repository path); ``.reference`` is ``REPO@sha256:...``.
        With ``dryrun`` the digest is computed and nothing is pushed. ``dockerfile``: the
        workspace's file a Docker build uses (default: $LAUNCHER_DOCKERFILE, Dockerfile.launcher).

        Base layers missing from the registry are copied by a copy job on the cluster's
        target, never through this machine unless ``stream_base``. The workspace layer is
        compressed as ``compression`` (gzip or zstd), by default as the target's nodes read
        best (``launcher.image.pullers``)."""
        from launcher.image.build import Builder, choose_builder, workspace_image

        registry_build = choose_builder(builder, workspace, dockerfile)[0] is Builder.REGISTRY
        # The Docker builder's push picks its own compression: no need to ask the target.
        puller = self.target.puller() if registry_build else None

        return workspace_image(
            image,
            workspace,
            self.info.repository_uri,
            aws=self.aws,
            builder=builder,
            platform=platform or self.platform,
            dryrun=dryrun,
            progress=progress,
            copy_jobs=None if stream_base else self.copy_jobs(progress),
            stream_base=stream_base,
            compression=compression,
            puller=puller,
            registry=registry,
            dockerfile=dockerfile,
        )

    def mirror(
        self,
        image: str,
        *,
        platform: str | None = None,
        dryrun: bool = False,
        progress: ProgressFn | None = None,
    ) -> str:
        """Copy ``image`` (its manifest for the cluster's platform) into the cluster's
        repository with a copy job; ``REPO@sha256:...``. Later runs on it move no base layer."""
        from launcher.image.build import copy_base

        return copy_base(
            image,
            self.info.repository_uri,
            aws=self.aws,
            platform=platform or self.platform,
            copy_jobs=self.copy_jobs(progress),
            dryrun=dryrun,
            progress=progress,
        )

    def with_workspace(
        self,
        spec: JobSpec,
        workspace: str | os.PathLike[str] | None,
        **options: Unpack[BuildOptions],
    ) -> JobSpec:
        """The spec with every image it names replaced by that image plus the workspace
        (``options``: ``build``'s)."""
        spec, _ = self._with_workspace(spec, workspace, **options)
        return spec

    def _with_workspace(
        self,
        spec: JobSpec,
        workspace: str | os.PathLike[str] | None,
        **options: Unpack[BuildOptions],
    ) -> tuple[JobSpec, list[Patched]]:
        """``with_workspace``, and what each build did."""
        return images.with_workspace(
            spec,
            workspace,
            lambda image, path: self.build(image, path, **options),
            options.get("progress"),
        )

    # --- running ------------------------------------------------------------------------

    def dryrun(
        self,
        command: Sequence[str] | None = None,
        *,
        spec: JobSpec | None = None,
        workspace: str | os.PathLike[str] | None = None,
        builder: str = "auto",
        platform: str | None = None,
        progress: ProgressFn | None = None,
        stream_base: bool = False,
        compression: str | None = None,
        **options: object,
    ) -> dict[str, object]:
        """The exact RegisterJobDefinition and SubmitJob requests (what ``--dryrun`` prints);
        the workspace image's digest is computed from registry reads, nothing is pushed.
        ``copyBase``: the copy jobs a run would start for base layers not yet in place."""
        from launcher.image.patch import BaseHandling

        spec = self.spec(command, spec=spec, **options)
        cluster = self.in_pool(spec.pool)  # the pool's queue, nodes and platform
        spec, built = cluster._with_workspace(
            spec,
            workspace,
            builder=builder,
            platform=platform,
            dryrun=True,
            progress=progress,
            stream_base=stream_base,
            compression=compression,
        )
        document: dict[str, object] = dict(cluster.requests(spec, progress).as_dict())
        copies = [b.plan for b in built if b.plan and b.plan.how is BaseHandling.COPY_JOB]
        if copies:  # what would move base layers, and where: the copy jobs' requests
            from launcher.image.build import target_repository

            target = target_repository(self.info.repository_uri)
            runner = cluster.copy_jobs(progress)
            document["copyBase"] = [
                {"bytes": plan.bytes, **runner.requests(plan.source, target).as_dict()}
                for plan in copies
            ]
        return document

    def run(
        self,
        command: Sequence[str] | None = None,
        *,
        spec: JobSpec | None = None,
        workspace: str | os.PathLike[str] | None = None,
        builder: str = "auto",
        platform: str | None = None,
        progress: ProgressFn | None = None,
        stream_base: bool = False,
        compression: str | None = None,
        **options: object,
    ) -> Job:
        """Validate, check the account, build the workspace image, then submit."""
        spec = self.spec(command, spec=spec, **options)  # all checks before any side effect
        cluster = self.in_pool(spec.pool)  # the pool's queue, nodes and platform
        cluster.check_after(spec)
        cluster.window_for(spec)  # a timeout past the Capacity Block's end: refused here
        cluster.target.preflight(progress)
        spec = cluster.with_workspace(
            spec,
            workspace,
            builder=builder,
            platform=platform,
            progress=progress,
            stream_base=stream_base,
            compression=compression,
        )
        job = cluster.submit(cluster.requests(spec, progress), progress=progress)
        say(progress)(cluster.target.submitted(spec))
        return job

    def check_after(self, spec: JobSpec) -> None:
        """The jobs ``spec`` waits for exist where it will run (one describe each, at most
        20), have not failed already, and ``:each`` names an array of the same size."""
        backend = self.target.jobs
        for dependency in spec.after:
            if not backend.owns(dependency.job_id):
                raise UsageError(
                    f"--after {dependency}: not a job id of {backend.name.value} jobs, where "
                    "this job runs"
                )
            info = backend.describe(dependency.job_id)  # UsageError: no such job
            if info.state.value == "FAILED":
                # Batch would fail the dependant at once ("If any of the job dependencies
                # fail, the dependent job automatically transitions from PENDING to FAILED").
                raise UsageError(
                    f"--after {dependency}: that job FAILED already, so this one would too"
                )
            if dependency.each and (not info.is_array or info.array_size != spec.array_size):
                what = f"an array of {info.array_size}" if info.is_array else "not an array"
                raise UsageError(
                    f"--after {dependency}: that job is {what}; ':each' pairs the children of "
                    f"two arrays of one size ({spec.array_size})"
                )

    def submit(self, requests: jobdef.Requests, *, progress: ProgressFn | None = None) -> Job:
        """Send requests built earlier (``requests``/``dryrun``) as they are."""
        backend = self.target.jobs
        return Job(backend.schedule(requests, say(progress)), backend)

    # --- Python functions -----------------------------------------------------------------

    def remote(
        self,
        fn: Callable[..., T],
        *,
        ranks: str = "main",
        python: str = "python3",
        workspace: str | os.PathLike[str] | None = None,
        progress: ProgressFn | None = None,
        **options: Any,
    ) -> RemoteFunction[T]:
        """``fn`` as a job of this cluster (``launcher.api.functions``): calling the result
        runs ``fn`` on ``nodes`` nodes (each with its rank, as ``run``'s commands) and returns
        the main node's value, or with ``ranks="all"`` every node's, node 0 first; ``submit``
        returns a ``FunctionCall`` to wait on. ``options``: ``run``'s (``nodes``, ``image``,
        ``pool``, ``secrets``, ``env``, ``mounts``, ``timeout_seconds``...; ``builder`` and the
        other build options); ``python``: the image's interpreter. Checked now (UsageError)."""
        from launcher.api.functions import RemoteFunction

        return RemoteFunction(
            self, fn, ranks=ranks, python=python, workspace=workspace, progress=progress, **options
        )

    # --- proving the cluster ------------------------------------------------------------

    def require_image(self, image: str) -> None:
        """UsageError unless the image exists where the target's jobs pull it from."""
        if not self.target.has_image(image):
            raise UsageError(f"--image {image}: no such image in its registry")

    def check(
        self,
        *,
        nodes: int | None = None,
        image: str | None = None,
        timeout: int = 1800,
        port: int = DEFAULT_RENDEZVOUS_PORT,
        progress: ProgressFn | None = None,
        pool: str | None = None,
        share_id: str | None = None,
    ) -> Report:
        """Run ``launcher check``'s job on a pool's nodes (default: the default pool's) and
        evaluate it (``launcher.job.check.Report``); ``share_id`` where the fair-share policy
        names teams."""
        from launcher.aws import preflight
        from launcher.job import check

        if (cluster := self.in_pool(pool)) is not self:
            return cluster.check(
                nodes=nodes,
                image=image,
                timeout=timeout,
                port=port,
                progress=progress,
                share_id=share_id,
            )
        if nodes is None:  # two nodes prove the network; a Spot pool runs one-node jobs only
            nodes = 1 if self.info.current_pool.spot else min(2, self.info.max_nodes)
        image = image or check.DEFAULT_IMAGE
        spec = self.spec(spec=check.spec(self.info, nodes, image, port, max(60, timeout), share_id))
        ready = []
        if not self.target.rehearsal:
            ready = check.readiness_results(self.readiness([self.info.pool_name]))
            if any(r.status == check.FAIL for r in ready):  # the job would wait, unseen
                return check.Report(cluster=ready)
        findings = self.target.account_findings()
        group = None
        if findings is not None:
            group = check.task_group_result(findings)
            if not findings.ok:  # the job would hang in the rendezvous until its timeout
                return check.Report(cluster=[group])
            preflight.remember_fine(findings.group_id)
        self.require_image(image)
        job = self.run(spec=spec, progress=progress)
        info = job.wait(timeout=timeout + 120, poll=2)
        if not info.state.terminal:
            job.cancel()
            info = job.wait(timeout=120, poll=2)
        lines = [line.message for line in job.logs()]
        report = check.evaluate(lines, nodes, self.info, local=self.target.rehearsal)
        report.job = info
        report.cluster[:0] = [*ready, *([group] if group is not None else [])]
        return report

    def readiness(self, pools: Sequence[str] = ()) -> list[Finding]:
        """Whether each pool's nodes can start (``launcher.aws.readiness``): quotas, the zone's
        offerings, free addresses, reservations, the AMI and the compute environment; reads
        only. UsageError on the local backend, which has no account to read."""
        from launcher.aws import readiness

        if self.target.rehearsal:
            raise UsageError(
                "--preflight reads the AWS account (quotas, capacity, subnets); a local run "
                "has none to read: drop --local"
            )
        for name in pools:
            self.info.pool(name)  # UsageError naming the pools there are
        return readiness.preflight(self.aws, self.info, pools)

    def preflight(self, pools: Sequence[str] = ()) -> Report:
        """``launcher check --preflight``: the account's part and each pool's readiness, with
        no job (the task security group, then ``readiness``)."""
        from launcher.job import check

        findings = self.target.account_findings()
        rows = check.readiness_results(self.readiness(pools))
        if findings is not None:
            rows.insert(0, check.task_group_result(findings))
        return check.Report(cluster=rows)

    # --- jobs ---------------------------------------------------------------------------

    def job(self, job_id: str) -> Job:
        return Job(job_id, self.target.jobs)

    def list(
        self,
        *,
        all: bool = False,  # noqa: A002
        pool: str | None = None,
        every_pool: bool = False,
        images: bool = False,
        tags: bool = False,
    ) -> list[JobInfo]:
        """The jobs of a pool's queue (the default pool's, or ``pool``; with ``every_pool``
        every queue of the stack), active ones unless ``all``, newest first; with ``images``,
        each job's image (on AWS one more call per 100 job definitions), with ``tags`` its tags
        (on AWS one more call per 100 jobs: ListJobs gives none), which a stack with teams
        always reads: a job's team is its tag (``JobInfo.team``)."""
        names = self.info.pool_names if every_pool else (pool,)
        tags = tags or bool(self.info.teams)
        jobs = []
        for cluster in map(self.in_pool, names):
            queue = cluster.info.job_queue_arn  # ListJobs' summaries omit it
            for job in cluster.target.jobs.list(include_finished=all, images=images, tags=tags):
                jobs.append(job if job.queue else dataclasses.replace(job, queue=queue))
        return newest_first(jobs, include_finished=all)

    def pool_of(self, job: JobInfo) -> str | None:
        """The name of the pool whose queue ``job`` is in; else the one the job carries (a
        local job's record keeps it), or None (not one of this stack's)."""
        for p in self.info.pools:
            if job.queue in (p.queue_arn, p.queue_name):
                return p.name
        return job.pool
