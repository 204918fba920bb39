"""What ``torchx status``, ``torchx describe`` and ``torchx list`` show of a job (pure): the
launcher's ``JobInfo`` as TorchX's ``DescribeAppResponse`` and ``ListAppResponse``, its states
as TorchX's ``AppState``, and which jobs are TorchX apps at all.

A replica that failed or was cancelled says why in ``ReplicaStatus.structured_error_msg``, which
TorchX reads as JSON (torchx/specs/api.py, ``AppStatus._format_replica_status``: 0.7.0 reads
``["message"]["message"]``, ``["message"]["errorCode"]`` and ``["message"]["extraInfo"]
["timestamp"]``, torchelastic's error-file form; nightly reads that form too, and prints
anything else verbatim with no line break, which ran replicas together). The words are the
launcher's own (``JobInfo.outcome``, as ``launcher status`` says them); the exit code is
TorchX's ``(exitcode: N)``.
"""

from __future__ import annotations

import dataclasses
import json

from torchx.schedulers.api import DescribeAppResponse, ListAppResponse
from torchx.specs import (
    MISSING,
    NONE,
    NULL_RESOURCE,
    AppState,
    ReplicaStatus,
    Resource,
    Role,
    RoleStatus,
)

from launcher.job.info import GroupInfo, JobInfo, JobState
from launcher.torchx import tags
from launcher.torchx.appdef import JOB_ID_REF

STATES = {
    JobState.SUBMITTED: AppState.SUBMITTED,
    JobState.PENDING: AppState.PENDING,
    JobState.RUNNABLE: AppState.PENDING,
    JobState.STARTING: AppState.PENDING,
    JobState.RUNNING: AppState.RUNNING,
    JobState.SUCCEEDED: AppState.SUCCEEDED,
    JobState.FAILED: AppState.FAILED,
}
# Variables of the launcher's node prelude (launcher.job.environment), not of the role.
LAUNCHER_ENV_PREFIX = "LAUNCHER_"


def app_state(info: JobInfo) -> AppState:
    """The job's state as TorchX's: a job cancelled on request is CANCELLED (Batch says FAILED)."""
    if info.state is JobState.FAILED and info.cancelled:
        return AppState.CANCELLED
    return STATES[info.state]


def is_app(info: JobInfo) -> bool:
    """A job submitted through TorchX: it carries TorchX's version tag (launcher.torchx.appdef
    tags every app's job with aws_batch's keys; ``launcher run`` tags none of them)."""
    return tags.VERSION in info.tags


def app_name(info: JobInfo) -> str:
    """The AppDef's name, from its tag; else the job's name."""
    return info.tags.get(tags.APP_NAME) or info.name


def list_response(info: JobInfo) -> ListAppResponse:
    """One row of ``torchx list``; nightly's ListAppResponse has a ``name`` (its APP NAME
    column, torchx/cli/cmd_list.py), 0.7.0's has not."""
    response = ListAppResponse(app_id=info.job_id, state=app_state(info))
    if any(f.name == "name" for f in dataclasses.fields(ListAppResponse)):
        response.name = app_name(info)  # type: ignore[attr-defined,unused-ignore]
    return response


def describe_response(app_id: str, info: JobInfo) -> DescribeAppResponse:
    """A job's roles (as submitted: image, command, variables, resources) and each replica's
    state, with its exit code and why it ended where it failed or was cancelled."""
    state = app_state(info)
    nodes = {n.index: n for n in info.node_status}
    roles, statuses = [], []
    for group in info.groups or (GroupInfo("main", 0, info.nodes - 1, info.image),):
        replicas = []
        for i, n in enumerate(range(group.first, group.last + 1)):
            node = nodes.get(n)
            node_state = node.state if node is not None else info.state
            code = node.exit_code if node is not None else (info.exit_code if n == 0 else None)
            # A cancelled job's nodes end as their containers do; the cancel is the reason.
            own = node.reason if node is not None and not info.cancelled else None
            reason = own or info.reason
            replica_state = STATES[node_state]
            if info.cancelled and node_state is JobState.FAILED:
                replica_state = AppState.CANCELLED
            replicas.append(
                ReplicaStatus(
                    id=i,
                    state=replica_state,
                    role=group.name,
                    hostname="",
                    structured_error_msg=_error(info, node_state, reason, code),
                )
            )
        statuses.append(RoleStatus(group.name, replicas))
        roles.append(_role(group, info.job_id))
    return DescribeAppResponse(
        app_id=app_id,
        state=state,
        num_restarts=max(0, info.attempts - 1),
        msg=info.outcome() or "",
        roles_statuses=statuses,
        roles=roles,
    )


def _error(info: JobInfo, state: JobState, reason: str | None, code: int | None) -> str:
    """A replica that failed (or was cancelled) in torchelastic's error-file form, the one form
    both TorchX lines read; NONE for any other."""
    if state is not JobState.FAILED:
        return str(NONE)
    # The node's outcome in the words `launcher status` gives a job: its exit code and what
    # that means, or Batch's reason where it says more (a cancel, a timeout).
    alone = dataclasses.replace(
        info, state=state, reason=reason, node_status=(), last_exit_code=code
    )
    words = alone.outcome() or reason or "failed"
    when = info.stopped_at or info.started_at or info.created_at or 0
    return json.dumps(
        {"message": {"message": words, "errorCode": code, "extraInfo": {"timestamp": int(when)}}}
    )


def _role(group: GroupInfo, job_id: str) -> Role:
    """A node range as the role it was submitted as (what aws_batch's describe returned, 0.7.0
    aws_batch_scheduler.py: image, the container's command, its variables, its resources), with
    TORCHX_JOB_ID the handle its nodes saw (the job definition holds a stand-in for the id)."""
    entrypoint, *args = group.command or (MISSING,)
    resource = NULL_RESOURCE
    if group.vcpus is not None and group.memory_mib is not None:
        resource = Resource(cpu=group.vcpus, gpu=group.gpus or 0, memMB=group.memory_mib)
    return Role(
        name=group.name,
        image=group.image or "",
        entrypoint=entrypoint,
        args=args,
        env={
            k: v.replace(JOB_ID_REF, job_id)
            for k, v in group.env
            if not k.startswith(LAUNCHER_ENV_PREFIX)
        },
        num_replicas=group.last - group.first + 1,
        resource=resource,
    )
