"""Python functions on the cluster: ``cluster.remote(fn, ...)`` and what it returns.

    train = cluster.remote(train, nodes=2, image=BASE, workspace=".", ranks="all")
    losses = train(epochs=3)              # every node's value, node 0 first
    call = train.submit(epochs=3)         # or: a FunctionCall to wait on later
    call.result(timeout=3600)

A call is a job like ``run``'s (the same checks, pool, image, workspace, secrets and data
options, and the same retries), whose command is the runner (launcher.node.function), and a
directory of objects (``Target.payloads``: the stack's function bucket on AWS, the EFS
stand-in locally): the launcher writes the payload there before it submits, the nodes write
their results, and the launcher reads them back once the job has ended, then removes them.
What the function prints is the job's log, as any command's (``call.job.logs()``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from launcher.api.jobs import Job
from launcher.errors import FunctionError
from launcher.job import function, jobdef
from launcher.job.info import JobInfo, JobState
from launcher.job.volumes import efs_path
from launcher.node.function import PAYLOAD
from launcher.progress import ProgressFn, say

if TYPE_CHECKING:
    from launcher.api.cluster import Cluster
    from launcher.backend import Payloads
    from launcher.job.jobspec import JobSpec

T = TypeVar("T")

# The options of ``Cluster.remote`` that are not ``make_spec``'s: how the image is built.
BUILD_OPTIONS = ("builder", "platform", "stream_base", "compression")


class FunctionCall(Generic[T]):
    """One call of a remote function: its job, and its value once the job has ended."""

    def __init__(
        self, job: Job, payloads: Payloads, nodes: int, ranks: str, fn: Callable[..., T]
    ) -> None:
        self.job, self._payloads, self.nodes, self.ranks, self.fn = job, payloads, nodes, ranks, fn
        self._read: tuple[JobInfo, dict[int, bytes]] | None = None  # the job's end, the results

    @property
    def job_id(self) -> str:
        return self.job.job_id

    @property
    def location(self) -> str:
        """Where the call's payload and results are (``s3://...`` or the nodes' directory)."""
        return self._payloads.location

    def done(self) -> bool:
        """Whether the job has ended (one status call)."""
        return self.job.status().state.terminal

    def cancel(self) -> JobInfo:
        return self.job.cancel()

    def result(
        self, timeout: float | None = None, poll: float = 5.0, waiting: ProgressFn | None = None
    ) -> Any:
        """The main node's value (``ranks="main"``) or every node's, node 0 first (``"all"``),
        once the job has ended. What the function raised on a node is raised here, with the
        remote traceback as its cause; ``FunctionError`` when the job ended without a result
        (cancelled, timed out, a node lost) or with a value this side cannot load;
        ``TimeoutError`` when ``timeout`` seconds pass first (the job goes on)."""
        if self._read is None:
            info = self.job.wait(timeout=timeout, poll=poll, waiting=waiting)
            if not info.state.terminal:
                raise TimeoutError(f"job {self.job_id} is still {info.state} after {timeout} s")
            found: dict[int, bytes] = {}
            for rank in self._ranks:
                if (data := self._payloads.get(function.result_name(rank))) is not None:
                    found[rank] = data
            self._read = (info, found)
            self._forget()  # read once, kept here: result() may be asked again
        info, found = self._read
        outcomes = {r: function.parse_result(r, d) for r, d in found.items()}
        # A node that failed is said first, the main node's failure before a worker's.
        for outcome in outcomes.values():
            if outcome.status != "ok":
                text = function.located(outcome.traceback, self.fn)
                function.value_of(dataclasses.replace(outcome, traceback=text))  # raises
        missing = [r for r in self._ranks if r not in outcomes]
        if old := function.stale(outcomes):
            raise FunctionError(
                f"job {self.job_id}: node(s) {' '.join(map(str, old))} left a result of an "
                f"earlier attempt than node 0's ({outcomes[0].attempt}); its log: launcher "
                f"logs {self.job_id}"
            )
        if missing:
            raise FunctionError(_no_result(info, missing))
        values = [function.value_of(outcomes[r]) for r in self._ranks]
        return values if self.ranks == "all" else values[0]

    @property
    def _ranks(self) -> range:
        return range(self.nodes) if self.ranks == "all" else range(1)

    def _forget(self) -> None:
        """The call's objects, read once, are removed (the bucket's lifecycle would later)."""
        names = [PAYLOAD, *(function.result_name(r) for r in range(self.nodes))]
        self._payloads.remove(names)


def _no_result(info: JobInfo, missing: list[int]) -> str:
    nodes = " ".join(map(str, missing))
    why = f" ({info.reason})" if info.reason else ""
    if info.state is JobState.SUCCEEDED:
        return f"job {info.job_id} SUCCEEDED but node(s) {nodes} left no result"
    return (
        f"job {info.job_id} {info.state}{why} and node(s) {nodes} left no result; its log: "
        f"launcher logs {info.job_id}"
    )


class RemoteFunction(Generic[T]):
    """A function bound to a cluster and a job's options (``Cluster.remote``): call it as the
    function itself, or ``submit`` it and wait later."""

    def __init__(
        self,
        cluster: Cluster,
        fn: Callable[..., T],
        *,
        ranks: str = "main",
        python: str = "python3",
        workspace: str | os.PathLike[str] | None = None,
        progress: ProgressFn | None = None,
        **options: Any,
    ) -> None:
        function.check_ranks(ranks)
        self.cluster, self.fn, self.ranks, self.python = cluster, fn, ranks, python
        self.workspace, self.progress = workspace, progress
        self._build = {k: options.pop(k) for k in BUILD_OPTIONS if k in options}
        self._options = function.spec_options(fn, options)
        self.spec = cluster.spec(function.command(python), **self._options)  # checked now

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.submit(*args, **kwargs).result(waiting=self.progress)

    def submit(self, *args: Any, **kwargs: Any) -> FunctionCall[T]:
        """Pack the call (UsageError for what cannot travel, before anything is sent), build
        the workspace image, write the payload, submit."""
        payload = function.pack(self.fn, args, kwargs)
        cluster = self.cluster.in_pool(self.spec.pool)
        payloads = cluster.target.payloads(function.new_call_id(), efs_path(self.spec))
        cluster.check_after(self.spec)
        cluster.window_for(self.spec)
        cluster.target.preflight(self.progress)
        self._check_image(cluster)  # before the workspace's layer is built and sent
        spec = cluster.with_workspace(
            self.spec, self.workspace, progress=self.progress, **self._build
        )
        requests = self._requests(cluster, spec, payloads)
        payloads.put(PAYLOAD, payload)
        say(self.progress)(f"sent {function.describe(self.fn)} ({_size(len(payload))})")
        try:
            job = cluster.submit(requests, progress=self.progress)
        except BaseException:
            payloads.remove([PAYLOAD])  # no job will read it
            raise
        say(self.progress)(cluster.target.submitted(spec))
        return FunctionCall(job, payloads, spec.nodes, self.ranks, self.fn)

    def dryrun(self, *args: Any, **kwargs: Any) -> dict[str, object]:
        """The requests a call would send, with where its payload would be (``payload``);
        nothing is written, built or submitted."""
        payload = function.pack(self.fn, args, kwargs)
        cluster = self.cluster.in_pool(self.spec.pool)
        payloads = cluster.target.payloads(function.new_call_id(), efs_path(self.spec))
        document = self.cluster.dryrun(
            spec=self.spec, workspace=self.workspace, progress=self.progress, **self._build
        )
        self._check_image(cluster)
        register = dict(document["registerJobDefinition"])  # type: ignore[call-overload]
        env = function.environment(payloads.location, payloads.region, self.ranks)
        requests = jobdef.Requests(register, dict(document["submitJob"]))  # type: ignore[call-overload]
        document.update(jobdef.with_submit_environment(requests, env).as_dict())
        document["payload"] = {
            "location": payloads.location + PAYLOAD,
            "bytes": len(payload),
        }
        return document

    def _check_image(self, cluster: Cluster) -> None:
        """The image's Python, where its config says it (``PYTHON_VERSION``, as the Docker
        official python images set it), against this one's: UsageError before anything is
        sent. The base's config is read: a workspace's layer keeps its variables. An image
        that does not say is checked by the runner before it loads the call."""
        image = self.spec.image
        platform = self._build.get("platform") or cluster.platform
        env = cluster.target.image_environment(image, platform)
        function.check_python(env.get("PYTHON_VERSION"), image, function.caller_versions())

    def _requests(self, cluster: Cluster, spec: JobSpec, payloads: Payloads) -> jobdef.Requests:
        env = function.environment(payloads.location, payloads.region, self.ranks)
        return jobdef.with_submit_environment(cluster.requests(spec, self.progress), env)


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{max(1, round(n / 1024))} KiB"
