"""``EfaBatchExecutor``: Covalent electrons as Python functions on the cluster.

    import covalent as ct
    from launcher.covalent.efa_batch import EfaBatchExecutor

    @ct.electron(executor=EfaBatchExecutor(num_nodes=2, pool="train", image=IMAGE))
    def train(epochs): ...

Each electron is one ``Cluster.remote`` call (launcher.api.functions): the function and its
arguments go to the stack's function bucket (the EFS stand-in with ``local=True``), a job of
``num_nodes`` nodes runs it, its value comes back to Covalent. Everything is read from the
stack's outputs: where covalent-awsbatch-plugin's ``AWSBatchExecutor`` asks for eight names
(S3 bucket, job queue, job definition, execution and job roles, log group, ...) created by
hand first, this one asks for at most the stack's name, a pool and an image.

What Covalent requires of it (covalent 0.240, covalent/executor/__init__.py and
covalent_dispatcher/_core/runner.py):

- It runs inside the Covalent server, not the client: the server's environment needs the
  launcher (the ``covalent`` extra), Docker (``local=True``) and AWS credentials.
- The server makes it as ``EfaBatchExecutor(**[executors.efa_batch] of covalent.conf)`` and
  then replaces its ``__dict__`` with the client's JSON: every attribute is a JSON value, and
  ``__init__`` does no I/O.
- Covalent hands ``run`` its own wrapper (``partial(wrapper_fn, TransportableObject(fn),
  call_before, call_after)``); the user's function is unwrapped here and sent alone, so the
  image needs no covalent, and its value is wrapped again for Covalent.
- The executor's short name (``efa_batch``) is this module's name; ``executor_plugin_name``
  names the class, and ``_EXECUTOR_PLUGIN_DEFAULTS`` fills covalent.conf.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any, NoReturn

from covalent._shared_files.exceptions import TaskCancelledError, TaskRuntimeError
from covalent._workflow.transport import TransportableObject
from covalent.executor.base import AsyncBaseExecutor
from covalent.executor.utils.wrappers import wrapper_fn

from launcher.errors import FunctionError, LauncherError
from launcher.job.function import RemoteTraceback

executor_plugin_name = "EfaBatchExecutor"

# What covalent.conf's [executors.efa_batch] starts with (TOML: the options that are unset by
# default, None, are left out; the executor's own defaults apply to them).
_EXECUTOR_PLUGIN_DEFAULTS = {
    "num_nodes": 1,
    "local": False,
    "ranks": "main",
    "poll_freq": 5.0,
    "time_limit": -1,
}


class EfaBatchExecutor(AsyncBaseExecutor):
    """Runs an electron as a job of the cluster's stack.

    num_nodes: nodes of the job; each runs the function with its rank set
        (``LAUNCHER_NODE_RANK``), as ``launcher run``'s commands.
    pool: the stack's pool (default: the stack's default pool).
    gpus_per_node: GPUs each node asks for (default: the pool's instance's).
    time_limit: seconds before Batch stops the job (``timeout_seconds``); -1: none.
    image: the image the function runs in; its Python must be the server's.
    workspace: a directory of the server's machine layered onto the image.
    local: run on the server's Docker engine instead of AWS Batch (the same job).
    stack, region, team: which stack (default ``$LAUNCHER_STACK``, then ``EfaBatch``), in which
        Region, as which team (stacks with teams).
    ranks: ``"main"``: the electron's value is the main node's; ``"all"``: every node's, node
        0 first.
    poll_freq: seconds between looks at the job while it runs.
    """

    def __init__(
        self,
        num_nodes: int = 1,
        pool: str | None = None,
        gpus_per_node: int | None = None,
        time_limit: int = -1,
        image: str | None = None,
        workspace: str | None = None,
        local: bool = False,
        stack: str | None = None,
        region: str | None = None,
        team: str | None = None,
        ranks: str = "main",
        poll_freq: float = 5.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(time_limit=time_limit, **kwargs)
        self.num_nodes, self.pool, self.gpus_per_node = num_nodes, pool, gpus_per_node
        self.image, self.workspace, self.local = image, workspace, local
        self.stack, self.region, self.team = stack, region, team
        self.ranks, self.poll_freq = ranks, poll_freq

    async def run(
        self,
        function: Callable[..., Any],
        args: list[Any],
        kwargs: dict[str, Any],
        task_metadata: dict[str, Any],
    ) -> Any:
        fn, args, kwargs = _unwrapped(function, args, kwargs)
        if await self.get_cancel_requested():
            raise TaskCancelledError(f"electron {task_metadata.get('node_id')} cancelled")
        try:
            call = await asyncio.to_thread(self._submit, fn, args, kwargs)
        except LauncherError as exc:
            self._fail(str(exc))
        await self.set_job_handle(call.job_id)
        if await self.get_cancel_requested():  # asked while the job was being submitted
            await asyncio.to_thread(call.cancel)
            raise TaskCancelledError(f"job {call.job_id} cancelled")
        try:
            value = await asyncio.to_thread(call.result, None, float(self.poll_freq))
        except Exception as exc:  # noqa: BLE001 - the function's own exception, whatever it is
            await self._copy_logs(call)
            if await self.get_cancel_requested():
                raise TaskCancelledError(f"job {call.job_id} cancelled") from exc
            self._fail(_traceback_text(exc))
        await self._copy_logs(call)
        return TransportableObject(value)

    async def cancel(self, task_metadata: dict[str, Any], job_handle: Any) -> bool:
        """Cancel (before it runs) or terminate the electron's job: True once asked."""
        if not job_handle:
            return False
        from launcher.api import attach

        def cancel() -> None:
            (job,) = attach([str(job_handle)], region=self.region)
            job.cancel()

        try:
            await asyncio.to_thread(cancel)
        except LauncherError as exc:
            print(f"cancelling job {job_handle}: {exc}", file=self.task_stderr)
            return False
        return True

    def _submit(self, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
        from launcher.api import Cluster

        cluster = Cluster.from_stack(self.stack, region=self.region, team=self.team)
        options: dict[str, Any] = {"nodes": int(self.num_nodes), "ranks": self.ranks}
        for name, value in (
            ("pool", self.pool),
            ("gpus_per_node", self.gpus_per_node),
            ("image", self.image),
            ("workspace", self.workspace),
        ):
            if value is not None:
                options[name] = value
        if self.time_limit is not None and int(self.time_limit) > 0:
            options["timeout_seconds"] = int(self.time_limit)
        if self.local:
            cluster = cluster.local()
        return cluster.remote(fn, **options).submit(*args, **kwargs)

    async def _copy_logs(self, call: Any) -> None:
        """The job's lines (what the function printed, on every node) into the electron's
        stdout, ``[node N]`` before each when there are several nodes."""
        try:
            lines = await asyncio.to_thread(lambda: list(call.job.logs()))
        except LauncherError as exc:
            print(f"the log of job {call.job_id} could not be read: {exc}", file=self.task_stderr)
            return
        for line in lines:
            prefix = f"[node {line.node}] " if int(self.num_nodes) > 1 else ""
            print(prefix + line.message, file=self.task_stdout)

    def _fail(self, text: str) -> NoReturn:
        """The electron FAILED, ``text`` in its stderr (where Covalent's own executors put a
        task's traceback)."""
        print(text, file=self.task_stderr)
        raise TaskRuntimeError(text)


def _unwrapped(
    function: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]
) -> tuple[Callable[..., Any], list[Any], dict[str, Any]]:
    """The user's function and arguments out of Covalent's wrapper and TransportableObjects."""
    if not (isinstance(function, functools.partial) and function.func is wrapper_fn):
        raise TaskRuntimeError(
            f"efa_batch: expected covalent 0.240's task wrapper, got {function!r}"
        )
    serialized, call_before, call_after = function.args
    if call_before or call_after:
        raise TaskRuntimeError(
            "efa_batch runs the electron's function alone: no deps, call_before or call_after "
            "(DepsPip, DepsBash, DepsCall); put what the function needs in its image"
        )
    return (
        serialized.get_deserialized(),
        [a.get_deserialized() for a in args],
        {k: v.get_deserialized() for k, v in kwargs.items()},
    )


def _traceback_text(exc: BaseException) -> str:
    """What a failed call says: the remote traceback when the function raised, else the
    launcher's line (the job ended without a result, a timeout)."""
    if isinstance(exc.__cause__, RemoteTraceback):
        return exc.__cause__.text
    if isinstance(exc, FunctionError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
