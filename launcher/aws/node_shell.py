"""``launcher exec`` on AWS: a command, or a shell, in one node's container of a running job.

Either backend hands the session to the tool that owns its protocol and the terminal (the
local engine's to the docker CLI, ``launcher.local.shell``); here, to the Session Manager
plugin, after ECS ExecuteCommand, exactly as the AWS CLI's ``aws ecs execute-command`` does
(aws/aws-cli, awscli/customizations/ecs/executecommand.py). The decisions (may this job be
entered, which request, which argv) are pure functions; the rest is lookups and the hand-off.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from launcher.errors import LauncherError, UsageError

if TYPE_CHECKING:
    from launcher.aws.client import Aws

PLUGIN = "session-manager-plugin"
NO_PLUGIN = (
    f"launcher exec on AWS needs the Session Manager plugin ({PLUGIN}) on PATH, as aws ecs "
    "execute-command does: install it from https://docs.aws.amazon.com/systems-manager/latest/"
    "userguide/session-manager-working-with-install-plugin.html"
)
# The plugin reads StartSession's response, the session's token with it, from the environment
# variable named in its first argument (then unsets it) from 1.2.536.0 on; the AWS CLI passes it
# so to any plugin newer than 1.2.497.0 (awscli/customizations/sessionmanager.py,
# StartSessionCaller.LAST_PLUGIN_VERSION_WITHOUT_ENV_VAR; session-manager-plugin's session.go,
# ValidateInputAndStartSession). A process's environment is readable by its user and root only
# (proc(5), /proc/PID/environ), its argv by every local user (ps).
SESSION_ENV = "AWS_SSM_START_SESSION_RESPONSE"
LAST_VERSION_WITHOUT_ENV = (1, 2, 497, 0)
_VERSION = re.compile(r"\d+(\.\d+){0,3}")
OLD_PLUGIN = (
    f"{PLUGIN} {{version}} takes the session's token on its command line, where any local "
    "user's ps reads it; install 1.2.536.0 or later from https://docs.aws.amazon.com/"
    "systems-manager/latest/userguide/session-manager-working-with-install-plugin.html"
)
ECS_EXEC_OFF = (
    "was submitted without ECS Exec: deploy the stack with -c ecs_exec=true "
    "(docs/configuration.md) and submit the job again; until then, launcher logs {job} shows "
    "its output"
)


def command_line(command: Sequence[str]) -> str:
    """ExecuteCommand's ``command`` is one string, which the SSM agent in the container splits
    with shlex (amazon-ssm-agent, agent/session/shell/shell_unix.go, StartPty:
    ``shlex.Split(plugin.cmdContent)``, then exec without a shell): shlex.join keeps each
    argument whole."""
    return shlex.join(command)


def execute_command_request(
    cluster: str, task: str, container: str | None, command: Sequence[str]
) -> dict[str, Any]:
    """ECS ExecuteCommand's keyword arguments. ``interactive`` must be true: "Amazon ECS only
    supports initiating interactive sessions" (ECS guide, ecs-exec.html)."""
    request: dict[str, Any] = {
        "cluster": cluster,
        "task": task,
        "interactive": True,
        "command": command_line(command),
    }
    if container is not None:
        request["container"] = container
    return request


def session_target(response: dict[str, Any], runtime_id: str) -> dict[str, str]:
    """The plugin's target, as build_ssm_request_paramaters in the AWS CLI's
    executecommand.py makes it: ``ecs:CLUSTER_TASK_RUNTIMEID``, cluster and task by their
    names (the ARNs' last parts), the runtime id of the container the session entered."""
    cluster = response["clusterArn"].split("/")[-1]
    task = response["taskArn"].split("/")[-1]
    return {"Target": f"ecs:{cluster}_{task}_{runtime_id}"}


def reads_session_from_environment(version: str) -> bool:
    """Whether a plugin that says ``version`` to ``--version`` takes the session from
    ``SESSION_ENV``: the AWS CLI's test (sessionmanager.py, VersionRequirement: whitespace
    removed, up to four numbers, newer than 1.2.497.0); anything else reads as too old."""
    text = re.sub(r"\s+", "", version)
    if not _VERSION.fullmatch(text):
        return False
    numbers = [int(part) for part in text.split(".")]
    return tuple(numbers + [0] * (4 - len(numbers))) > LAST_VERSION_WITHOUT_ENV


def plugin_argv(
    response: dict[str, Any],
    runtime_id: str,
    region: str,
    profile: str | None,
    endpoint_url: str,
) -> tuple[list[str], dict[str, str]]:
    """The plugin's command line, in the AWS CLI's order (executecommand.py,
    ExecuteCommandCaller.invoke: the session, the Region, "StartSession", the profile ('' for
    none), the target as JSON, the ECS endpoint URL), and the environment that carries the
    session: its first argument names ``SESSION_ENV`` (sessionmanager.py,
    StartSessionCaller.invoke), so the token never reaches the process list."""
    argv = [
        PLUGIN,
        SESSION_ENV,
        region,
        "StartSession",
        profile or "",
        json.dumps(session_target(response, runtime_id)),
        endpoint_url,
    ]
    return argv, {SESSION_ENV: json.dumps(response["session"])}


def check_plugin() -> None:
    """The plugin is on PATH and takes the session from the environment; else one line, before
    ExecuteCommand opens a session left unused."""
    if shutil.which(PLUGIN) is None:
        raise LauncherError(NO_PLUGIN)
    try:
        said = subprocess.run(
            [PLUGIN, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as failed:
        raise LauncherError(f"{PLUGIN} --version failed: {failed}") from failed
    if not reads_session_from_environment(said):
        raise LauncherError(OLD_PLUGIN.format(version=said.strip() or "(no version)"))


@contextmanager
def _user_signals_ignored() -> Iterator[None]:
    """Ctrl-C, Ctrl-\\ and Ctrl-Z are the session's, not this process's (the AWS CLI's
    compat.ignore_user_entered_signals, around the same plugin call)."""
    kinds = (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP)
    before = [signal.signal(kind, signal.SIG_IGN) for kind in kinds]
    try:
        yield
    finally:
        for kind, handler in zip(kinds, before, strict=True):
            signal.signal(kind, handler)


def _runtime_id(task: dict[str, Any], container: str) -> str:
    for each in task.get("containers") or []:
        if each.get("name") == container and each.get("runtimeId"):
            return str(each["runtimeId"])
    raise LauncherError(f"ECS: task {task.get('taskArn')} has no running container {container}")


def _clusters(aws: Aws, queue: str) -> list[str]:
    """The ECS clusters of the queue's compute environments, in the queue's order."""
    found = aws.describe_job_queue(queue) or {}
    order = sorted(found.get("computeEnvironmentOrder") or [], key=lambda e: e["order"])
    names = [e["computeEnvironment"] for e in order]
    environments = aws.describe_compute_environments(names) if names else []
    return [e["ecsClusterArn"] for e in environments if e.get("ecsClusterArn")]


def _find_task(aws: Aws, queue: str, task_arn: str) -> tuple[str, dict[str, Any]]:
    """The cluster the task runs in, and its DescribeTasks entry: the job's compute
    environments' clusters asked in turn (one, unless the queue falls back to another pool)."""
    for cluster in _clusters(aws, queue):
        tasks = aws.describe_tasks(cluster, [task_arn])
        if tasks:
            return cluster, tasks[0]
    raise LauncherError(f"ECS: task {task_arn} is in no cluster of job queue {queue}")


def aws_session(
    aws: Aws, queue: str, job_id: str, node: int, container: dict[str, Any], command: Sequence[str]
) -> int:
    """ExecuteCommand into a node's task, then the plugin; its exit status. ``container`` is
    DescribeJobs' container of the node (``JOB#N``) or of a single-node job, in ``queue``; the
    Batch backend has checked that the job and the node run (``BatchBackend.enter``)."""
    if not container.get("enableExecuteCommand"):
        raise UsageError(f"job {job_id} " + ECS_EXEC_OFF.format(job=job_id))
    if not container.get("taskArn"):
        raise UsageError(f"node {node} of job {job_id} has no task yet; try again shortly")
    cluster, task = _find_task(aws, queue, container["taskArn"])
    names = [c["name"] for c in task.get("containers") or []]
    request = execute_command_request(
        cluster, container["taskArn"], names[0] if len(names) == 1 else None, command
    )
    response = aws.execute_command(request)
    client = aws.client("ecs")
    argv, session = plugin_argv(
        response,
        _runtime_id(task, response["containerName"]),
        client.meta.region_name,
        aws.session._session.profile,  # the AWS CLI's session.profile: None unless named
        client.meta.endpoint_url,
    )
    with _user_signals_ignored():
        return subprocess.call(argv, env={**os.environ, **session})
