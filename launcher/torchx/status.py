"""What ``torchx status`` and ``torchx list`` show of a job (pure): the launcher's ``JobInfo`` as
TorchX's ``DescribeAppResponse``, its states as TorchX's ``AppState``."""

from __future__ import annotations

from torchx.schedulers.api import DescribeAppResponse
from torchx.specs import AppState, ReplicaStatus, Role, RoleStatus

from launcher.job.info import GroupInfo, JobInfo, JobState

STATES = {
    JobState.SUBMITTED: AppState.SUBMITTED,
    JobState.PENDING: AppState.PENDING,
    JobState.RUNNABLE: AppState.PENDING,
    JobState.STARTING: AppState.PENDING,
    JobState.RUNNING: AppState.RUNNING,
    JobState.SUCCEEDED: AppState.SUCCEEDED,
    JobState.FAILED: AppState.FAILED,
}


def describe_response(app_id: str, info: JobInfo) -> DescribeAppResponse:
    """A job's roles and each replica's state."""
    state = STATES[info.state]
    if info.state is JobState.FAILED and info.cancelled:
        state = AppState.CANCELLED
    nodes = {n.index: n for n in info.node_status}
    roles, statuses = [], []
    for group in info.groups or (GroupInfo("main", 0, info.nodes - 1, info.image),):
        replicas = [
            ReplicaStatus(
                id=i,
                state=STATES[nodes[n].state] if n in nodes else state,
                role=group.name,
                hostname="",
                structured_error_msg=(nodes[n].reason if n in nodes else None) or "<NONE>",
            )
            for i, n in enumerate(range(group.first, group.last + 1))
        ]
        statuses.append(RoleStatus(group.name, replicas))
        roles.append(
            Role(
                name=group.name,
                image=group.image or "",
                num_replicas=group.last - group.first + 1,
            )
        )
    return DescribeAppResponse(
        app_id=app_id,
        state=state,
        num_restarts=max(0, info.attempts - 1),
        msg=info.reason or "",
        roles_statuses=statuses,
        roles=roles,
    )
