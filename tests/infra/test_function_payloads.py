"""The function bucket (infra/function_payloads.py), where a Python function's payload and
results wait between the caller and the job: its settings as the synthesized templates carry
them, `cdk synth`'s cdk-nag pass over them, and who may read and write a payload, evaluated on
every IAM policy of the stacks (tests/support/iam_eval.py) in a stack without teams and in
cdk.json's three-team environment.
"""

from __future__ import annotations

import copy
import json

import pytest

from infra.config import load
from infra.function_payloads import bucket_settings
from launcher.stack.functions import payload_prefix
from tests.conftest import cdk_context, synth_templates
from tests.rules.roles import aws_managed_document
from tests.support.config_refusal import refusal
from tests.support.iam_eval import Request, allowed, decide, render

CALL = "0123456789abcdef0123456789abcdef"  # a call's id: 32 random hex digits
PAYLOAD_ACTIONS = ("s3:GetObject", "s3:PutObject")


def bucket_of(template: dict) -> tuple[str, dict]:
    """The function bucket: the one the FunctionBucket output names."""
    logical_id = template["Outputs"]["FunctionBucket"]["Value"]["Ref"]
    return logical_id, template["Resources"][logical_id]


def bucket_policy(template: dict, logical_id: str) -> dict:
    (policy,) = [
        r["Properties"]["PolicyDocument"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::S3::BucketPolicy" and r["Properties"]["Bucket"] == {"Ref": logical_id}
    ]
    return policy


# --- the bucket's settings -----------------------------------------------------------------


@pytest.mark.cdk
def test_the_bucket_is_private_encrypted_unversioned_kept_and_named_by_cloudformation(
    synth_default,
):
    """Block Public Access, all four settings (S3 user guide,
    access-control-block-public-access.html); Object Ownership BucketOwnerEnforced, "ACLs are
    disabled" (about-object-ownership.html); default encryption SSE-S3, AES256
    (default-bucket-encryption.html), so no reader needs a KMS grant (UsingKMSEncryption.html);
    no versions to outlive the expiration (Versioning.html); no BucketName, so CloudFormation
    generates one and no later change of name can replace it (CloudFormation reference,
    aws-resource-s3-bucket.html, BucketName: "Update requires: Replacement"); Retain on delete
    and replacement (the DeletionPolicy attribute reference)."""
    logical_id, bucket = bucket_of(synth_default.template())
    assert logical_id == "FunctionPayloadsECCBB886"  # pinned: a new id is a new bucket
    props = bucket["Properties"]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    assert props["BucketEncryption"] == {
        "ServerSideEncryptionConfiguration": [
            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
        ]
    }
    assert "VersioningConfiguration" not in props
    assert "BucketName" not in props
    assert "LoggingConfiguration" not in props
    # the demo environment is removal_policy=destroy, and the bucket is kept all the same
    assert synth_default.config.removal_policy == "destroy"
    assert (bucket["DeletionPolicy"], bucket["UpdateReplacePolicy"]) == ("Retain", "Retain")


@pytest.mark.cdk
def test_objects_expire_after_function_payload_days(synth_default, tmp_path_factory):
    """Expiration "Days": "Indicates the lifetime, in days, of the objects that are subject to
    the rule. The value must be a non-zero positive integer" (S3 API reference,
    API_LifecycleExpiration.html); S3 adds them to each object's creation time and rounds up
    to the next midnight UTC (S3 user guide, intro-lifecycle-rules.html). A rule with no
    filter applies to every object; stale multipart uploads go after a day
    (mpu-abort-incomplete-mpu-lifecycle-config.html). 7 by default, 14 when set so."""
    for templates, days in (
        ({"EfaBatch": synth_default.template()}, 7),
        (synth_templates(tmp_path_factory, function_payload_days=14), 14),
    ):
        _, bucket = bucket_of(templates["EfaBatch"])
        assert bucket["Properties"]["LifecycleConfiguration"] == {
            "Rules": [
                {
                    "Id": "ExpireFunctionPayloads",
                    "Status": "Enabled",
                    "ExpirationInDays": days,
                    "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
                }
            ]
        }


@pytest.mark.cdk
def test_the_bucket_policy_refuses_requests_without_tls_and_grants_nothing(synth_default):
    """A Deny of s3:* on the bucket and its objects for everyone when aws:SecureTransport is
    false ("Enforce encryption of data in transit", S3 user guide,
    security-best-practices.html), and when s3:TlsVersion is below 1.2
    (amazon-s3-policy-keys.html). The policy allows nothing, so within the account only an
    identity policy can allow a request (IAM user guide,
    reference_policies_evaluation-logic.html)."""
    template = synth_default.template()
    logical_id, _ = bucket_of(template)
    statements = render(bucket_policy(template, logical_id))["Statement"]
    assert {s["Effect"] for s in statements} == {"Deny"}
    everything = [f"<{logical_id}.Arn>", f"<{logical_id}.Arn>/*"]
    assert all(s["Principal"] == {"AWS": "*"} and s["Resource"] == everything for s in statements)
    assert sorted(json.dumps(s["Condition"], sort_keys=True) for s in statements) == [
        '{"Bool": {"aws:SecureTransport": "false"}}',
        '{"NumericLessThan": {"s3:TlsVersion": 1.2}}',
    ]
    no_tls = [s for s in statements if "Bool" in s["Condition"]]
    key = f"<{logical_id}.Arn>/functions/{CALL}/payload"
    plain = Request("s3:GetObject", (key,), {"aws:SecureTransport": "false"})
    tls = Request("s3:GetObject", (key,), {"aws:SecureTransport": "true"})
    assert decide([{"Statement": no_tls}], plain) == "deny"
    assert decide([{"Statement": no_tls}], tls) == "implicit-deny"


@pytest.mark.cdk
def test_the_function_bucket_output_names_the_bucket(synth_default, synth_teams):
    for synth in (synth_default, synth_teams):
        outputs = synth.template()["Outputs"]
        logical_id, _ = bucket_of(synth.template())
        assert outputs["FunctionBucket"]["Value"] == {"Ref": logical_id}


# --- cdk-nag, as `cdk synth` runs it -------------------------------------------------------


@pytest.mark.cdk
def test_cdk_nag_finds_only_the_access_logs_on_these_settings_and_the_stack_acknowledges_it(
    tmp_path,
):
    """`cdk synth` runs cdk-nag's AwsSolutions pack and fails on an unacknowledged finding
    (infra/app.py): the very settings on a bucket of no acknowledgment raise AwsSolutions-S1
    (server access logs) and nothing else, and the app's own bucket, acknowledged, raises
    nothing (the fixtures synth_default and synth_teams synthesize so, and the real CLI in
    tests/infra/test_checks.py)."""
    from aws_cdk import aws_s3 as s3

    from infra.app import create_app

    app, config, stacks = create_app(cdk_context(), outdir=str(tmp_path))
    s3.Bucket(stacks["cluster"], "Unacknowledged", **bucket_settings(config))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    found = sorted(
        (v["ruleName"], c["constructPath"])
        for plugin in report["pluginReports"]
        for v in plugin["violations"]
        for c in v["violatingConstructs"]
    )
    assert found == [("AwsSolutions-S1", "EfaBatch/Unacknowledged/Resource")]


# --- who may read and write a payload (the rule test) -----------------------------------------


def principals(templates: dict[str, dict], bucket_id: str) -> dict[str, list[dict]]:
    """Every IAM principal of the stacks with the documents of every policy it holds: each
    role (its inline policies, the stacks' policies attached to it, its managed policies, AWS's
    own read from moto's copy) and each managed policy on its own (the teams' user policies,
    which IAM users and groups get). The bucket's ARN is written as S3 writes it
    (arn:aws:s3:::NAME), so a wildcard on every bucket matches it too."""
    arn = f"<{bucket_id}.Arn>"

    def documents(docs: list[dict]) -> list[dict]:
        text = json.dumps([render(d) for d in docs]).replace(arn, f"arn:aws:s3:::<{bucket_id}>")
        return json.loads(text)

    found: dict[str, list[dict]] = {}
    for stack, template in templates.items():
        resources = template["Resources"]
        for logical_id, res in resources.items():
            props = res.get("Properties", {})
            if res["Type"] == "AWS::IAM::ManagedPolicy":
                found[f"{stack}/{logical_id}"] = documents([props["PolicyDocument"]])
            if res["Type"] != "AWS::IAM::Role":
                continue
            docs = [p["PolicyDocument"] for p in props.get("Policies", [])]
            docs += [
                r["Properties"]["PolicyDocument"]
                for r in resources.values()
                if r["Type"] == "AWS::IAM::Policy"
                and {"Ref": logical_id} in r["Properties"].get("Roles", [])
            ]
            for value in props.get("ManagedPolicyArns", []):
                if isinstance(value, dict) and "Ref" in value:  # one of the stacks' own
                    docs.append(resources[value["Ref"]]["Properties"]["PolicyDocument"])
                    continue
                arn_text = render(value)
                managed = aws_managed_document(arn_text)
                assert managed is not None, f"{stack}/{logical_id}: cannot see {arn_text}"
                docs.append(managed)
            found[f"{stack}/{logical_id}"] = documents(docs)
    return found


def may(docs: list[dict], action: str, key: str, bucket_id: str) -> bool:
    """Whether the documents allow ``action`` on the object ``key``, over TLS."""
    resource = f"arn:aws:s3:::<{bucket_id}>/{key}"
    return allowed(docs, Request(action, (resource,), {"aws:SecureTransport": "true"}))


def readers(found: dict[str, list[dict]], action: str, key: str, bucket_id: str) -> list[str]:
    """The principals (their logical ids' leading words) allowed ``action`` on ``key``."""
    return sorted(p for p, docs in found.items() if may(docs, action, key, bucket_id))


@pytest.mark.cdk
def test_only_the_job_role_reads_or_writes_a_payload_in_a_stack_without_teams(synth_default):
    """Of every role and managed policy of the three stacks, the job role alone may
    s3:GetObject and s3:PutObject a call's payload (functions/CALL/payload): the bucket policy
    allows nothing (above), so in the account an identity policy's Allow decides and without
    one the request is implicitly denied (IAM user guide,
    reference_policies_evaluation-logic.html); object actions take the object's ARN,
    arn:aws:s3:::BUCKET/KEY (Service Authorization Reference, list_amazons3.html)."""
    templates = synth_default.templates()
    bucket_id, _ = bucket_of(synth_default.template())
    found = principals(templates, bucket_id)
    key = f"{payload_prefix(None)}{CALL}/payload"
    assert len(found) > 5  # the instance, execution, job, copy, replacer... roles
    (job_role,) = [p for p in found if p.startswith("EfaBatch/JobRole")]
    for action in PAYLOAD_ACTIONS:
        assert readers(found, action, key, bucket_id) == [job_role], action
    # neither deletes nor lists: a call's objects are found by their key and expire
    assert readers(found, "s3:DeleteObject", key, bucket_id) == []
    assert not may(found[job_role], "s3:GetObject", "other/x", bucket_id)


@pytest.mark.cdk
def test_a_teams_payload_is_reached_by_its_job_role_and_users_alone(synth_teams):
    """In cdk.json's teams environment, vision's job role may read and write
    functions/vision/CALL/payload and vision's users' policy may also delete it; llm's job role
    and users may do none of it with vision's, and no other role or policy of the stacks may
    read any team's payload, the stack's own job role included (IAM user guide,
    reference_policies_evaluation-logic.html: no Allow, an implicit deny). Keys are compared
    as plain strings, so functions/vision/ never matches functions/vision-x/ (the prefix ends
    in /; reference_policies_elements_resource.html)."""
    templates = synth_teams.templates()
    bucket_id, _ = bucket_of(synth_teams.template())
    found = principals(templates, bucket_id)

    def one(prefix: str) -> str:
        (name,) = [p for p in found if p.split("/", 1)[1].startswith(prefix)]
        return name

    vision_job, vision_users = one("TeamVisionJobRole"), one("TeamVisionUserPolicy")
    llm_job, llm_users = one("TeamLlmJobRole"), one("TeamLlmUserPolicy")
    vision = f"{payload_prefix('vision')}{CALL}/payload"
    for action in PAYLOAD_ACTIONS:
        assert readers(found, action, vision, bucket_id) == sorted([vision_job, vision_users])
    assert readers(found, "s3:DeleteObject", vision, bucket_id) == [vision_users]
    for action in (*PAYLOAD_ACTIONS, "s3:DeleteObject"):
        assert not may(found[llm_job], action, vision, bucket_id)
        assert not may(found[llm_users], action, vision, bucket_id)
        assert may(found[llm_users], action, f"functions/llm/{CALL}/payload", bucket_id)
    for team in ("vision", "speech", "llm"):
        key = f"{payload_prefix(team)}{CALL}/result-0"
        name = "Team" + team.capitalize()
        own = sorted([one(f"{name}JobRole"), one(f"{name}UserPolicy")])
        assert readers(found, "s3:GetObject", key, bucket_id) == own, team
    # a stack with teams gives its own job role nothing of the bucket, not even functions/
    (stack_job,) = [p for p in found if p.startswith("EfaBatch/JobRole")]
    assert not may(found[stack_job], "s3:GetObject", f"functions/{CALL}/payload", bucket_id)
    assert readers(found, "s3:GetObject", f"functions/{CALL}/payload", bucket_id) == []
    assert not may(found[vision_job], "s3:GetObject", f"functions/vision-x/{CALL}", bucket_id)


# --- the setting ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ("0", "function_payload_days: 0; allowed: 1-3650 (days)"),
        ("3651", "function_payload_days: 3651; allowed: 1-3650 (days)"),
        ("-1", "function_payload_days: -1; allowed: 1-3650 (days)"),
        ("week", "function_payload_days: 'week' is not an integer"),
    ],
)
def test_a_bad_function_payload_days_is_refused_in_one_line(value, line):
    """S3 takes a lifecycle expiration of "a non-zero positive integer" of days (S3 API
    reference, API_LifecycleExpiration.html); `cdk synth` stops with this line first."""
    assert refusal(function_payload_days=value).startswith(line)


@pytest.mark.parametrize("days", ["1", "3650"])
def test_the_ends_of_function_payload_days_load(days):
    assert load(cdk_context(function_payload_days=days)).function_payload_days == int(days)


# --- the stack rules (tests/rules/payload_rules.py) catch what they are about -----------------


@pytest.mark.cdk
def test_the_payload_rules_catch_a_wider_grant_a_public_bucket_and_plain_http(synth_default):
    from tests.rules import payload_rules
    from tests.rules.deployment import Deployment

    templates = synth_default.templates()
    resources = templates["EfaBatch"]["Resources"]
    bucket_id, bucket = bucket_of(templates["EfaBatch"])
    d = Deployment(copy.deepcopy(templates), synth_default.config)
    assert payload_rules.function_bucket_is_private_encrypted_and_expires(d) == []
    assert payload_rules.function_payloads_reach_only_their_prefix(d) == []

    bucket["Properties"]["PublicAccessBlockConfiguration"]["RestrictPublicBuckets"] = False
    bucket["Properties"]["LifecycleConfiguration"]["Rules"][0]["ExpirationInDays"] = 30
    (policy,) = [r for r in resources.values() if r["Type"] == "AWS::S3::BucketPolicy"]
    policy["Properties"]["PolicyDocument"]["Statement"].pop(0)  # the aws:SecureTransport Deny
    (execution,) = [
        r
        for k, r in resources.items()
        if r["Type"] == "AWS::IAM::Policy" and k.startswith("ExecutionRoleDefaultPolicy")
    ]
    execution["Properties"]["PolicyDocument"]["Statement"].append(
        {
            "Action": "s3:GetObject",
            "Effect": "Allow",
            "Resource": {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/*"]]},
        }
    )
    broken = Deployment(templates, synth_default.config)
    assert payload_rules.function_bucket_is_private_encrypted_and_expires(broken) == [
        f"EfaBatch/{bucket_id}: RestrictPublicBuckets is not true",
        f"EfaBatch/{bucket_id}: no one enabled rule expires every object after 7 days and "
        "aborts stale uploads: " + str(bucket["Properties"]["LifecycleConfiguration"]["Rules"]),
        f"EfaBatch/{bucket_id}: no Deny of s3:* without TLS (aws:SecureTransport)",
    ]
    (problem,) = payload_rules.function_payloads_reach_only_their_prefix(broken)
    assert problem.startswith("EfaBatch/ExecutionRole") and "s3:GetObject" in problem
