"""The Python API: a cluster found by its stack, and the jobs run on it.

    from launcher import Cluster
    cluster = Cluster.from_stack("EfaBatch")
    job = cluster.run(["python", "train.py"], nodes=2, image=BASE, workspace=".")
    job.wait(timeout=3600)
    for line in job.logs(follow=True): ...

Every run goes validate (spec and cluster) -> workspace image -> register and submit, so bad
input raises ``UsageError`` before anything is uploaded or submitted. Nothing here prints:
steps and transfers go to the optional ``progress`` callback (``launcher.progress``). The CLI
and the TorchX scheduler are front doors to this module.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from launcher import jobdef, jobspec
from launcher.backend import Backend
from launcher.cluster import ClusterInfo
from launcher.errors import RemoteError, UsageError
from launcher.job import JobInfo, LogLine
from launcher.jobspec import JobSpec
from launcher.outputs import DEFAULT_STACK_NAME
from launcher.progress import ProgressFn, say

if TYPE_CHECKING:
    from launcher.copyjob import Copier

STACK_ENV = "LAUNCHER_STACK"
LOCAL_EFS_ENV = "LAUNCHER_LOCAL_EFS"
COPY_IMAGE_ENV = "LAUNCHER_COPY_IMAGE"


def default_stack() -> str:
    return os.environ.get(STACK_ENV, DEFAULT_STACK_NAME)


def aws_session(profile: str | None = None, region: str | None = None):
    from launcher.aws import Aws

    return Aws(profile=profile, region=region)


def make_spec(command: Sequence[str], **options) -> JobSpec:
    """A job spec from a command and keyword options, validated on its own (no cluster):
    ``nodes``, ``image``, ``env`` (mapping or pairs), ``mounts``, ``gpus_per_node``, ``efa``,
    ``shm_mib``, ``timeout_seconds``, ``attempts``, ``share_id``, ``priority``, ``tags``,
    ``torchrun``, ``rendezvous_port``, ``groups`` and ``name`` (default: from the command)."""
    command = tuple(command)
    options.setdefault("name", jobspec.default_name(command))
    for key in ("env", "tags"):
        if isinstance(options.get(key), dict):
            options[key] = tuple(options[key].items())
    if not options.get("image"):
        raise UsageError("--image: no base image; pass --image or set LAUNCHER_IMAGE")
    return JobSpec(command=command, **options)


def backend_for(job_id: str, aws=None) -> Backend:
    """The backend that owns a job id: ``local-...`` ids are the local engine's."""
    from launcher import local

    if local.is_local(job_id):
        return local.LocalBackend()
    from launcher.batch import BatchBackend

    return BatchBackend(aws or aws_session())


@dataclass
class Job:
    """A job on one backend; every method is one round of calls to it."""

    job_id: str
    backend: Backend

    @classmethod
    def attach(cls, job_id: str, *, profile: str | None = None, region: str | None = None) -> Job:
        """A job by its id, without reading any stack (``status`` costs one call)."""
        from launcher import local

        aws = None if local.is_local(job_id) else aws_session(profile, region)
        return cls(job_id, backend_for(job_id, aws))

    def status(self) -> JobInfo:
        return self.backend.describe(self.job_id)

    def describe(self) -> JobInfo:
        """The job and each node's state (one more call on AWS)."""
        return self.backend.describe(self.job_id, nodes=True)

    def logs(
        self,
        *,
        node: int | None = None,
        since: float | None = None,
        follow: bool = False,
        attempt: int | None = None,
    ) -> Iterator[LogLine]:
        """Each node's lines; ``since`` in seconds since the epoch; ``follow`` until the end;
        ``attempt`` (1-based) one attempt's, default the latest."""
        return self.backend.log_iter(
            self.job_id, node=node, since=since, follow=follow, attempt=attempt
        )

    def resubmit(self, progress: ProgressFn | None = None) -> Job:
        """The same job again, continuing from this one's checkpoint directory."""
        new_id, _ = self.backend.resubmit(self.job_id, say(progress))
        return Job(new_id, self.backend)

    def cancel(self) -> JobInfo:
        return self.backend.cancel(self.job_id)

    def lost_nodes(self, info: JobInfo) -> str | None:
        """Which nodes a job that ended with the node watch's exit code lost or never saw
        start, in the main node's own words (its last lines, one or two more calls)."""
        from launcher.prelude import LOST_NODES_LINE, NODE_LOST_EXIT

        if not info.state.terminal or info.last_exit_code != NODE_LOST_EXIT:
            return None
        since = info.stopped_at - 600 if info.stopped_at else None
        found = None
        for line in self.logs(node=0, since=since):
            if LOST_NODES_LINE.match(line.message):
                found = line.message.removeprefix("launcher: ")
        return found

    def wait(self, timeout: float | None = None, poll: float = 5.0) -> JobInfo:
        """Until the job ends, or ``timeout`` seconds pass (then its state at that moment)."""
        end = time.monotonic() + timeout if timeout is not None else None
        while not (info := self.status()).state.terminal:
            if end is not None and time.monotonic() >= end:
                return info
            time.sleep(poll if end is None else max(0.0, min(poll, end - time.monotonic())))
        return info


class Cluster:
    """The cluster of one efa-batch stack, discovered from its outputs."""

    def __init__(self, info: ClusterInfo, aws=None, copier: Copier | None = None) -> None:
        self.info = info
        self._aws = aws
        self._copier = copier

    @classmethod
    def from_stack(
        cls,
        name: str | None = None,
        *,
        profile: str | None = None,
        region: str | None = None,
        aws=None,
    ) -> Cluster:
        """The stack named ``name`` (default: ``$LAUNCHER_STACK``, then ``EfaBatch``); one
        DescribeStacks call. ``aws``: a ``launcher.aws.Aws`` to share (it counts calls)."""
        from launcher.cluster import from_stack

        aws = aws or aws_session(profile, region)
        return cls(from_stack(aws.describe_stack(name or default_stack())), aws)

    @property
    def aws(self):
        if self._aws is None:
            self._aws = aws_session(region=self.info.region)
        return self._aws

    @property
    def copier(self) -> Copier:
        """What copy jobs run: the stack's copier image (``$LAUNCHER_COPY_IMAGE`` overrides
        it), unless the cluster was given another."""
        from launcher.copyjob import Copier

        if self._copier is not None:
            return self._copier
        return Copier(os.environ.get(COPY_IMAGE_ENV) or self.info.copy_image)

    @property
    def platform(self) -> str:
        instance = self.info.instance
        return f"linux/{instance.architecture if instance else 'amd64'}"

    # --- the account's part of the network --------------------------------------------------

    def task_group_findings(self):
        """What the VPC's default group lacks for jobs (``launcher.security``); one call."""
        from launcher.security import default_group_findings

        group = self.info.task_security_group_id
        return default_group_findings(group, self.aws.security_group_rules(group))

    def require_task_group(self, progress: ProgressFn | None = None) -> None:
        """RemoteError when the default group lacks what jobs need, before anything is built or
        submitted; a group found fine is not asked about again for an hour (a cache file)."""
        from launcher import preflight

        group = self.info.task_security_group_id
        if preflight.recently_fine(group):
            return
        findings = self.task_group_findings()
        for note in findings.notes:
            say(progress)(f"warning: {note}")
        if not findings.ok:
            raise RemoteError(f"cluster {self.info.stack_name}: {findings.line()}")
        preflight.remember_fine(group)

    # --- building requests (no side effects) --------------------------------------------

    def spec(
        self, command: Sequence[str] | None = None, *, spec: JobSpec | None = None, **options
    ) -> JobSpec:
        """A spec (``make_spec``'s options, or one made already) checked against this cluster:
        node count, GPUs, EFA, shared memory, fair share. Raises UsageError; no I/O."""
        if spec is None:
            if command is None:
                raise UsageError(
                    "no command given; put it after --, e.g. launcher run -- python train.py"
                )
            spec = make_spec(command, **options)
        jobdef.validate(spec, self.info)
        return spec

    def requests(self, spec: JobSpec) -> jobdef.Requests:
        return jobdef.build(spec, self.info)

    # --- workspace images ---------------------------------------------------------------

    def build(
        self,
        image: str,
        workspace: str | os.PathLike = ".",
        *,
        builder: str = "auto",
        platform: str | None = None,
        dryrun: bool = False,
        progress: ProgressFn | None = None,
        local: bool = False,
        local_efs: str | os.PathLike | None = None,
        stream_base: bool = False,
    ):
        """Patch ``workspace`` into ``image`` in the cluster's registry; ``.reference`` is
        ``REPO@sha256:...``. With ``dryrun`` the digest is computed and nothing is pushed.

        Base layers missing from the registry are copied by a copy job on the cluster (the
        local engine with ``local``), never through this machine unless ``stream_base``."""
        from launcher.image.build import workspace_image

        return workspace_image(
            image,
            workspace,
            self.info.repository_uri,
            aws=self.aws,
            builder=builder,
            platform=platform or self.platform,
            dryrun=dryrun,
            progress=progress,
            base_copy=None if stream_base else self.base_copy(local, local_efs, progress),
            stream_base=stream_base,
        )

    def base_copy(
        self,
        local: bool = False,
        local_efs: str | os.PathLike | None = None,
        progress: ProgressFn | None = None,
    ):
        """Copy jobs on this cluster's copy queue (or the local engine), as ``BaseCopy``."""
        from launcher.basecopy import JobCopy

        if self.copier.mounts and not local:
            raise UsageError("a copier with bind mounts runs on the local backend only")
        if local:
            return JobCopy(self.info, self.local_backend(local_efs), self.copier, progress)
        from launcher.batch import BatchBackend

        copies = BatchBackend(self.aws, self.info.copy_queue_arn)
        return JobCopy(self.info, copies, self.copier, progress, self._in_cache)

    def _in_cache(self, ref) -> bool:
        from launcher.image.auth import ECR_HOST

        ecr = ECR_HOST.match(ref.registry)
        return bool(ecr) and self.aws.has_image(
            ref.repository, ref.digest, ecr["account"], ecr["region"]
        )

    def mirror(
        self,
        image: str,
        *,
        platform: str | None = None,
        local: bool = False,
        local_efs: str | os.PathLike | None = None,
        dryrun: bool = False,
        progress: ProgressFn | None = None,
    ) -> str:
        """Copy ``image`` (its manifest for the cluster's platform) into the cluster's
        repository with a copy job; ``REPO@sha256:...``. Later runs on it move no base layer."""
        from launcher.image.build import mirror

        return mirror(
            image,
            self.info.repository_uri,
            aws=self.aws,
            platform=platform or self.platform,
            base_copy=self.base_copy(local, local_efs, progress),
            dryrun=dryrun,
            progress=progress,
        )

    def with_workspace(
        self,
        spec: JobSpec,
        workspace: str | os.PathLike | None,
        *,
        builder: str = "auto",
        platform: str | None = None,
        dryrun: bool = False,
        progress: ProgressFn | None = None,
        **image_options,
    ) -> JobSpec:
        """The spec with every image it names replaced by that image plus the workspace
        (``image_options``: ``build``'s ``local``, ``local_efs``, ``stream_base``)."""
        spec, _ = self._with_workspace(
            spec,
            workspace,
            builder=builder,
            platform=platform,
            dryrun=dryrun,
            progress=progress,
            **image_options,
        )
        return spec

    def _with_workspace(self, spec: JobSpec, workspace, **options) -> tuple[JobSpec, list]:
        """``with_workspace``, and what each build did (``Patched``)."""
        if workspace is None:
            return spec, []
        if not Path(workspace).is_dir():
            raise UsageError(f"--workspace {os.fspath(workspace)!r}: no such directory")
        images = {spec.image} | {g.image for g in spec.groups if g.image}
        built, results = {}, []
        for image in sorted(images):
            result = self.build(image, workspace, **options)
            reused = " (unchanged, reused)" if result.reused else ""
            say(options.get("progress"))(f"workspace image {result.reference}{reused}")
            built[image] = result.reference
            results.append(result)
        groups = tuple(
            dataclasses.replace(g, image=built[g.image]) if g.image else g for g in spec.groups
        )
        return dataclasses.replace(spec, image=built[spec.image], groups=groups), results

    # --- running ------------------------------------------------------------------------

    def dryrun(
        self,
        command: Sequence[str] | None = None,
        *,
        spec: JobSpec | None = None,
        workspace: str | os.PathLike | None = None,
        builder: str = "auto",
        platform: str | None = None,
        progress: ProgressFn | None = None,
        stream_base: bool = False,
        **options,
    ) -> dict:
        """The exact RegisterJobDefinition and SubmitJob requests (what ``--dryrun`` prints);
        the workspace image's digest is computed from registry reads, nothing is pushed.
        ``copyBase``: the copy jobs a run would start for base layers not yet in place."""
        spec = self.spec(command, spec=spec, **options)
        spec, built = self._with_workspace(
            spec,
            workspace,
            builder=builder,
            platform=platform,
            dryrun=True,
            progress=progress,
            stream_base=stream_base,
        )
        document = self.requests(spec).as_dict()
        copies = [b.plan for b in built if b.plan is not None and b.plan.how == "copy"]
        if copies:  # what would move base layers, and where: the copy jobs' requests
            from launcher.image.build import target_repository

            target = target_repository(self.info.repository_uri)
            base_copy = self.base_copy(progress=progress)
            document["copyBase"] = [
                {"bytes": plan.bytes, **base_copy.requests(plan.source, target).as_dict()}
                for plan in copies
            ]
        return document

    def run(
        self,
        command: Sequence[str] | None = None,
        *,
        spec: JobSpec | None = None,
        workspace: str | os.PathLike | None = None,
        builder: str = "auto",
        platform: str | None = None,
        local: bool = False,
        local_efs: str | os.PathLike | None = None,
        progress: ProgressFn | None = None,
        stream_base: bool = False,
        **options,
    ) -> Job:
        """Validate, build the workspace image, then submit (``local=True``: run on Docker)."""
        spec = self.spec(command, spec=spec, **options)  # all checks before any side effect
        backend = self.local_backend(local_efs) if local else self.backend()
        if not local:
            self.require_task_group(progress)
        spec = self.with_workspace(
            spec,
            workspace,
            builder=builder,
            platform=platform,
            progress=progress,
            local=local,
            local_efs=local_efs,
            stream_base=stream_base,
        )
        requests = self.requests(spec)
        job_id = backend.schedule(requests, say(progress))
        if local:
            say(progress)(
                f"started {spec.name} locally: {spec.nodes} node(s), EFS at {backend.efs_dir}"
            )
        else:
            say(progress)(
                f"submitted {spec.name} to {self.info.job_queue_name}: "
                f"{spec.nodes} x {self.info.instance_type}"
            )
        return Job(job_id, backend)

    def submit(self, requests: jobdef.Requests, *, local: bool = False, progress=None) -> Job:
        """Send requests built earlier (``requests``/``dryrun``) as they are."""
        backend = self.local_backend() if local else self.backend()
        return Job(backend.schedule(requests, say(progress)), backend)

    # --- proving the cluster ------------------------------------------------------------

    def require_image(self, image: str, *, local: bool = False) -> None:
        """UsageError unless the image exists (locally, for a local run, or in its registry)."""
        from launcher.image.build import image_exists

        if local:
            from launcher.docker_client import docker_client

            try:
                docker_client().images.get(image)
                return
            except Exception:  # not in the local engine: the registry decides
                pass
        if not image_exists(image, self.aws):
            raise UsageError(f"--image {image}: no such image in its registry")

    def check(
        self,
        *,
        nodes: int | None = None,
        image: str | None = None,
        local: bool = False,
        local_efs: str | os.PathLike | None = None,
        timeout: int = 1800,
        port: int = 29500,
        progress: ProgressFn | None = None,
    ):
        """Run ``launcher check``'s job and evaluate it (``launcher.check.Report``)."""
        from launcher import check, preflight

        nodes = nodes if nodes is not None else min(2, self.info.max_nodes)
        image = image or check.DEFAULT_IMAGE
        spec = self.spec(spec=check.spec(self.info, nodes, image, port, max(60, timeout)))
        group = None
        if not local:
            findings = self.task_group_findings()
            group = check.task_group_result(findings)
            if not findings.ok:  # the job would hang in the rendezvous until its timeout
                return check.Report(cluster=[group])
            preflight.remember_fine(findings.group_id)
        self.require_image(image, local=local)
        job = self.run(spec=spec, local=local, local_efs=local_efs, progress=progress)
        info = job.wait(timeout=timeout + 120, poll=2)
        if not info.state.terminal:
            job.cancel()
            info = job.wait(timeout=120, poll=2)
        report = check.evaluate(
            [line.message for line in job.logs()], nodes, self.info, local=local
        )
        report.job = info
        if group is not None:
            report.cluster.insert(0, group)
        return report

    # --- backends and lookups -----------------------------------------------------------

    def backend(self) -> Backend:
        from launcher.batch import BatchBackend

        return BatchBackend(self.aws, self.info.job_queue_arn)

    def local_backend(self, efs_dir: str | os.PathLike | None = None) -> Backend:
        from launcher.local import LocalBackend

        efs = (
            efs_dir
            or os.environ.get(LOCAL_EFS_ENV)
            or Path.home() / ".local" / "share" / "efa-batch" / "efs" / self.info.stack_name
        )
        return LocalBackend(queue=self.info.job_queue_name, efs_dir=os.fspath(efs))

    def job(self, job_id: str) -> Job:
        from launcher import local

        return Job(job_id, self.local_backend() if local.is_local(job_id) else self.backend())

    def list(self, *, all: bool = False, local: bool = False) -> list[JobInfo]:  # noqa: A002
        backend = self.local_backend() if local else self.backend()
        return backend.list(include_finished=all)
