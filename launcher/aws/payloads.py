"""A Python function's call in the stack's function bucket (``OutputKey.FUNCTION_BUCKET``):
``s3://BUCKET/PREFIX/CALL/``, PREFIX the team's (launcher.stack.functions). The stack keeps
the prefix to the team's job role and users (infra/function_payloads.py) and expires its
objects after a set number of days, so a call that is never read back is not kept."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from launcher.aws.client import Aws


class S3Payloads:
    def __init__(self, aws: Aws, bucket: str, prefix: str, region: str) -> None:
        self._aws, self._bucket, self._prefix = aws, bucket, prefix
        self.location = f"s3://{bucket}/{prefix}"
        self.region: str | None = region

    def put(self, name: str, data: bytes) -> None:
        self._aws.put_object(self._bucket, self._prefix + name, data)

    def get(self, name: str) -> bytes | None:
        return self._aws.get_object(self._bucket, self._prefix + name)

    def remove(self, names: Sequence[str]) -> None:
        self._aws.delete_objects(self._bucket, [self._prefix + n for n in names])
