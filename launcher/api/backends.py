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
    from launcher.local import Store


def default_stack() -> str:
    return os.environ.get(STACK_ENV, DEFAULT_STACK_NAME)


def aws_session(profile: str | None = None, region: str | None = None) -> Aws:
    """An AWS session whose "nothing answers" line says where the demo's endpoint is
    (``launcher.api.elsewhere``)."""
    from launcher.api.elsewhere import unreachable_hint
    from launcher.aws.client import Aws

    return Aws(profile=profile, region=region, unreachable_hint=unreachable_hint)


def local_store() -> Store:
    """The local jobs' records, whose "no such local job" line says where else they may be
    (``launcher.api.elsewhere``)."""
    from launcher.api.elsewhere import local_state_hint
    from launcher.local import Store

    return Store(unknown_hint=local_state_hint)


def backends(
    profile: str | None = None, region: str | None = None, aws: Aws | None = None
) -> Iterator[Backend]:
    """Every backend a job id may belong to, made as they are asked for, the ones that need
    nothing first (a local job needs no AWS region or credentials)."""
    from launcher.aws.batch import BatchBackend
    from launcher.local import LocalBackend

    yield LocalBackend(store=local_store())
    yield BatchBackend(aws or aws_session(profile, region))
