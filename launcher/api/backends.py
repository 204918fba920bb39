"""How the API reaches a backend before it has a cluster: the stack named by default, an AWS
session, and every backend a job id may belong to (``backends``: a new backend goes there, so
that ``attach`` and ``Job.attach`` find its ids).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from launcher.backend import Backend
from launcher.stack.outputs import DEFAULT_STACK_NAME, STACK_ENV

if TYPE_CHECKING:
    from launcher.aws.client import Aws


def default_stack() -> str:
    return os.environ.get(STACK_ENV, DEFAULT_STACK_NAME)


def aws_session(profile: str | None = None, region: str | None = None) -> Aws:
    from launcher.aws.client import Aws

    return Aws(profile=profile, region=region)


def backends(
    profile: str | None = None, region: str | None = None, aws: Aws | None = None
) -> Iterator[Backend]:
    """Every backend a job id may belong to, made as they are asked for, the ones that need
    nothing first (a local job needs no AWS region or credentials)."""
    from launcher.aws.batch import BatchBackend
    from launcher.local import LocalBackend

    yield LocalBackend()
    yield BatchBackend(aws or aws_session(profile, region))
