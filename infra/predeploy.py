"""Before ``cdk deploy``: what the deploy would replace, and what CloudFormation or the service
behind a resource would refuse and roll back, from the deployed templates and the new ones.

    cdk synth -c fsx_lustre='{"s3": "datasets/v2"}' && python -m infra.predeploy

Like ParallelCluster's ``pcluster update-cluster --dryrun``, it reads the deployed stacks
(CloudFormation GetTemplate, with the credentials ``cdk deploy`` uses) and plans the change
with ``infra.update_plan``: create-only properties, references that follow a replaced resource,
exports in use, and the refusals of Batch and FSx that CloudFormation only meets half way
through a deploy, and the queued and running jobs the change ends (``ended_jobs``, from Batch
ListJobs). It changes nothing. Exit status: 0 when nothing would be refused, 1 when
something would be (or the stacks could not be read), 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import boto3
import botocore.exceptions

from infra.update_plan import Change, Templates, of, plan, references
from launcher.aws.client import RETRY_CONFIG
from launcher.errors import LauncherError, RemoteError, UsageError

PROG = "python -m infra.predeploy"
EXAMPLE = (
    "example:\n"
    '  cdk synth -c fsx_lustre=\'{"storage_gib": 2400, "s3": "datasets/v2"}\'\n'
    f"  {PROG}                 # every stack of cdk.out\n"
    f"  {PROG} EfaBatch-Storage"
)


@dataclass(frozen=True)
class Stack:
    """A stack of the cloud assembly: its name, where it deploys, its new template."""

    name: str
    region: str | None
    template: dict[str, Any]


def assembly_stacks(directory: Path, names: Sequence[str] = ()) -> list[Stack]:
    """The stacks ``cdk synth`` wrote to ``directory`` (its manifest.json), in its order."""
    manifest = directory / "manifest.json"
    if not manifest.is_file():
        raise UsageError(f"--app {directory}: no cloud assembly there; run `cdk synth` first")
    artifacts = json.loads(manifest.read_text())["artifacts"]
    stacks = []
    for artifact_id, artifact in artifacts.items():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        properties = artifact.get("properties", {})
        region = artifact.get("environment", "").rpartition("/")[2]
        stacks.append(
            Stack(
                properties.get("stackName", artifact_id),
                None if region in ("", "unknown-region") else region,
                json.loads((directory / properties["templateFile"]).read_text()),
            )
        )
    unknown = sorted(set(names) - {s.name for s in stacks})
    if unknown:
        known = ", ".join(s.name for s in stacks)
        raise UsageError(f"{', '.join(unknown)}: not a stack of {directory} (it has {known})")
    return [s for s in stacks if not names or s.name in names]


def deployed_template(session: boto3.Session, stack: Stack) -> dict[str, Any] | None:
    """The template the stack was last deployed with, or None if it was never deployed."""
    client = session.client("cloudformation", region_name=stack.region, config=RETRY_CONFIG)
    try:
        body = client.get_template(StackName=stack.name, TemplateStage="Original")["TemplateBody"]
    except botocore.exceptions.ClientError as exc:
        if "does not exist" in str(exc):
            return None
        error = exc.response.get("Error", {})
        raise RemoteError(
            f"AWS GetTemplate failed for {stack.name}: {error.get('Code')}: {error.get('Message')}"
        ) from exc
    except botocore.exceptions.NoCredentialsError as exc:
        raise RemoteError(
            "AWS credentials not found: set AWS_PROFILE (or AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY), as for cdk deploy"
        ) from exc
    except botocore.exceptions.BotoCoreError as exc:
        raise RemoteError(f"AWS GetTemplate failed for {stack.name}: {exc}") from exc
    # JSON bodies arrive parsed; a template deployed as YAML arrives as text.
    if isinstance(body, str):
        raise UsageError(f"{stack.name}: deployed from a YAML template, which this cannot read")
    return dict(body)


# Where a job still is on its queue (Batch JobStatus): every one of these ends with the queue
# ("All jobs in the queue are eventually terminated when you delete a job queue", Batch API,
# DeleteJobQueue), and the ones on nodes with their compute environment, whose instances go
# with it (DeleteComputeEnvironment: it is disabled and taken off its queues first). A queued
# job outlives a compute environment replaced under its queue: the new one runs it.
QUEUED = ("SUBMITTED", "PENDING", "RUNNABLE")
ON_NODES = ("STARTING", "RUNNING")
QUEUE = "AWS::Batch::JobQueue"
COMPUTE_ENVIRONMENT = "AWS::Batch::ComputeEnvironment"
# A pool's name in the stack's Pools output, just before its queue's reference.
_POOL_NAME = re.compile(r'"name":"([^"]+)"')


def _environments_of(template: dict[str, Any], queue: str) -> list[str]:
    """The logical ids of the compute environments a queue's ComputeEnvironmentOrder names."""
    body = template.get("Resources", {}).get(queue, {})
    order = body.get("Properties", {}).get("ComputeEnvironmentOrder", [])
    return [name for kind, name in references(order) if kind == "local"]


def _queues_of(template: dict[str, Any], environment: str) -> list[str]:
    """The logical ids of the queues whose ComputeEnvironmentOrder names ``environment``."""
    return [
        logical_id
        for logical_id, body in template.get("Resources", {}).items()
        if body.get("Type") == QUEUE and environment in _environments_of(template, logical_id)
    ]


def pools_by_queue(template: dict[str, Any]) -> dict[str, str]:
    """Queue logical id -> its pool's name, from the stack's Pools output (a JSON text joined
    around each queue's reference); empty for a stack without one."""
    value = template.get("Outputs", {}).get("Pools", {}).get("Value", {})
    parts = value.get("Fn::Join", ["", []])[1] if isinstance(value, dict) else []
    found: dict[str, str] = {}
    name: str | None = None
    for part in parts:
        if isinstance(part, str):
            names = _POOL_NAME.findall(part)
            name = names[-1] if names else name
        elif isinstance(part, dict) and isinstance(part.get("Ref"), str) and name:
            found.setdefault(part["Ref"], name)
    return found


def _count_jobs(batch: Any, queue: str, statuses: Sequence[str]) -> dict[str, int]:
    counts = {}
    for status in statuses:
        pages = batch.get_paginator("list_jobs").paginate(jobQueue=queue, jobStatus=status)
        counts[status] = sum(len(page["jobSummaryList"]) for page in pages)
    return {k: v for k, v in counts.items() if v}


def _targets(
    stack: Stack, template: dict[str, Any], changes: list[Change]
) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Queue logical id -> (why its jobs end, the states that end) for the stack's changes.
    A queue or compute environment CloudFormation retains (its DeletionPolicy or
    UpdateReplacePolicy is Retain) keeps running its jobs, so it ends none."""
    pools = pools_by_queue(template)
    targets: dict[str, tuple[str, tuple[str, ...]]] = {}
    for change in changes:
        if change.stack != stack.name or change.action not in ("remove", "replace"):
            continue
        if change.retained:
            continue
        verb = "removed" if change.action == "remove" else "replaced"
        if change.type == QUEUE:
            gone = "the pool" if change.logical_id in pools else "the queue"
            targets[change.logical_id] = (f"{gone} is {verb}", QUEUED + ON_NODES)
        elif change.type == COMPUTE_ENVIRONMENT:
            for queue in _queues_of(template, change.logical_id):
                others = len(_environments_of(template, queue)) - 1
                why = f"its compute environment {change.logical_id} is {verb}" + (
                    f" (the jobs on the queue's other compute environment{'s' * (others > 1)} "
                    "run on: the count is of all its running jobs)"
                    if others
                    else ""
                )
                targets.setdefault(queue, (why, ON_NODES))
    return targets


def ended_jobs(
    session: boto3.Session, stack: Stack, template: dict[str, Any], changes: list[Change]
) -> list[str]:
    """A line per pool (or other queue) whose jobs the change ends: a queue removed or
    replaced (a pool gone, or a queue renamed) ends all its jobs; a compute environment
    removed or replaced ends the jobs running on its nodes. From the deployed stack's
    resources and Batch ListJobs, read only; a queue it may not read is said, not counted."""
    targets = _targets(stack, template, changes)
    if not targets:
        return []
    cloudformation = session.client("cloudformation", region_name=stack.region, config=RETRY_CONFIG)
    batch = session.client("batch", region_name=stack.region, config=RETRY_CONFIG)
    try:
        pages = cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack.name)
        physical: dict[str, str] = {
            r["LogicalResourceId"]: r.get("PhysicalResourceId", "")
            for page in pages
            for r in page["StackResourceSummaries"]
        }
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
        return [f"jobs: cannot read the resources of {stack.name} ({exc}): jobs not counted"]
    pools = pools_by_queue(template)
    lines = []
    for logical_id, (why, statuses) in sorted(targets.items()):
        queue = physical.get(logical_id, "")
        if not queue:
            lines.append(f"jobs: {logical_id} is not among {stack.name}'s resources; {why}")
            continue
        name = queue.rpartition("/")[2]
        pool = pools.get(logical_id)
        whose = f"pool {pool} (queue {name})" if pool else f"queue {name}"
        try:
            counts = _count_jobs(batch, queue, statuses)
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
            lines.append(f"jobs: {whose}: cannot count its jobs ({exc}); {why}")
            continue
        if counts:
            each = ", ".join(f"{n} {status}" for status, n in counts.items())
            total = sum(counts.values())
            ends = "jobs end" if total > 1 else "job ends"
            lines.append(f"jobs: {whose}: {total} {ends} ({each}): {why}")
    return lines


def report(
    stacks: Sequence[Stack],
    deployed: Templates,
    changes: list[Change],
    ended: Mapping[str, list[str]] | None = None,
) -> list[str]:
    """Per stack, a summary line, then one line for each resource it refuses, replaces,
    removes, adds or updates, then the jobs the change ends (``ended``: stack -> lines)."""
    ended = ended or {}
    lines = []
    for stack in stacks:
        mine = [c for c in changes if c.stack == stack.name]
        if stack.name not in deployed:
            lines.append(f"{stack.name}: not deployed yet ({len(mine)} resources to create)")
            continue
        counts = {a: len(of(mine, a)) for a in ("update", "add", "remove", "replace", "refuse")}
        if not any(counts.values()):
            lines.append(f"{stack.name}: no change")
            continue
        lines.append(
            f"{stack.name}: {counts['update']} updated, {counts['add']} added, "
            f"{counts['remove']} removed, {counts['replace']} replaced, "
            f"{counts['refuse']} refused"
        )
        # Every resource, the ones that need a look first: what it refuses, replaces, removes.
        for action in ("refuse", "replace", "remove", "add", "update"):
            lines += [f"  {c}" for c in of(mine, action)]
        lines += [f"  {line}" for line in ended.get(stack.name, [])]
    refused = of(changes, "refuse")
    if refused:
        lines.append(
            f"refused: {len(refused)} change{'s' if len(refused) > 1 else ''} that CloudFormation "
            "would roll back; do not deploy this as it is (each line above says what works)"
        )
    return lines


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(
        prog=PROG,
        description="Plan the next cdk deploy against the deployed stacks: what it would "
        "replace, and what CloudFormation, Batch or FSx would refuse and roll back. Run it "
        "after cdk synth, with the credentials cdk deploy uses; it changes nothing.",
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument(
        "stacks",
        nargs="*",
        metavar="STACK",
        help="the stacks to plan (default: every stack of the cloud assembly)",
    )
    parser.add_argument(
        "--app",
        default="cdk.out",
        type=Path,
        metavar="DIR",
        help="the cloud assembly cdk synth wrote (default: cdk.out)",
    )
    parser.add_argument("--profile", help="the AWS profile to read the stacks with")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    args = parser.parse_args(argv)
    try:
        stacks = assembly_stacks(args.app, args.stacks)
        try:
            session = boto3.Session(profile_name=args.profile)
        except botocore.exceptions.ProfileNotFound as exc:
            raise UsageError(f"--profile: {exc}") from None
        deployed = {}
        for stack in stacks:
            template = deployed_template(session, stack)
            if template is not None:
                deployed[stack.name] = template
        changes = plan(deployed, {s.name: s.template for s in stacks})
        ended = {
            s.name: ended_jobs(session, s, deployed[s.name], changes)
            for s in stacks
            if s.name in deployed
        }
        waits = preflight(stacks, args.profile)
    except LauncherError as exc:
        if args.debug:
            raise
        print(f"{PROG}: {exc}", file=sys.stderr)
        return exc.exit_code
    lines = report(stacks, deployed, changes, ended)
    at = len(lines) - (1 if of(changes, "refuse") else 0)  # before the "refused:" verdict
    print("\n".join(lines[:at] + waits + lines[at:]))
    return 1 if of(changes, "refuse") else 0


def preflight(stacks: Sequence[Stack], profile: str | None) -> list[str]:
    """What would keep the pools' jobs waiting once deployed (infra.readiness): a verdict and a
    line for each finding that is not a pass; nothing when all pass. A deploy is not refused
    for these: a quota request, say, can go on while the stack deploys."""
    from infra.readiness import pool_needs, zone_of
    from launcher.aws.client import Aws
    from launcher.aws.readiness import account_findings, in_order

    zone = zone_of([s.template for s in stacks])
    lines = []
    for stack in stacks:
        needs = pool_needs(stack.template, pools_by_queue(stack.template), zone)
        if not needs:
            continue
        aws = Aws(profile, stack.region)
        region = stack.region or aws.session.region_name
        found = in_order(account_findings(aws, needs, region), [n.pool for n in needs])
        said = [f for f in found if f.ok is not True]
        if not said:
            continue  # silent when every check passes, as a plan without change is
        waits = sum(1 for f in said if f.ok is False)
        verdict = (
            f"{waits} would keep jobs waiting: fix them before the first job"
            if waits
            else "some could not be read"
        )
        lines.append(f"{stack.name}: preflight of {len(needs)} pools: {verdict}")
        lines += [f"  {f.line()}" for f in said]
    return lines


if __name__ == "__main__":
    sys.exit(main())
