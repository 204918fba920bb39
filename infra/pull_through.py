"""ECR pull-through cache rules: the upstream registries the stack knows and how to read the
``pull_through_cache`` setting.

ECR's own names and patterns come from botocore's model of ``CreatePullThroughCacheRule``
(the API reference), so a rule the stack declares is one the API accepts: the upstream
registry enum, the repository prefix pattern and the credential ARN pattern (a Secrets
Manager secret whose name starts with ``ecr-pullthroughcache/``).

The ECR repository prefix of every rule is its name here (``ecr-public``, ``quay``, ``dlc``,
``docker-hub``, ...): images pulled through it live in ``ACCOUNT.dkr.ecr.REGION.amazonaws.com/
PREFIX/...``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

# AWS Deep Learning Containers' private ECR registry. The account differs by region; this is
# the account of the regions below (aws/deep-learning-containers, docs/reference/
# region_availability.md). Elsewhere the DLC images live in another account.
DLC_ACCOUNT = "763104351884"
DLC_REGIONS = frozenset(
    {
        "us-east-1",
        "us-east-2",
        "us-west-1",
        "us-west-2",
        "ap-south-1",
        "ap-northeast-1",
        "ap-northeast-2",
        "ap-southeast-1",
        "ap-southeast-2",
        "ca-central-1",
        "eu-central-1",
        "eu-west-1",
        "eu-west-2",
        "eu-west-3",
        "eu-north-1",
        "sa-east-1",
    }
)


@dataclass(frozen=True)
class Upstream:
    """A registry ECR can cache, as CreatePullThroughCacheRule names it."""

    upstream_registry: str  # the API's UpstreamRegistry enum value
    url: str  # upstreamRegistryUrl; {region} is the cluster's region
    credential: bool = False  # needs a Secrets Manager secret (credentialArn)
    custom_role: bool = False  # an ECR upstream: ECR assumes a role of ours (customRoleArn)

    def url_in(self, region: str) -> str:
        return self.url.format(region=region)


# Name -> upstream. The upstream URLs are the syntax CreatePullThroughCacheRule documents for
# each upstream registry (upstreamRegistryUrl).
KNOWN: dict[str, Upstream] = {
    "ecr-public": Upstream("ecr-public", "public.ecr.aws"),
    "quay": Upstream("quay", "quay.io"),
    "k8s": Upstream("k8s", "registry.k8s.io"),
    "dlc": Upstream("ecr", DLC_ACCOUNT + ".dkr.ecr.{region}.amazonaws.com", custom_role=True),
    "docker-hub": Upstream("docker-hub", "registry-1.docker.io", credential=True),
    "github-container-registry": Upstream("github-container-registry", "ghcr.io", credential=True),
    "gitlab-container-registry": Upstream(
        "gitlab-container-registry", "registry.gitlab.com", credential=True
    ),
}


@dataclass(frozen=True)
class Rule:
    """One pull-through cache rule of the stack."""

    name: str  # also its ECR repository prefix
    upstream: Upstream
    credential_arn: str | None = None

    @property
    def prefix(self) -> str:
        return self.name


class RuleError(ValueError):
    """A pull_through_cache entry is wrong (config turns it into a ConfigError)."""


@cache
def _ecr_shape_pattern(shape: str) -> re.Pattern[str]:
    import botocore.session

    model = botocore.session.get_session().get_service_model("ecr")
    return re.compile(model.shape_for(shape).metadata["pattern"])


@cache
def upstream_registries() -> tuple[str, ...]:
    """The UpstreamRegistry enum of botocore's ECR model."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("ecr")
    return tuple(model.shape_for("UpstreamRegistry").enum)


def prefix_pattern() -> re.Pattern[str]:
    return _ecr_shape_pattern("PullThroughCacheRuleRepositoryPrefix")


def credential_pattern() -> re.Pattern[str]:
    return _ecr_shape_pattern("CredentialArn")


# The default rules: ecr-public only. dlc is no default, even where 763104351884 serves the
# region: a cross-account ECR to ECR rule works only if the upstream registry's owner grants
# our account ecr:BatchImportUpstreamImage and ecr:GetImageCopyStatus in its registry or
# repository policies (ECR user guide, pull-through-cache-private.html), and AWS documents no
# such grant for the Deep Learning Containers' registry. Copy jobs read DLC images directly
# instead (same region, through the ECR and S3 endpoints), and the same images are on ECR
# Public too, which the ecr-public rule serves.
DEFAULT_RULES = ("ecr-public",)


def parse(entries: tuple[str, ...], region: str) -> tuple[Rule, ...]:
    """``NAME`` or ``NAME=SECRET_ARN`` entries as rules, checked against the API's model."""
    rules: dict[str, Rule] = {}
    for entry in entries:
        name, _, arn = (part.strip() for part in entry.partition("="))
        upstream = KNOWN.get(name)
        if upstream is None:
            raise RuleError(
                f"unknown upstream {name!r}; allowed: {', '.join(KNOWN)} "
                "(NAME=SECRET_ARN for docker-hub, github-container-registry, "
                "gitlab-container-registry), or none"
            )
        if upstream.upstream_registry not in upstream_registries():
            raise RuleError(f"{name}: ECR knows no upstream registry {upstream.upstream_registry}")
        if not prefix_pattern().match(name):
            raise RuleError(f"{name}: not an ECR repository prefix")
        if name in rules:
            raise RuleError(f"{name} is given twice")
        if upstream.credential:
            if not arn:
                raise RuleError(
                    f"{name} needs credentials: {name}=SECRET_ARN, a Secrets Manager secret whose "
                    "name starts with ecr-pullthroughcache/"
                )
            if not credential_pattern().match(arn):
                raise RuleError(
                    f"{name}: {arn!r} is not a Secrets Manager secret ARN whose name starts with "
                    "ecr-pullthroughcache/ (CreatePullThroughCacheRule credentialArn)"
                )
        elif arn:
            raise RuleError(f"{name} takes no credentials (give {name} alone)")
        if upstream.custom_role and region not in DLC_REGIONS:
            raise RuleError(
                f"{name}: account {DLC_ACCOUNT} serves Deep Learning Containers in "
                f"{', '.join(sorted(DLC_REGIONS))}, not {region}"
            )
        rules[name] = Rule(name, upstream, arn or None)
    return tuple(rules[name] for name in sorted(rules))
