"""The function bucket: where a Python function's payload and results wait between the caller
and the job (launcher.api.functions), named in the FunctionBucket output.

Private, encrypted, reachable over TLS only, and emptied by a lifecycle rule after
``function_payload_days``. Nobody reaches it through the bucket policy (it only denies); each
reader is granted by its own identity policy, on its prefix alone
(launcher.stack.functions.payload_prefix): in a stack without teams the stack's job role on
``functions/``; with teams each team's job role and its users' policy on ``functions/TEAM/``,
and the stack's own job role nothing. No other role of the stack (instance, execution, copy,
node replacer) gets any grant.

It lives in the cluster stack, beside the roles it is granted to: a payload lives for days, so
nothing of it needs the storage stack's export, which CloudFormation would then keep from ever
changing. CloudFormation names the bucket (no BucketName, a create-only property), so no later
deploy can replace it by a name change.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.config import ClusterConfig
from launcher.stack.functions import payload_prefix

# What a job does with a call's objects: reads the payload, writes the results (the
# launcher's node runner signs a GET and a PUT, launcher/node/function/). Nothing lists.
JOB_ACTIONS = ("s3:GetObject", "s3:PutObject")
# What a team's users do: upload the payload, read the results, delete both when the call is
# done (launcher/aws/payloads.py).
USER_ACTIONS = ("s3:PutObject", "s3:GetObject", "s3:DeleteObject")
# A multipart upload that never completes still costs its parts; one day is longer than any
# payload upload takes (S3 user guide, mpu-abort-incomplete-mpu-lifecycle-config.html).
ABORT_UPLOADS_AFTER_DAYS = 1
# Why the bucket has no server access logs and no versions (cdk-nag AwsSolutions-S1; checkov).
_NO_ACCESS_LOGS = (
    "Payloads live for function_payload_days and only the job and users' roles named on their "
    "prefix reach them; CloudTrail data events, not a second bucket of access logs, are the "
    "account's choice for an audit of object reads."
)
_NO_VERSIONS = (
    "A payload is written once and read back within days; an old version would outlive the "
    "lifecycle rule meant to remove it."
)


def function_bucket(scope: Construct, config: ClusterConfig) -> s3.Bucket:
    """The bucket (module docstring), its findings acknowledged with their reasons."""
    bucket = s3.Bucket(scope, "FunctionPayloads", **bucket_settings(config))
    cfn = bucket.node.default_child
    assert isinstance(cfn, s3.CfnBucket)
    cfn.add_metadata(
        "checkov",
        {
            "skip": [
                {"id": "CKV_AWS_18", "comment": _NO_ACCESS_LOGS},
                {"id": "CKV_AWS_21", "comment": _NO_VERSIONS},
            ]
        },
    )
    Validations.of(bucket).acknowledge(Acknowledgment(id="AwsSolutions-S1", reason=_NO_ACCESS_LOGS))
    return bucket


def bucket_settings(config: ClusterConfig) -> dict[str, Any]:
    """The bucket's properties, each for the reason beside it."""
    return dict(
        # No policy or ACL can make an object public (S3 user guide,
        # access-control-block-public-access.html).
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        # A bucket policy that denies any request with aws:SecureTransport false, and (with
        # minimum_tls_version) any with s3:TlsVersion below 1.2 (S3 user guide,
        # security-best-practices.html, "Enforce encryption of data in transit").
        enforce_ssl=True,
        minimum_tls_version=1.2,
        # ACLs off: the bucket owner owns every object, and only policies grant access (S3
        # user guide, about-object-ownership.html).
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        # SSE-S3 (S3 user guide, UsingServerSideEncryption.html): S3 encrypts with keys of
        # its own, so the nodes, which sign their S3 requests with the job role alone, need no
        # kms:GenerateDataKey / kms:Decrypt grant and no KMS endpoint, as they would with
        # SSE-KMS (UsingKMSEncryption.html). A KMS key would not separate the teams either:
        # with a Bucket Key its encryption context is the bucket, not the object
        # (bucket-key.html); the prefixes' IAM grants do.
        encryption=s3.BucketEncryption.S3_MANAGED,
        versioned=False,  # an overwritten or deleted payload is gone, not kept as a version
        lifecycle_rules=[
            s3.LifecycleRule(
                id="ExpireFunctionPayloads",
                expiration=Duration.days(config.function_payload_days),
                abort_incomplete_multipart_upload_after=Duration.days(ABORT_UPLOADS_AFTER_DAYS),
            )
        ],
        # CDK's default, said here: deleting the stack leaves the bucket and what it holds
        # (docs/operating.md); CloudFormation deletes only an empty bucket anyway.
        removal_policy=RemovalPolicy.RETAIN,
    )


def objects_arn(bucket: s3.IBucket, team: str | None) -> str:
    """Every key under the prefix of ``team`` (None: the stack without teams)."""
    return bucket.arn_for_objects(f"{payload_prefix(team)}*")


def payload_statement(
    bucket: s3.IBucket, team: str | None, actions: tuple[str, ...], sid: str | None = None
) -> iam.PolicyStatement:
    """``actions`` on the prefix's objects alone: explicit actions, not ``grant_read_write``,
    whose s3:GetObject* / s3:Abort* / s3:DeleteObject* wildcards cdk-nag flags (IAM5) and which
    would reach versions and ACLs a payload does not have."""
    return iam.PolicyStatement(
        sid=sid, actions=list(actions), resources=[objects_arn(bucket, team)]
    )


def grant_payloads(role: iam.Role, bucket: s3.IBucket, team: str | None) -> None:
    """A job role reads payloads and writes results under its prefix (``team``'s, or the
    stack's ``functions/``)."""
    role.add_to_policy(payload_statement(bucket, team, JOB_ACTIONS))
    Validations.of(role).acknowledge(payload_finding(bucket, team))


def payload_finding(bucket: s3.IBucket, team: str | None) -> Acknowledgment:
    """cdk-nag's IAM5 finding for a grant on the prefix (every key under it: ends in /*)."""
    cfn = bucket.node.default_child  # the CfnBucket: the bucket is one of this app's
    assert isinstance(cfn, s3.CfnBucket), f"{bucket.node.path}: not made in this app"
    bucket_id = Stack.of(bucket).resolve(cfn.logical_id)
    return Acknowledgment(
        id=f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{payload_prefix(team)}*]",
        reason="The function bucket's objects under "
        + (f"team {team}'s prefix" if team else "the stack's prefix")
        + " (a call's key holds 128 random bits, launcher.stack.functions).",
    )
