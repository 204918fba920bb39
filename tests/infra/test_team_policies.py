"""What a team's synthesized IAM documents allow, evaluated (tests/support/iam_eval.py) on
cdk.json's three-team environment: a vision user cannot submit to llm's queue nor as llm's
share, pass llm's roles, end llm's jobs or read llm's logs; vision's execution role reads
vision/ and the stack-wide secrets and not llm/; vision's job role mounts its own access
point and the common one read-only, never llm's nor the whole file system (with the file
system policy).

The Batch condition keys and resource types are the Service Authorization Reference's for AWS
Batch (list_awsbatch.html): SubmitJob on job-queue and job-definition with
``batch:ShareIdentifier`` and ``aws:RequestTag/${TagKey}``; the ``job`` resource with
``aws:ResourceTag/${TagKey}`` for TerminateJob, CancelJob and TagResource; the Batch user
guide's example of ``batch:ShareIdentifier`` (iam-example-share-identifier.html). EFS:
``elasticfilesystem:AccessPointArn`` (EFS user guide, iam-access-control-nfs-efs.html).
"""

from __future__ import annotations

import pytest

from infra.storage import file_system_policy
from launcher.stack.teams import TEAM_TAG, team_definition_prefix
from tests.infra.teams_support import resource_id, role_documents, synth_teams, user_policy
from tests.support.iam_eval import Request, allowed, decide, render

ARN = "arn:aws:{}:us-east-1:123456789012:{}"


def definition(team: str) -> str:
    """A job definition of the team's, as the launcher names it, at a revision."""
    return ARN.format("batch", f"job-definition/{team_definition_prefix(team)}0123abcd:1")


JOB = ARN.format("batch", "job/0f1e2d3c-aaaa-bbbb-cccc-000000000001")


# --- the evaluation itself -----------------------------------------------------------------


def test_the_evaluation_follows_iams_rules():
    doc = {
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["batch:SubmitJob"],
                "Resource": [
                    "arn:aws:batch:*:*:job-queue/a",
                    "arn:aws:batch:*:*:job-definition/x-*",
                ],
                "Condition": {"StringEquals": {"batch:ShareIdentifier": ["a", "b"]}},
            },
            {
                "Effect": "Deny",
                "Action": "batch:*",
                "Resource": "*",
                "Condition": {"StringLike": {"aws:RequestTag/t": "bad*"}},
            },
            {
                "Effect": "Allow",
                "Action": "logs:Get?ogEvents",
                "Resource": "*",
                "Condition": {"StringEqualsIfExists": {"k": "v"}, "Null": {"n": "true"}},
            },
        ]
    }
    queue, definition = "arn:aws:batch:r:1:job-queue/a", "arn:aws:batch:r:1:job-definition/x-1:2"
    ok = {"batch:ShareIdentifier": "b"}
    assert allowed([doc], Request("batch:submitjob", (queue, definition), ok))  # case of actions
    assert decide([doc], Request("batch:SubmitJob", (queue, definition), {})) == "implicit-deny"
    other = "arn:aws:batch:r:1:job-queue/ab"  # a wildcard-free resource matches exactly
    assert not allowed([doc], Request("batch:SubmitJob", (other, definition), ok))
    assert not allowed([doc], Request("batch:SubmitJob", (queue,), {"batch:ShareIdentifier": "c"}))
    bad = {**ok, "aws:RequestTag/t": "bad1"}
    assert decide([doc], Request("batch:SubmitJob", (queue, definition), bad)) == "deny"
    assert allowed([doc], Request("logs:GetLogEvents", ("x",), {}))  # IfExists: absent is fine
    assert not allowed([doc], Request("logs:GetLogEvents", ("x",), {"k": "w"}))
    assert not allowed([doc], Request("logs:GetLogEvents", ("x",), {"n": "1"}))  # Null: true
    assert render({"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":", {"Ref": "Q"}]]}) == (
        "arn:aws:<Q>"
    )


# --- the synthesized documents -------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    return synth_teams(tmp_path_factory).template()


def queue(cluster, pool: str) -> str:
    logical = (
        "JobQueue"
        if pool == "default"
        else resource_id(
            cluster,
            "Pool" + "".join(p.capitalize() for p in pool.split("-")) + "JobQueue",
            "AWS::Batch::JobQueue",
        )
    )
    return f"<{logical}>"


def submit(cluster, pool: str, share: str | None, tag: str | None, owner=None) -> Request:
    """SubmitJob to the pool's queue of a definition of ``owner``'s (the tag's team)."""
    context = {}
    if share is not None:
        context["batch:ShareIdentifier"] = share
    if tag is not None:
        context[f"aws:RequestTag/{TEAM_TAG}"] = tag
    owner = owner or tag or "vision"
    return Request("batch:SubmitJob", (queue(cluster, pool), definition(owner)), context)


@pytest.mark.cdk
def test_a_vision_user_submits_to_visions_pools_as_vision_only(cluster):
    vision = [user_policy(cluster, "vision")]
    assert allowed(vision, submit(cluster, "default", "vision", "vision"))
    assert allowed(vision, submit(cluster, "cpu", "vision", "vision"))
    assert not allowed(vision, submit(cluster, "llm-cb", "vision", "vision"))  # llm's pool
    assert not allowed(vision, submit(cluster, "default", "llm", "vision"))  # llm's share
    assert not allowed(vision, submit(cluster, "default", None, "vision"))  # no share
    assert not allowed(vision, submit(cluster, "default", "vision", "llm"))  # llm's tag
    assert not allowed(vision, submit(cluster, "default", "vision", None))  # untagged
    llm = [user_policy(cluster, "llm")]
    assert allowed(llm, submit(cluster, "llm-cb", "llm", "llm"))
    assert not allowed(llm, submit(cluster, "cpu", "llm", "llm"))


@pytest.mark.cdk
def test_a_vision_user_cannot_run_llms_job_definition_and_its_roles(cluster):
    """SubmitJob names no role: the definition brings its roles. A vision user submitting a
    definition llm registered (llm's job and execution roles) to vision's own queue as vision
    is refused, as is a definition of a team whose name starts with vision's; the Batch user
    guide scopes SubmitJob by a definition name prefix ending in "_" (iam-example-job-def.html,
    iam-example-restrict-job-submission: "you must provide both job queue and job definition
    resource types"; a SubmitJob request's definition ARN carries its revision)."""
    vision = [user_policy(cluster, "vision")]
    assert allowed(vision, submit(cluster, "default", "vision", "vision", owner="vision"))
    assert not allowed(vision, submit(cluster, "default", "vision", "vision", owner="llm"))
    assert not allowed(vision, submit(cluster, "default", "vision", "vision", owner="vision-x"))
    stack_definition = ARN.format("batch", "job-definition/efa-batch-0123abcd:1")
    request = Request(
        "batch:SubmitJob",
        (queue(cluster, "default"), stack_definition),
        {"batch:ShareIdentifier": "vision", f"aws:RequestTag/{TEAM_TAG}": "vision"},
    )
    assert not allowed(vision, request)  # the stack's own roles, no team's


def role_arn(cluster, team: str, kind: str) -> str:
    name = "Team" + team.capitalize() + kind
    return f"<{resource_id(cluster, name, 'AWS::IAM::Role')}.Arn>"


@pytest.mark.cdk
def test_a_vision_user_passes_visions_roles_only(cluster):
    vision = [user_policy(cluster, "vision")]
    to_batch = {"iam:PassedToService": "batch.amazonaws.com"}
    for kind in ("JobRole", "ExecutionRole"):
        mine = role_arn(cluster, "vision", kind)
        assert allowed(vision, Request("iam:PassRole", (mine,), to_batch))
        assert not allowed(
            vision, Request("iam:PassRole", (role_arn(cluster, "llm", kind),), to_batch)
        )
    # The stack's own roles (one-team stacks') are no team's.
    stack_role = f"<{resource_id(cluster, 'JobRole', 'AWS::IAM::Role')}.Arn>"
    assert not allowed(vision, Request("iam:PassRole", (stack_role,), to_batch))


@pytest.mark.cdk
def test_a_vision_user_ends_and_tags_visions_jobs_only(cluster):
    vision = [user_policy(cluster, "vision")]
    for action in ("batch:TerminateJob", "batch:CancelJob"):
        assert allowed(vision, Request(action, (JOB,), {f"aws:ResourceTag/{TEAM_TAG}": "vision"}))
        assert not allowed(vision, Request(action, (JOB,), {f"aws:ResourceTag/{TEAM_TAG}": "llm"}))
        assert not allowed(vision, Request(action, (JOB,), {}))  # an untagged job
    # Tags at submission (a new job: no resource tag yet), never relabelling llm's job.
    tag = {f"aws:RequestTag/{TEAM_TAG}": "vision"}
    assert allowed(vision, Request("batch:TagResource", (JOB,), tag))
    relabel = {**tag, f"aws:ResourceTag/{TEAM_TAG}": "llm"}
    assert not allowed(vision, Request("batch:TagResource", (JOB,), relabel))


@pytest.mark.cdk
def test_a_vision_user_reads_visions_logs_only(cluster):
    vision = [user_policy(cluster, "vision")]

    def group(team: str) -> str:
        logical = resource_id(cluster, f"Team{team.capitalize()}LogGroup", "AWS::Logs::LogGroup")
        return f"<{logical}.Arn>"

    assert allowed(vision, Request("logs:FilterLogEvents", (group("vision"),)))
    assert not allowed(vision, Request("logs:FilterLogEvents", (group("llm"),)))
    stack_group = f"<{resource_id(cluster, 'JobLogGroup', 'AWS::Logs::LogGroup')}.Arn>"
    assert not allowed(vision, Request("logs:FilterLogEvents", (stack_group,)))


def secret(name: str) -> str:
    return ARN.format("secretsmanager", f"secret:{name}-AbCdEf")


@pytest.mark.cdk
def test_visions_execution_role_reads_vision_and_shared_secrets_not_llms(cluster):
    documents = role_documents(cluster, "TeamVisionExecutionRole")
    read = "secretsmanager:GetSecretValue"
    assert allowed(documents, Request(read, (secret("vision/hf-token"),)))
    assert allowed(documents, Request(read, (secret("shared/registry"),)))  # job_secrets
    assert not allowed(documents, Request(read, (secret("llm/hf-token"),)))
    assert not allowed(documents, Request(read, (secret("speech/hf-token"),)))
    resources = str(render(documents))
    assert "secret:vision/*" in resources and "llm/" not in resources


def efs_statements(documents: list[dict]) -> list[dict]:
    return [
        s
        for d in documents
        for s in render(d)["Statement"]
        if "elasticfilesystem:AccessPointArn" in s.get("Condition", {}).get("StringEquals", {})
    ]


def access_point_arns(documents: list[dict]) -> list[str]:
    return [
        s["Condition"]["StringEquals"]["elasticfilesystem:AccessPointArn"]
        for s in efs_statements(documents)
    ]


@pytest.mark.cdk
def test_a_teams_job_role_mounts_its_own_directory_and_the_common_one_only(cluster):
    """The job role's grants with the file system policy (infra/storage.py), whose denials
    hold for every principal: no mount without an access point, no root access."""
    (common,) = access_point_arns(role_documents(cluster, "JobRole"))
    vision_docs = role_documents(cluster, "TeamVisionJobRole")
    llm_docs = role_documents(cluster, "TeamLlmJobRole")
    (own_vision,) = [a for a in access_point_arns(vision_docs) if a != common]
    (own_llm,) = [a for a in access_point_arns(llm_docs) if a != common]
    assert own_vision != own_llm
    fs_policy = file_system_policy().to_json()
    (file_system,) = {s["Resource"] for s in efs_statements([*vision_docs, *llm_docs])}

    def may(docs: list[dict], action: str, access_point: str | None) -> bool:
        context = {"aws:SecureTransport": "true"}
        if access_point is not None:
            context["elasticfilesystem:AccessPointArn"] = access_point
        return allowed([*docs, fs_policy], Request(action, (file_system,), context))

    mount, write = "elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"
    assert may(vision_docs, mount, own_vision) and may(vision_docs, write, own_vision)
    assert may(vision_docs, mount, common) and not may(vision_docs, write, common)  # ro
    assert may(llm_docs, write, common)  # llm: common=rw
    assert not may(vision_docs, mount, own_llm) and not may(vision_docs, write, own_llm)
    assert not may(vision_docs, mount, None)  # the whole file system
    assert not may(vision_docs, "elasticfilesystem:ClientRootAccess", own_vision)


@pytest.mark.cdk
def test_a_vision_user_registers_and_submits_copy_jobs(cluster):
    """Copying a base into the workspace repository (launcher/copyjob/plan.py): the user
    registers a copy definition, named COPY_DEFINITION_PREFIX-HASH, and submits it to the copy
    queue; that prefix is the launcher's own."""
    from infra.teams import COPY_DEFINITION_PREFIX
    from launcher.copyjob import plan

    assert f"{plan.COPY_DEFINITION_PREFIX}-" == COPY_DEFINITION_PREFIX
    vision = [user_policy(cluster, "vision")]
    copy_definition = ARN.format("batch", f"job-definition/{COPY_DEFINITION_PREFIX}0123abcd")
    assert allowed(vision, Request("batch:RegisterJobDefinition", (copy_definition,), {}))
    assert allowed(vision, Request("batch:RegisterJobDefinition", (definition("vision"),), {}))
    assert not allowed(vision, Request("batch:RegisterJobDefinition", (definition("llm"),), {}))


@pytest.mark.cdk
def test_the_copy_execution_role_writes_each_teams_log_group(cluster):
    """A team's copy jobs log to its group (launcher/copyjob/plan.py), which its users read;
    the ECS agent writes it as the shared copy execution role ("logs:CreateLogStream,
    logs:PutLogEvents" for awslogs: ECS developer guide, task_execution_IAM_role.html)."""
    documents = role_documents(cluster, "CopyExecutionRole")
    for team in ("vision", "speech", "llm"):
        logical = resource_id(cluster, f"Team{team.capitalize()}LogGroup", "AWS::Logs::LogGroup")
        assert allowed(documents, Request("logs:PutLogEvents", (f"<{logical}.Arn>",)))
