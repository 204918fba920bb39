"""A TorchX scheduler, ``efa_batch``: TorchX apps on an efa-batch cluster (or local Docker).

``pip install ".[torchx]"`` registers it twice, for both TorchX lines:

- the ``torchx.schedulers`` entry-point group (TorchX 0.7.0, the latest release). Once that
  group has any entry, 0.7.0 offers only the entries (TorchX issue 1009), so the group also
  carries 0.7.0's own schedulers (``launcher.torchx.builtins``) and none of them disappears;
- ``torchx_plugins.schedulers.efa_batch`` with ``@register.scheduler()`` (TorchX main and
  torchx-nightly), used where TorchX does not read entry points.

It is a front door to ``launcher.api``, like the CLI: an ``AppDef`` becomes a ``JobSpec``
(roles and replicas -> node groups), the dry run is the same request ``launcher run --dryrun``
prints, and the job runs on the same two backends. Workspaces are built into the role's
image (``launcher.torchx.workspace``): looked up at dry run, pushed at schedule time.

This module is the ``Scheduler`` itself; the AppDef's translation is ``launcher.torchx.appdef``,
the run options ``launcher.torchx.options``, workspaces ``launcher.torchx.workspace``, what
status and list show ``launcher.torchx.status``, and the launcher's errors as TorchX reports
them ``launcher.torchx.errors``.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from torchx.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream
from torchx.specs import (
    AppDef,
    AppDryRunInfo,
    CfgVal,
    runopts,
)

from launcher.api import Cluster, Job, aws_session
from launcher.backend import newest_first
from launcher.errors import LauncherError, UsageError
from launcher.job import jobdef
from launcher.job.info import GroupInfo, JobInfo
from launcher.torchx.appdef import app_to_spec
from launcher.torchx.errors import torchx_errors
from launcher.torchx.options import NAME, Where, migrated, run_options, where_of
from launcher.torchx.status import describe_response, is_app, list_response
from launcher.torchx.workspace import Push, RegistryWorkspace, push_workspaces

if TYPE_CHECKING:
    from launcher.aws.client import Aws


@dataclass
class Request:
    """What ``schedule`` sends: the Batch requests and the workspace layers still to push."""

    requests: jobdef.Requests
    cluster: Where  # where schedule() sends it
    pushes: list[Push] = field(default_factory=list)  # workspace layers still to push

    def __str__(self) -> str:
        return json.dumps(self.requests.as_dict(), indent=2)


class EfaBatchScheduler(RegistryWorkspace, Scheduler[Mapping[str, CfgVal]]):
    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__(NAME, session_name)
        self._clusters: dict[Where, Cluster] = {}
        self._roles: dict[str, dict[str, GroupInfo]] = {}
        self._lock = threading.Lock()
        self._session: Aws | None = None

    def _run_opts(self) -> runopts:
        return run_options()

    def _cluster(self, cfg: Mapping[str, CfgVal]) -> Cluster:
        return self._cluster_at(where_of(cfg))

    def _cluster_at(self, key: Where) -> Cluster:
        """The cluster of a stack, on AWS or (``local``) on the local Docker engine."""
        if key not in self._clusters:
            stack, profile, region, local, host_mounts, privileged, team = key
            cluster = Cluster.from_stack(stack, profile=profile, region=region, team=team)
            self._clusters[key] = (
                cluster.local(allow_host_mounts=host_mounts, allow_privileged=privileged)
                if local
                else cluster
            )
        return self._clusters[key]

    # --- dry run and schedule -------------------------------------------------------------

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo:
        with torchx_errors():
            return self._dryrun(app, cfg)

    def _dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo:
        where = where_of(cfg)
        cluster = self._cluster_at(where)
        cfg = migrated(cfg, cluster.info)  # aws_batch's options: queue -> pool, or refused
        spec = cluster.spec(spec=app_to_spec(app, cluster.info, cfg))
        request = Request(
            cluster.requests(spec),
            cluster=(cluster.info.stack_name, *where[1:]),
            pushes=self.take_pushes(),
        )
        return AppDryRunInfo(request, str)

    def schedule(self, dryrun_info: AppDryRunInfo) -> str:
        with torchx_errors():
            return self._schedule(dryrun_info.request)

    def _schedule(self, request: Request) -> str:
        cluster = self._cluster_at(request.cluster)
        requests = push_workspaces(cluster, request.pushes, request.requests)
        job = cluster.submit(requests)
        return job.job_id

    # --- reading back ---------------------------------------------------------------------

    def _job(self, app_id: str) -> Job:
        return Job.attach(app_id, aws=self._aws())

    def _aws(self) -> Aws:
        """One AWS session for every call of this scheduler: TorchX calls it from a thread per
        replica, and a session with its clients per thread cost 64 replicas ~12 s of CPU and
        ~0.7 GB here, and held their logs followers apart while they started."""
        with self._lock:
            if self._session is None:
                self._session = aws_session()
            return self._session

    def _info(self, app_id: str) -> JobInfo | None:
        try:
            return self._job(app_id).describe()
        except UsageError:
            return None

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        info = self._info(app_id)
        return None if info is None else describe_response(app_id, info)

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterable[str]:
        job = self._job(app_id)
        groups = self._groups(job)
        if role_name not in groups:
            raise ValueError(f"app {app_id} has no role {role_name!r}; roles: {', '.join(groups)}")
        group = groups[role_name]
        if not 0 <= k <= group.last - group.first:
            raise ValueError(f"role {role_name} has replicas 0-{group.last - group.first}")
        pattern = re.compile(regex) if regex else None
        end = until.timestamp() if until else None
        for line in job.logs(
            node=group.first + k,
            since=since.timestamp() if since else None,
            follow=should_tail,
        ):
            if end is not None and line.timestamp is not None and line.timestamp > end:
                return
            if pattern is None or pattern.search(line.message):
                yield line.message + "\n"

    def _groups(self, job: Job) -> dict[str, GroupInfo]:
        """An app's roles as node ranges, read once per app (they are fixed when it is
        submitted): ``torchx log`` asks from a thread per replica at once, and one DescribeJobs
        answers them all. The replicas' lines are read together too (``launcher.aws.follow``)."""
        with self._lock:  # held while describing: the other threads wait for the answer
            if job.job_id not in self._roles:
                info = job.status()
                self._roles[job.job_id] = {g.name: g for g in info.groups} or {
                    "main": GroupInfo("main", 0, info.nodes - 1)
                }
            return self._roles[job.job_id]

    def list(self, cfg: Mapping[str, CfgVal] | None = None) -> list[ListAppResponse]:
        """Every TorchX app of the stack: in each of its pools on AWS (whatever ``pool`` the
        config names: TorchX 0.7.0 passes no config, nightly the .torchxconfig's), and on the
        local engine, newest first; jobs not submitted through TorchX are left out (by their
        tags, ``status.is_app``). On AWS: one ListJobs per pool (per 100 jobs), one
        DescribeJobs per 100 jobs of a pool (ListJobs gives no tags); local jobs' records keep
        theirs."""
        stack, profile, region, *_ = where_of(cfg or {})
        cluster = self._cluster_at((stack, profile, region, False, False, False, None))
        jobs = cluster.list(all=True, every_pool=True, tags=True)
        with contextlib.suppress(LauncherError):  # no local state to read: no local jobs
            jobs += cluster.local().list(all=True, every_pool=True, tags=True)
        apps = newest_first((j for j in jobs if is_app(j)), include_finished=True)
        return [list_response(j) for j in apps]

    def _cancel_existing(self, app_id: str) -> None:
        try:
            self._job(app_id).cancel()
        except UsageError as exc:
            if "already" not in str(exc):  # cancel is idempotent in TorchX
                raise

    def _validate(self, app: AppDef, scheduler: str, cfg: Any = None) -> None:
        """Checked in the dry run (one line each); TorchX's own check refuses roles without a
        resource, but here a replica is a node whatever its resource says."""


def create_scheduler(session_name: str, **kwargs: Any) -> EfaBatchScheduler:
    return EfaBatchScheduler(session_name, **kwargs)
