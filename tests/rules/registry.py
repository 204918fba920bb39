"""A rule is a check plus the AWS text that governs it; the registry keeps them in one list.

Evidence comes in two kinds. ``Model`` quotes the documentation that ships inside botocore's
service model for a shape member: the same text as the AWS API reference page, and checkable
offline, so a test proves every such quote is really there. ``Page`` quotes a user-guide page
(URL and words), for what the API reference does not say.

``covers`` names the template properties or job-definition fields whose runtime behaviour a
rule pins down; ``tests/infra/test_aws_rules.py`` fails when the project sets one that no rule
covers.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

API = "https://docs.aws.amazon.com/{guide}/latest/APIReference/API_{shape}.html"
_GUIDES = {
    "batch": "batch",
    "ec2": "AWSEC2",
    "ecr": "AmazonECR",
    "ecs": "AmazonECS",
    "efs": "efs",
    "fsx": "fsx",
    "logs": "AmazonCloudWatchLogs",
}
# Services whose API reference lives elsewhere than API.
_API_PAGES = {
    "s3": "https://docs.aws.amazon.com/AmazonS3/latest/API/API_{shape}.html",
    "lambda": "https://docs.aws.amazon.com/lambda/latest/api/API_{shape}.html",
    "events": "https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_{shape}.html",
}


@dataclass(frozen=True)
class Model:
    """A quote from the API reference, as shipped in botocore's model of ``service``."""

    service: str
    shape: str
    member: str
    quote: str

    @property
    def url(self) -> str:
        """The API reference page: the operation's page for an operation's input shape."""
        page = _page_of(self.service, self.shape)
        if self.service in _API_PAGES:
            return _API_PAGES[self.service].format(shape=page)
        return API.format(guide=_GUIDES[self.service], shape=page)

    def found(self) -> bool:
        return normalize(self.quote) in normalize(model_text(self.service, self.shape, self.member))


@dataclass(frozen=True)
class Page:
    """A quote from a user-guide page."""

    url: str
    quote: str


@dataclass(frozen=True)
class CloudFormation:
    """A quote from the CloudFormation template reference, as aws-cdk-lib carries it in the
    docstrings of its L1 classes (``aws_batch.CfnComputeEnvironmentProps`` ...)."""

    module: str  # aws_batch
    resource: str  # ComputeEnvironment
    prop: str  # replace_compute_environment
    quote: str
    property_type: str = ""  # ComputeResources: a property type's page, not the resource's

    @property
    def url(self) -> str:
        service = self.module.removeprefix("aws_")
        if self.property_type:
            return (
                "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
                f"aws-properties-{service}-{self.resource.lower()}-"
                f"{self.property_type.lower()}.html"
            )
        return (
            "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
            f"aws-resource-{service}-{self.resource.lower()}.html"
        )

    def found(self) -> bool:
        import importlib

        module = importlib.import_module(f"aws_cdk.{self.module}")
        if self.property_type:
            props = getattr(getattr(module, f"Cfn{self.resource}"), f"{self.property_type}Property")
        else:
            props = getattr(module, f"Cfn{self.resource}Props")
        text = (props.__init__.__doc__ or "").replace("``", "")
        return normalize(self.quote) in normalize(text)


@dataclass(frozen=True)
class Schema:
    """A property AWS fixes at creation: listed in ``createOnlyProperties`` of the resource
    type's provider schema (as cfn-lint bundles it), so changing it replaces the resource. The
    CloudFormation reference page says the same as "Update requires: Replacement"."""

    type: str  # AWS::Batch::ComputeEnvironment
    pointer: str  # /properties/Tags

    @property
    def url(self) -> str:
        _, service, resource = self.type.split("::")
        return (
            "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
            f"aws-resource-{service.lower()}-{resource.lower()}.html"
        )

    def found(self) -> bool:
        from infra.update_plan import create_only

        return tuple(self.pointer.removeprefix("/properties/").split("/")) in create_only(self.type)


Evidence = Model | Page | CloudFormation | Schema


@cache
def _page_of(service: str, shape: str) -> str:
    model = _model(service)
    for name in model.operation_names:
        input_shape = model.operation_model(name).input_shape
        if input_shape is not None and input_shape.name == shape:
            return name
    return shape


@cache
def _model(service: str):
    import botocore.session

    return botocore.session.get_session().get_service_model(service)


@cache
def model_text(service: str, shape: str, member: str) -> str:
    """A member's documentation; for ``member=""`` the operation's own (an input shape) or
    the shape's own (any other shape)."""
    if not member:
        page = _page_of(service, shape)
        if page == shape:
            return _model(service).shape_for(shape).documentation
        return _model(service).operation_model(page).documentation
    return _model(service).shape_for(shape).members[member].documentation


def normalize(text: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", text))).strip().lower()


@dataclass(frozen=True)
class Rule:
    name: str
    check: Callable[[Any], list[str]]
    evidence: tuple[Evidence, ...]
    covers: tuple[str, ...]
    kind: str  # "stack" (a Deployment) | "job" (a RegisterJobDefinition request + cluster)

    @property
    def doc(self) -> str:
        return self.check.__doc__ or ""


RULES: list[Rule] = []
# Rules whose docstring does not name the page of a piece of their evidence (a test fails).
UNCITED: list[str] = []


def rule(*evidence: Evidence, covers: tuple[str, ...] = (), kind: str = "stack"):
    """Register a check; its docstring must name the page of every piece of evidence."""

    def register(check: Callable[[Any], list[str]]) -> Callable[[Any], list[str]]:
        joined = re.sub(r"\s+", "", check.__doc__ or "")  # URLs may wrap across lines
        UNCITED.extend(f"{check.__name__}: {e.url}" for e in evidence if e.url not in joined)
        if not evidence:
            UNCITED.append(f"{check.__name__}: no evidence")
        RULES.append(Rule(check.__name__, check, evidence, covers, kind))
        return check

    return register
