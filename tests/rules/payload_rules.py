"""The function bucket (infra/function_payloads.py), where Python functions' payloads and
results wait: private, encrypted, over TLS only, emptied by its lifecycle rule, and reached by
the job roles (and team users' policies) on their own prefix alone."""

from __future__ import annotations

import re

from infra.team_config import team_construct_name
from launcher.stack.functions import payload_prefix
from launcher.stack.outputs import OutputKey
from tests.rules.data_rules import function_bucket_arn, role_grants
from tests.rules.deployment import Deployment, Resource
from tests.rules.registry import Model, Page, rule
from tests.rules.roles import as_list

EXPIRATION_DAYS = Model(
    "s3",
    "LifecycleExpiration",
    "Days",
    "Indicates the lifetime, in days, of the objects that are subject to the rule. The value "
    "must be a non-zero positive integer.",
)
ABORT_UPLOADS = Model(
    "s3",
    "AbortIncompleteMultipartUpload",
    "DaysAfterInitiation",
    "Specifies the number of days after which Amazon S3 aborts an incomplete multipart upload.",
)
OWNER_ENFORCED = Model(
    "s3",
    "OwnershipControlsRule",
    "ObjectOwnership",
    "BucketOwnerEnforced - Access control lists (ACLs) are disabled and no longer affect "
    "permissions.",
)
RESTRICT_PUBLIC = Model(
    "s3",
    "PublicAccessBlockConfiguration",
    "RestrictPublicBuckets",
    "Specifies whether Amazon S3 should restrict public bucket policies for this bucket.",
)
SECURE_TRANSPORT = Page(
    "https://docs.aws.amazon.com/AmazonS3/latest/userguide/security-best-practices.html",
    "aws:SecureTransport",
)
SSE_KMS_PERMISSIONS = Page(
    "https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html",
    "kms:GenerateDataKey",
)
SAME_ACCOUNT = Page(
    "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html",
    "explicit deny",
)

JOB_ACTIONS = {"s3:GetObject", "s3:PutObject"}
USER_ACTIONS = {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}


def function_bucket(d: Deployment) -> Resource | None:
    bucket = d.ref_target(d.config.stack_name, d.output(OutputKey.FUNCTION_BUCKET.value))
    return bucket if bucket is not None and bucket.type == "AWS::S3::Bucket" else None


@rule(
    EXPIRATION_DAYS,
    ABORT_UPLOADS,
    OWNER_ENFORCED,
    RESTRICT_PUBLIC,
    SECURE_TRANSPORT,
    SSE_KMS_PERMISSIONS,
    covers=(
        "AWS::S3::Bucket.BucketEncryption",
        "AWS::S3::Bucket.LifecycleConfiguration",
        "AWS::S3::Bucket.OwnershipControls",
        "AWS::S3::Bucket.PublicAccessBlockConfiguration",
        "AWS::S3::BucketPolicy.Bucket",
        "AWS::S3::BucketPolicy.PolicyDocument",
    ),
)
def function_bucket_is_private_encrypted_and_expires(d: Deployment) -> list[str]:
    """The FunctionBucket output names one bucket of the stacks, which blocks public access,
    has ACLs off, is encrypted with S3-managed keys, expires every object after
    function_payload_days, and whose bucket policy denies anything without TLS and allows
    nothing.

    Expiration Days "Indicates the lifetime, in days, of the objects that are subject to the
    rule" (https://docs.aws.amazon.com/AmazonS3/latest/API/API_LifecycleExpiration.html); a
    rule without a filter applies to every object. An incomplete multipart upload is aborted
    after DaysAfterInitiation (https://docs.aws.amazon.com/AmazonS3/latest/API/
    API_AbortIncompleteMultipartUpload.html). "BucketOwnerEnforced - Access control lists
    (ACLs) are disabled and no longer affect permissions"
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_OwnershipControlsRule.html), and all
    four PublicAccessBlockConfiguration flags keep policies and ACLs from making it public
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_PublicAccessBlockConfiguration.html).
    A Deny on aws:SecureTransport false refuses plain HTTP (https://docs.aws.amazon.com/
    AmazonS3/latest/userguide/security-best-practices.html). SSE-KMS would need
    kms:GenerateDataKey and kms:Decrypt on the key for every writer and reader
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html), which the
    nodes' signed requests do not carry: AES256 (SSE-S3).
    """
    bucket = function_bucket(d)
    if bucket is None:
        return ["FunctionBucket names no bucket of the stacks"]
    p = bucket.props
    problems = []
    blocks = p.get("PublicAccessBlockConfiguration", {})
    flags = ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets")
    problems += [f"{bucket.path}: {f} is not true" for f in flags if blocks.get(f) is not True]
    owners = [r.get("ObjectOwnership") for r in p.get("OwnershipControls", {}).get("Rules", [])]
    if owners != ["BucketOwnerEnforced"]:
        problems.append(f"{bucket.path}: ObjectOwnership {owners}, not BucketOwnerEnforced")
    sse = p.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [])
    algorithms = [c.get("ServerSideEncryptionByDefault", {}).get("SSEAlgorithm") for c in sse]
    if algorithms != ["AES256"]:
        problems.append(f"{bucket.path}: default encryption {algorithms}, not SSE-S3 (AES256)")
    rules = [r for r in p.get("LifecycleConfiguration", {}).get("Rules", [])]
    expiring = [
        r
        for r in rules
        if r.get("Status") == "Enabled"
        and r.get("ExpirationInDays") == d.cluster_config.function_payload_days
        and not r.get("Prefix")
        and not r.get("TagFilters")
        and r.get("AbortIncompleteMultipartUpload", {}).get("DaysAfterInitiation", 0) >= 1
    ]
    if len(expiring) != 1:
        problems.append(
            f"{bucket.path}: no one enabled rule expires every object after "
            f"{d.cluster_config.function_payload_days} days and aborts stale uploads: {rules}"
        )
    if p.get("VersioningConfiguration", {}).get("Status") == "Enabled":
        problems.append(f"{bucket.path}: versioned; old versions outlive the expiration")
    policies = [
        r
        for r in d.of_type("AWS::S3::BucketPolicy")
        if r.stack == bucket.stack and r.props.get("Bucket") == {"Ref": bucket.logical_id}
    ]
    statements = [s for r in policies for s in as_list(r.props["PolicyDocument"]["Statement"])]
    problems += [
        f"{bucket.path}: its bucket policy allows {s.get('Action')}"
        for s in statements
        if s.get("Effect") != "Deny"
    ]
    no_tls = [
        s
        for s in statements
        if s.get("Effect") == "Deny"
        and s.get("Action") == "s3:*"
        and s.get("Principal") in ("*", {"AWS": "*"})
        and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
        and len(as_list(s.get("Resource"))) == 2  # the bucket and its objects
    ]
    if not no_tls:
        problems.append(f"{bucket.path}: no Deny of s3:* without TLS (aws:SecureTransport)")
    return problems


@rule(SAME_ACCOUNT, covers=())
def function_payloads_reach_only_their_prefix(d: Deployment) -> list[str]:
    """Only the job role in a stack without teams (GetObject, PutObject on functions/*), and in
    a stack with teams only each team's job role (the same on functions/TEAM/*) and its users'
    policy (GetObject, PutObject, DeleteObject there) hold any grant on the function bucket;
    the bucket policy grants no one (function_bucket_is_private_encrypted_and_expires), so in
    the account an identity policy decides alone: "an explicit deny in any policy overrides
    any allows", and without an allow the request is implicitly denied
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html).
    """
    arn = function_bucket_arn(d)
    teams = sorted(d.cluster_config.teams)
    job_role = d.ref_target(d.config.stack_name, d.output(OutputKey.JOB_ROLE_ARN.value))
    wanted: dict[str, set[tuple[str, str]]] = {}
    if not teams and job_role is not None:
        wanted[job_role.path] = {(a, f"{arn}/{payload_prefix(None)}*") for a in JOB_ACTIONS}
    owner = {f"Team{team_construct_name(t)}": t for t in teams}
    problems = []
    for role in d.of_type("AWS::IAM::Role"):
        team = _team_of(role, owner, "JobRole")
        if team is not None:
            wanted[role.path] = {(a, f"{arn}/{payload_prefix(team)}*") for a in JOB_ACTIONS}
        granted = {
            (action.removeprefix("Allow "), resource)
            for action, resource, _ in role_grants(d, role, "s3")
            if resource.startswith(arn) or resource in ("*", "arn:aws:s3:::*")
        }
        if granted != wanted.get(role.path, set()):
            problems.append(f"{role.path}: {sorted(granted)} on the function bucket")
    for policy in d.of_type("AWS::IAM::ManagedPolicy"):
        team = _team_of(policy, owner, "UserPolicy")
        statements = as_list(policy.props["PolicyDocument"]["Statement"])
        granted = {
            (action, d.text(policy.stack, resource))
            for s in statements
            for action in as_list(s.get("Action", []))
            for resource in as_list(s.get("Resource", []))
            if d.text(policy.stack, resource).startswith(arn)
        }
        expected = {(a, f"{arn}/{payload_prefix(team)}*") for a in USER_ACTIONS} if team else set()
        if granted != expected:
            problems.append(f"{policy.path}: {sorted(granted)} on the function bucket")
    return problems


def _team_of(resource: Resource, owner: dict[str, str], kind: str) -> str | None:
    """The team whose ``kind`` (JobRole, UserPolicy) this is, by its logical id."""
    match = re.match(rf"^(Team[A-Za-z0-9]+?){kind}[0-9A-F]{{8}}$", resource.logical_id)
    return owner.get(match.group(1)) if match else None
