"""Copying base images inside AWS: a small Fargate queue, the copier image, its two roles, and
the ECR pull-through cache rules copy jobs may read through.

A copy job (``python3 -m launcher.copyjob.program SOURCE@DIGEST TARGET``, job definition by
the launcher) reads a base image from its registry and writes it into the workspace
repository, registry to registry, so 10-20 GB never travel through a laptop. It runs in the
cluster's subnet with ``assignPublicIp`` DISABLED: images, layers and logs go through the
VPC's endpoints (ECR api and dkr, the S3 gateway, CloudWatch Logs) or its NAT gateway.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_cdk import Acknowledgment, IgnoreMode, Stack, Validations
from aws_cdk import aws_batch as batch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct, IConstruct

from infra import pull_through, roles
from infra.config import ClusterConfig

ROOT = Path(__file__).resolve().parent.parent
COPIER_DOCKERFILE = "infra/copier/Dockerfile"
# What `pip install /src` needs (pyproject.toml, its readme, the packages its find includes)
# and the Dockerfile. infra/ is left out: the copy program never imports it, and an infra
# change would otherwise rebuild the image. Docker's .dockerignore semantics: exclude all,
# re-include these, then drop bytecode. The asset's hash and its copy in cdk.out cover only
# these files (never .venv, node_modules, cdk.out, .git or tests).
COPIER_CONTEXT = ("pyproject.toml", "README.md", "launcher", "torchx_plugins", COPIER_DOCKERFILE)
COPIER_EXCLUDE = ["*", *(f"!{path}" for path in COPIER_CONTEXT), "**/__pycache__", "**/*.pyc"]

PULL = ("ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer")
PUSH = ("ecr:InitiateLayerUpload", "ecr:UploadLayerPart", "ecr:CompleteLayerUpload", "ecr:PutImage")
# What pulling through a cache rule takes besides the pull itself (ECR user guide,
# pull-through-cache-iam.html): import the upstream image, create its repository.
PULL_THROUGH = ("ecr:BatchImportUpstreamImage", "ecr:CreateRepository")
# The role ECR assumes for an ECR upstream (ECR user guide, pull-through-cache-private.html).
ECR_UPSTREAM = (
    "ecr:BatchGetImage",
    "ecr:GetDownloadUrlForLayer",
    "ecr:BatchImportUpstreamImage",
    "ecr:GetImageCopyStatus",
    "ecr:InitiateLayerUpload",
    "ecr:UploadLayerPart",
    "ecr:CompleteLayerUpload",
    "ecr:PutImage",
)


def copy_queue_name(config: ClusterConfig) -> str:
    return f"{config.stack_name}-copy"


class CopyJobs(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ClusterConfig,
        subnet: ec2.ISubnet,
        security_group: ec2.ISecurityGroup,
        repository: ecr.IRepository,
        log_group: logs.ILogGroup,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.config = config
        self.rules = config.pull_through_rules
        self.image = ecr_assets.DockerImageAsset(
            self,
            "CopierImage",
            directory=str(ROOT),
            file=COPIER_DOCKERFILE,
            exclude=COPIER_EXCLUDE,
            ignore_mode=IgnoreMode.DOCKER,
            # Fargate tasks run linux/amd64 unless told otherwise (no runtimePlatform here).
            platform=ecr_assets.Platform.LINUX_AMD64,
        )
        self.execution_role = self._execution_role(stack, log_group)
        self.job_role = self._job_role(stack, repository)

        self.compute_environment = batch.CfnComputeEnvironment(
            self,
            "ComputeEnvironment",
            type="MANAGED",
            state="ENABLED",
            # No serviceRole: Batch uses its service-linked role. Fargate takes no instance
            # settings (types, roles, launch templates, minvCpus): only capacity and network.
            compute_resources=batch.CfnComputeEnvironment.ComputeResourcesProperty(
                type="FARGATE",
                maxv_cpus=config.copy_max_vcpus,
                subnets=[subnet.subnet_id],
                security_group_ids=[security_group.security_group_id],
            ),
        )
        self.queue_name = copy_queue_name(config)
        self.queue = batch.CfnJobQueue(
            self,
            "JobQueue",
            job_queue_name=self.queue_name,
            priority=1,
            state="ENABLED",
            compute_environment_order=[
                batch.CfnJobQueue.ComputeEnvironmentOrderProperty(
                    compute_environment=self.compute_environment.ref, order=1
                )
            ],
        )
        self._pull_through_cache(stack)

    # --- roles ---------------------------------------------------------------------------

    def _execution_role(self, stack: Stack, log_group: logs.ILogGroup) -> iam.Role:
        """What ECS does before the copy runs: pull the copier image, ship its log lines and
        read the registry secrets the job definition names (and nothing else)."""
        role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=roles.execution_role_principal(),
            description="Copy jobs: pull the copier image, write logs, read registry secrets",
        )
        self.image.repository.grant_pull(role)  # with ecr:GetAuthorizationToken on *
        Validations.of(role).acknowledge(roles.ANY_RESOURCE_IS_THE_AUTH_TOKEN)
        roles.grant_log_streams(role, log_group)
        secrets = sorted(set(self.config.registry_secrets.values()))
        if secrets:
            role.add_to_policy(
                iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=secrets)
            )
        return role

    def _job_role(self, stack: Stack, repository: ecr.IRepository) -> iam.Role:
        role = iam.Role(
            self,
            "JobRole",
            assumed_by=roles.task_role_principal(stack),
            description="Copy jobs: read ECR images of the region, push the workspace repository",
        )
        roles.grant_ecr_login(role)
        any_account = stack.format_arn(
            service="ecr", account="*", resource="repository", resource_name="*"
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="PullImagesOfTheRegion",
                actions=list(PULL),
                # Bases in any account's repositories of this region (the Deep Learning
                # Containers', other teams', pull-through caches); mounting a layer from a
                # repository also takes GetDownloadUrlForLayer on it.
                resources=[any_account],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="PushTheWorkspaceRepository",
                actions=[*PULL, *PUSH],
                resources=[repository.repository_arn],
            )
        )
        prefixes = self._prefix_arns(stack)
        if prefixes:
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="PullThroughTheCacheRules", actions=list(PULL_THROUGH), resources=prefixes
                )
            )
        Validations.of(role).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{_nag_arn(any_account, stack)}]",
                reason="Copy jobs read base images from any account's ECR repositories of the "
                "region (AWS Deep Learning Containers, shared team registries); read actions "
                "only, and the source repository's own policy still has to allow them.",
            ),
            *(
                Acknowledgment(
                    id=f"AwsSolutions-IAM5[Resource::{_nag_arn(arn, stack)}]",
                    reason="ECR creates a pull-through cache repository per upstream repository "
                    "under the rule's prefix; the grant covers that prefix only.",
                )
                for arn in prefixes
            ),
        )
        return role

    def _prefix_arns(self, stack: Stack) -> list[str]:
        return [
            stack.format_arn(service="ecr", resource="repository", resource_name=f"{r.prefix}/*")
            for r in self.rules
        ]

    # --- pull-through cache ---------------------------------------------------------------

    def _pull_through_cache(self, stack: Stack) -> None:
        """One rule per configured upstream and a repository creation template per prefix."""
        template_role = self._template_role(stack) if self._templates_need_role() else None
        for rule in self.rules:
            upstream = rule.upstream
            role = self._ecr_upstream_role(stack, rule) if upstream.custom_role else None
            cfn_rule = ecr.CfnPullThroughCacheRule(
                self,
                f"PullThroughCache-{rule.name}",
                ecr_repository_prefix=rule.prefix,
                upstream_registry=upstream.upstream_registry,
                upstream_registry_url=upstream.url_in(stack.region),
                credential_arn=rule.credential_arn,
                custom_role_arn=role.role_arn if role else None,
            )
            if role is not None:
                # ECR uses the role as soon as the rule exists: its policy first (the rule
                # already follows the role itself, through its ARN).
                cfn_rule.node.add_dependency(_policy_of(role))
            template = ecr.CfnRepositoryCreationTemplate(
                self,
                f"RepositoryTemplate-{rule.name}",
                prefix=rule.prefix,
                applied_for=["PULL_THROUGH_CACHE"],
                description=f"{self.config.stack_name}: repositories cached from "
                f"{upstream.url_in(stack.region)}",
                encryption_configuration=ecr.CfnRepositoryCreationTemplate.EncryptionConfigurationProperty(
                    encryption_type="KMS"
                    if self.config.repository_encryption == "kms"
                    else "AES256"
                ),
                # ECR updates cached images under their upstream tags: immutable tags would
                # stop it (ECR user guide, pull-through-cache.html).
                image_tag_mutability="MUTABLE",
                lifecycle_policy=json.dumps(_keep_newest(self.config.keep_images)),
                custom_role_arn=template_role.role_arn if template_role else None,
            )
            if template_role is not None:
                template.node.add_dependency(_policy_of(template_role))

    def _templates_need_role(self) -> bool:
        """ECR needs a role of ours to create repositories from a template that uses KMS or
        resource tags (ECR user guide, repository-creation-templates-create-iam.html)."""
        return bool(self.rules) and self.config.repository_encryption == "kms"

    def _template_role(self, stack: Stack) -> iam.Role:
        role = iam.Role(
            self,
            "RepositoryTemplateRole",
            assumed_by=iam.ServicePrincipal("ecr.amazonaws.com"),
            description="ECR creates KMS-encrypted pull-through cache repositories with it",
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["ecr:CreateRepository"], resources=self._prefix_arns(stack)
            )
        )
        keys = stack.format_arn(service="kms", resource="key", resource_name="*")
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["kms:CreateGrant", "kms:RetireGrant", "kms:DescribeKey"],
                # The AWS managed key aws/ecr has no ARN the template can know; only ECR may
                # use the grant actions through this role.
                resources=[keys],
                conditions={
                    "StringEquals": {"kms:ViaService": f"ecr.{stack.region}.amazonaws.com"}
                },
            )
        )
        Validations.of(role).acknowledge(
            *(
                Acknowledgment(
                    id=f"AwsSolutions-IAM5[Resource::{_nag_arn(arn, stack)}]",
                    reason="ECR creates a pull-through cache repository per upstream repository "
                    "under the rule's prefix; the grant covers that prefix only.",
                )
                for arn in self._prefix_arns(stack)
            ),
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{_nag_arn(keys, stack)}]",
                reason="The AWS managed key aws/ecr has an ARN the template cannot know; the "
                "grant actions are limited to calls made through ECR (kms:ViaService).",
            ),
        )
        return role

    def _ecr_upstream_role(self, stack: Stack, rule: pull_through.Rule) -> iam.Role:
        """The role ECR assumes to read an ECR upstream (a pull-through cache custom role)."""
        role = iam.Role(
            self,
            f"PullThroughCacheRole-{rule.name}",
            assumed_by=iam.ServicePrincipal("pullthroughcache.ecr.amazonaws.com"),
            description=f"ECR pull-through cache reads {rule.upstream.url_in(stack.region)}",
        )
        roles.grant_ecr_login(role)
        upstream = stack.format_arn(
            service="ecr",
            account=pull_through.DLC_ACCOUNT,
            resource="repository",
            resource_name="*",
        )
        own = stack.format_arn(
            service="ecr", resource="repository", resource_name=f"{rule.prefix}/*"
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=list(ECR_UPSTREAM), resources=[upstream, own])
        )
        Validations.of(role).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{_nag_arn(upstream, stack)}]",
                reason="The upstream registry's repositories: ECR reads whichever one is pulled "
                "through the rule.",
            ),
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{_nag_arn(own, stack)}]",
                reason="ECR writes the cached images under the rule's prefix only.",
            ),
        )
        return role


def _policy_of(role: iam.Role) -> IConstruct:
    policy = role.node.try_find_child("DefaultPolicy")
    assert policy is not None, f"{role.node.path} has no policy yet"
    return policy


def _keep_newest(count: int) -> dict[str, Any]:
    return {
        "rules": [
            {
                "rulePriority": 1,
                "description": f"Keep the newest {count} cached images",
                "selection": {
                    "tagStatus": "any",
                    "countType": "imageCountMoreThan",
                    "countNumber": count,
                },
                "action": {"type": "expire"},
            }
        ]
    }


def _nag_arn(arn: str, stack: Stack) -> str:
    """An ARN as cdk-nag spells it in a finding id (the partition token as <AWS::Partition>)."""
    resolved = stack.resolve(arn)
    if isinstance(resolved, str):
        return resolved
    parts = resolved["Fn::Join"][1]
    return "".join(p if isinstance(p, str) else f"<{p['Ref']}>" for p in parts)
