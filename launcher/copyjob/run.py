"""Copy jobs run on a target's copy backend: what the workspace image calls when a base must
move (``launcher.image.patch.CopyJobs``).

On AWS the job runs on the stack's Fargate copy queue, next to the registries; on the local
backend it runs as a container on the Docker engine (the dress rehearsal). Either way the
bytes move in the job, not in this process: here only the job's state and its log lines
("copy: sha256:... 1.20 GB copied") are read, and reported as progress.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from launcher.backend import Backend
from launcher.copyjob import plan
from launcher.copyjob.plan import CopierImage
from launcher.errors import RemoteError
from launcher.image.reference import Reference
from launcher.job.info import JobState
from launcher.job.jobdef import Requests
from launcher.progress import ProgressFn, say
from launcher.stack.cluster import ClusterInfo


class CopyJobRunner:
    """Copy jobs on ``backend``; ``source`` is where the job reads a base (a target's
    ``copy_source``), ``where`` says where the bytes move, for the plan's line."""

    def __init__(
        self,
        cluster: ClusterInfo,
        backend: Backend,
        source: Callable[[Reference], Reference],
        where: str,
        copier: CopierImage,
        progress: ProgressFn | None = None,
    ) -> None:
        self.cluster, self.backend, self.source = cluster, backend, source
        self.where, self.copier = where, copier
        self.say = say(progress)

    def check(self, base: Reference) -> None:
        self.source(base)

    def requests(self, base: Reference, target: Reference) -> Requests:
        return plan.requests(self.source(base), target, self.cluster, self.copier)

    def start(self, base: Reference, target: Reference) -> str:
        """A copy job for ``base``: the one already copying it into ``target``, if any (two
        runs on a new base share one copy), else a new one."""
        requests = self.requests(base, target)
        for running in self.backend.list(name=requests.submit["jobName"]):
            self.say(f"copy job {running.job_id} is copying this base already; waiting for it")
            return running.job_id
        job_id = self.backend.schedule(requests, self.say)
        self.say(f"copy job {job_id} started")
        return job_id

    def wait(self, handle: str, poll: float = 2.0) -> None:
        """Until the copy job ends, its copy lines reported as they come; RemoteError if it
        failed (with its last error line)."""
        last_error = ""
        while True:
            for line in self.backend.log_iter(handle, follow=True):
                if line.message.startswith("copy: "):
                    self.say(line.message)
                    if line.message.startswith("copy: error: "):
                        last_error = line.message.removeprefix("copy: error: ")
            info = self.backend.describe(handle)
            if info.state.terminal:
                break
            time.sleep(poll)  # the logs ended before the job did (a follower's drain)
        if info.state is not JobState.SUCCEEDED:
            why = last_error or info.reason or "no reason given"
            raise RemoteError(
                f"copy job {handle} {info.state.value}: {why} (launcher logs {handle})"
            )
