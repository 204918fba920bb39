"""Pure request building: (job spec, cluster) -> the exact boto3 keyword arguments.

No I/O here: ``launcher run --dryrun`` prints what these functions return, and the tests
compare dicts and validate them against the botocore service model.

``build`` is the whole request: the checks (``launcher.job.validation``), one container per
node range (``launcher.job.container``, with ``environment`` and ``volumes``), the retry rules,
the definition's name (a hash of its content) and the submit. The readers of a definition's
node ranges (``launcher.job.node_ranges``) and a resubmission's checkpoint directory
(``launcher.job.resumption``) are beside it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from secrets import token_hex
from typing import Any

from launcher.job.container import container_properties
from launcher.job.jobspec import JobSpec
from launcher.job.node_ranges import (
    node_overrides,
)
from launcher.job.validation import (
    in_pool,
    validate,
)
from launcher.node import prelude
from launcher.stack.cluster import ClusterInfo
from launcher.stack.teams import JOB_DEFINITION_PREFIX, TEAM_TAG, team_definition_prefix

RETRY_ON_HOST_LOSS = (
    # Instance loss (reclaimed, failed status checks) of the main node is worth another
    # attempt. Batch retries a multi-node job only when the main node fails ("Child node
    # failures don't cause more attempts"), so a worker's loss reaches these rules through
    # the main node's prelude, which ends it with NODE_LOST_EXIT (launcher.node.prelude).
    {"onStatusReason": "Host EC2*", "action": "RETRY"},
    {"onExitCode": str(prelude.NODE_LOST_EXIT), "action": "RETRY"},
    # A node's health or fabric check found its host bad: try again, elsewhere (the stack's
    # node replacer takes the instance out of the pool).
    {"onExitCode": str(prelude.BAD_HOST_EXIT), "action": "RETRY"},
    # An application failure is not.
    {"onReason": "*", "action": "EXIT"},
)
# With ``JobSpec.retry_errors`` (a TorchX role's max_retries): the application's failures are
# retried too, except the prelude's refusal of an image that cannot do what the job asked
# (EFA_REQUIRED_EXIT: the next attempt would refuse it again). Five entries, Batch's most
# (RetryStrategy.evaluateOnExit: "Array of up to 5 objects"). Cancelled and terminated jobs
# are never retried whatever the rules say (Batch user guide, job_retries.html).
RETRY_ON_ERRORS = (
    *RETRY_ON_HOST_LOSS[:-1],
    {"onExitCode": str(prelude.EFA_REQUIRED_EXIT), "action": "EXIT"},
    {"onReason": "*", "action": "RETRY"},
)


def retry_strategy(spec: JobSpec) -> dict[str, Any]:
    """Batch's RetryStrategy: ``attempts`` in all, whatever failed; which failures take one."""
    rules = RETRY_ON_ERRORS if spec.retry_errors else RETRY_ON_HOST_LOSS
    return {"attempts": spec.attempts, "evaluateOnExit": [dict(rule) for rule in rules]}


@dataclass(frozen=True)
class Requests:
    register: dict[str, Any]
    submit: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"registerJobDefinition": self.register, "submitJob": self.submit}


def definition_name(body: dict[str, Any], team: str | None = None) -> str:
    """Named by a hash of the content: registering the same job twice finds the first. A
    team's definitions start with its prefix (``team_definition_prefix``), the only ones its
    users' policy lets them register and submit."""
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    if team is not None:
        return f"{team_definition_prefix(team)}{digest[:32]}"
    return f"{JOB_DEFINITION_PREFIX}-{digest[:32]}"


def _multinode(spec: JobSpec, cluster: ClusterInfo) -> dict[str, Any]:
    return {
        "type": "multinode",
        "nodeProperties": {
            "numNodes": spec.nodes,
            "mainNode": 0,
            "nodeRangeProperties": [
                {"targetNodes": "0:", "container": container_properties(spec, cluster)}
            ]
            if not spec.groups
            else [
                {
                    "targetNodes": f"{g.first}:{g.last}",
                    "container": container_properties(spec, cluster, g),
                }
                for g in sorted(spec.groups, key=lambda g: g.first)
            ],
        },
    }


def _container_job(spec: JobSpec, cluster: ClusterInfo) -> dict[str, Any]:
    """One node: ``type: container`` (botocore RegisterJobDefinitionRequest.type: "If the value
    is container, then one of the following is required: containerProperties, ..."), with the
    same image, devices, mounts, secrets, limits and environment as a node of a gang."""
    container = container_properties(spec, cluster, spec.groups[0] if spec.groups else None)
    # ContainerProperties.instanceType: "This parameter isn't applicable to single-node
    # container jobs ... and shouldn't be provided." The queue's compute environment runs the
    # cluster's type only, so the job lands on it all the same.
    del container["instanceType"]
    return {"type": "container", "containerProperties": container}


def build(spec: JobSpec, cluster: ClusterInfo) -> Requests:
    validate(spec, cluster)
    spec, cluster = in_pool(spec, cluster)
    body = _container_job(spec, cluster) if spec.single_node else _multinode(spec, cluster)
    body |= {
        "retryStrategy": retry_strategy(spec),
        "propagateTags": True,
        "platformCapabilities": ["EC2"],
    }
    if spec.timeout_seconds is not None:
        # Per attempt, and for an array per child: "The timeout specified in the
        # attemptDurationSeconds parameter applies to each child job" (array_jobs.html).
        body["timeout"] = {"attemptDurationSeconds": spec.timeout_seconds}
    team = cluster.current_team
    name = definition_name(body, team.name if team else None)
    register = {"jobDefinitionName": name, **body}
    tags = {"efa-batch:stack": cluster.stack_name, **dict(spec.tags)}
    if team is not None:
        # Whose job it is (list, describe), and what its team's users' policy asks of every
        # submit of theirs (aws:RequestTag) and of every cancel (aws:ResourceTag).
        tags[TEAM_TAG] = team.name
    submit: dict[str, Any] = {
        "jobName": spec.name,
        "jobQueue": cluster.job_queue_arn,
        "jobDefinition": name,
        "propagateTags": True,
        "tags": tags,
    }
    if not spec.single_node:
        submit["nodeOverrides"] = node_overrides(body, [watch_token()])
    if spec.array_size is not None:
        submit["arrayProperties"] = {"size": spec.array_size}
    if spec.after:
        submit["dependsOn"] = [d.as_batch() for d in spec.after]
    if cluster.scheduling_policy_arn:
        # A team's job: its team's share unless it named another (refused by validate).
        submit["shareIdentifier"] = spec.share_id or "default"
        if spec.priority is not None:
            submit["schedulingPriorityOverride"] = spec.priority
    return Requests(register, submit)


def watch_token() -> dict[str, str]:
    """A new token for the prelude's node watch (launcher.node.prelude), as an environment entry
    of a submit's overrides.

    It goes with each submit, not into the definition: definitions are named by their content
    and registered once for every submit of the same job (``definition_name``), so a token there
    would be every such job's, and a new one would register a new definition with each submit.
    Batch starts every attempt of a job with its submit's overrides, so every node of every
    attempt holds the same token; a resubmission is a new job with a new one."""
    return {"name": prelude.WATCH_TOKEN_ENV, "value": token_hex(32)}


def with_submit_environment(requests: Requests, env: dict[str, str]) -> Requests:
    """The requests with ``env`` in the SubmitJob's overrides: every node range's
    (``nodeOverrides``) for a multi-node job, the container's (``containerOverrides``) for a
    one-node job; beside what is there already (the node watch's token). What differs from
    one submit to the next (a Capacity Block's end, a function's call) goes here, so the job
    definition, and its name, stay the same."""
    if not env:
        return requests
    entries = [{"name": k, "value": v} for k, v in sorted(env.items())]
    submit = dict(requests.submit)
    if "nodeOverrides" in submit:
        ranges = submit["nodeOverrides"]["nodePropertyOverrides"]
        submit["nodeOverrides"] = {
            **submit["nodeOverrides"],
            "nodePropertyOverrides": [
                {
                    **r,
                    "containerOverrides": {
                        **r.get("containerOverrides", {}),
                        "environment": [
                            *r.get("containerOverrides", {}).get("environment", []),
                            *entries,
                        ],
                    },
                }
                for r in ranges
            ],
        }
    else:
        overrides = submit.get("containerOverrides", {})
        submit["containerOverrides"] = {
            **overrides,
            "environment": [*overrides.get("environment", []), *entries],
        }
    return replace(requests, submit=submit)
