"""What a job may reach besides its file systems: S3 data buckets, secrets, managed policies.

Each grant is exactly what the configuration names, on the role that uses it: the job role
(the training containers' credentials) reads and writes the data buckets and carries the
team's managed policies; the execution role (the ECS agent, before the container starts)
reads the allowed secrets. Every statement cites the rule it follows.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Annotations, Aws, Stack, Validations
from aws_cdk import aws_iam as iam

from infra.data_config import MAX_MANAGED_POLICIES_PER_ROLE
from launcher.stack.buckets import DataBucket
from launcher.stack.secrets import Place, SecretGrant, Store

# IAM quotas: "Managed policies attached to an IAM role: 10" by default, adjustable to 20
# (IAM user guide, reference_iam-quotas.html); the configuration refuses more than 20.
DEFAULT_MANAGED_POLICIES_PER_ROLE = 10

_READ_OBJECTS = ("s3:GetObject",)
# Writing includes multipart uploads, which large checkpoints use: "You must be allowed to
# perform the s3:PutObject action on an object to create multipart upload", and
# s3:AbortMultipartUpload / s3:ListMultipartUploadParts to stop one or list its parts (S3 user
# guide, mpuoverview.html). Listing a bucket's uploads in progress is not needed to upload.
_WRITE_OBJECTS = (
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
)


def stack_place(stack: Stack) -> Place:
    """The stack's partition, Region and account (tokens that CloudFormation resolves)."""
    return Place(Aws.PARTITION, stack.region, stack.account)


def bucket_statements(buckets: tuple[DataBucket, ...]) -> list[iam.PolicyStatement]:
    """Exactly the configured locations: list the prefix, read (and write) its objects.

    Listing is s3:ListBucket on the bucket with an s3:prefix condition ("you can grant
    s3:ListBucket permission with the s3:prefix condition that will allow the user to get a
    list of key names with those specific prefixes", S3 user guide, amazon-s3-policy-keys.html);
    objects are granted under the prefix only. A bucket in another account also needs its
    owner's bucket policy: "you must grant cross-account access in both the IAM policy and the
    bucket policy" (S3 user guide, example-bucket-policies.html) - the stack can only do this
    half, and `launcher check` says when the other is missing.
    """
    statements = []
    for b in buckets:
        bucket_arn = f"arn:{Aws.PARTITION}:s3:::{b.bucket}"
        conditions = {"StringLike": {"s3:prefix": list(b.list_prefixes)}} if b.prefix else None
        statements.append(
            iam.PolicyStatement(
                actions=["s3:ListBucket"], resources=[bucket_arn], conditions=conditions
            )
        )
        actions = _READ_OBJECTS + (_WRITE_OBJECTS if b.writable else ())
        statements.append(
            iam.PolicyStatement(
                actions=list(actions), resources=[f"arn:{Aws.PARTITION}:s3:::{b.objects}"]
            )
        )
    return statements


def grant_buckets(role: iam.Role, buckets: tuple[DataBucket, ...]) -> None:
    for statement in bucket_statements(buckets):
        role.add_to_policy(statement)
    # Object ARNs end in /* (every key under the location): the grant is the location.
    Validations.of(role).acknowledge(
        *[
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{b.objects}]",
                reason=f"Objects under the data bucket location {b} (data_buckets).",
            )
            for b in buckets
        ]
    )


def attach_managed_policies(role: iam.Role, arns: tuple[str, ...]) -> None:
    """The team's own managed policies: the escape hatch for what else jobs need."""
    for index, arn in enumerate(arns):
        role.add_managed_policy(
            iam.ManagedPolicy.from_managed_policy_arn(role, f"JobRolePolicy{index}", arn)
        )
    Validations.of(role).acknowledge(
        *[
            Acknowledgment(
                id=f"AwsSolutions-IAM4[Policy::{arn}]",
                reason="Attached by the platform team's job_role_policies setting.",
            )
            for arn in arns
        ]
    )
    if len(arns) > DEFAULT_MANAGED_POLICIES_PER_ROLE:
        Annotations.of(role).add_warning_v2(
            "efa-batch:managed-policies",
            f"{len(arns)} managed policies on the job role: IAM's default quota is "
            f"{DEFAULT_MANAGED_POLICIES_PER_ROLE} per role (raise it in Service Quotas, up to "
            f"{MAX_MANAGED_POLICIES_PER_ROLE}) or the deploy fails",
        )


def secret_statements(grants: tuple[SecretGrant, ...], place: Place) -> list[iam.PolicyStatement]:
    """Read exactly the allowed secrets and parameters (the execution role: the ECS agent
    reads them before the container starts).

    "secretsmanager:GetSecretValue - Required if you're referencing a Secrets Manager secret",
    "ssm:GetParameters - Required if you're referencing a Systems Manager Parameter Store
    parameter", and "kms:Decrypt - Required only if your secret uses a custom KMS key" (Batch
    user guide, specifying-sensitive-data-secrets.html and -parameters.html). The key is not
    known here, so kms:Decrypt is allowed for any key but only through Secrets Manager or SSM
    in the secrets' Regions ("The kms:ViaService condition key limits use of an AWS KMS key to
    requests from specified AWS services", KMS developer guide, conditions-kms.html): the role
    still reads only the secrets granted above.
    """
    if not grants:
        return []
    statements = []
    by_store = {s: [g for g in grants if g.store is s] for s in Store}
    actions = {
        Store.SECRETS_MANAGER: "secretsmanager:GetSecretValue",
        Store.PARAMETER_STORE: "ssm:GetParameters",
    }
    for store, chosen in by_store.items():
        if chosen:
            statements.append(
                iam.PolicyStatement(
                    actions=[actions[store]],
                    resources=sorted({g.iam_resource(place) for g in chosen}),
                )
            )
    services = sorted(
        {f"{g.store.value}.{g.region(place)}.amazonaws.com" for g in grants},
    )
    statements.append(
        iam.PolicyStatement(
            actions=["kms:Decrypt"],
            resources=["*"],
            conditions={"StringEquals": {"kms:ViaService": services}},
        )
    )
    return statements


def grant_secrets(role: iam.Role, grants: tuple[SecretGrant, ...], place: Place) -> None:
    for statement in secret_statements(grants, place):
        role.add_to_policy(statement)
    if grants:
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="kms:Decrypt for the secrets' own keys (unknown to the stack), only "
                "through Secrets Manager or SSM (kms:ViaService); the role reads only the "
                "secrets in job_secrets.",
            ),
            *[
                Acknowledgment(
                    id=f"AwsSolutions-IAM5[Resource::{_nag_resource(g.iam_resource(place))}]",
                    reason=f"Secrets whose names start with {g.prefix!r} (job_secrets).",
                )
                for g in grants
                if g.prefix is not None
            ],
        )


def _nag_resource(arn: str) -> str:
    """How cdk-nag spells an ARN built from the stack's tokens."""
    return (
        arn.replace(Aws.PARTITION, "<AWS::Partition>")
        .replace(Aws.REGION, "<AWS::Region>")
        .replace(Aws.ACCOUNT_ID, "<AWS::AccountId>")
    )
