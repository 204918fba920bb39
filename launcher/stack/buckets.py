"""Data buckets: the S3 locations a stack lets its jobs read (or write), as one value.

A bucket is configured as ``BUCKET[/PREFIX][:ro|:rw]`` (read-only unless ``:rw``); the stack
grants its job role exactly that (``infra/data_access.py``), the outputs carry the same text
(``DataBuckets``), and ``launcher check`` lists the prefix from every node. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# S3 general purpose bucket naming rules (S3 user guide, bucketnamingrules.html): 3-63
# characters of lower-case letters, digits, dots and hyphens, beginning and ending with a
# letter or digit; no two adjacent dots; not an IP address; not the reserved prefixes
# xn--, sthree-, amzn-s3-demo- nor the suffixes -s3alias, --ol-s3, .mrap, --x-s3.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IP_ADDRESS = re.compile(r"^\d+\.\d+\.\d+\.\d+$")
_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3")
# Object keys are up to 1024 bytes; a prefix of printable characters without wildcards keeps
# the IAM patterns built from it exact (* and ? are IAM wildcards).
_PREFIX = re.compile(r"^[\x21-\x7e]{1,1000}$")
ACCESS_MODES = ("ro", "rw")
FORMAT = "BUCKET[/PREFIX][:ro|:rw]"


class BucketError(ValueError):
    """A malformed bucket entry; the message says what is allowed."""


@dataclass(frozen=True)
class DataBucket:
    bucket: str
    prefix: str = ""  # without leading or trailing "/"; "" is the whole bucket
    writable: bool = False

    @classmethod
    def parse(cls, text: str) -> DataBucket:
        spec, mode = text.strip().removeprefix("s3://"), ""
        if spec.endswith(tuple(f":{m}" for m in ACCESS_MODES)):
            spec, mode = spec[:-3], spec[-2:]
        bucket, _, prefix = spec.partition("/")
        _check_bucket(text, bucket)
        prefix = prefix.strip("/")
        if prefix and (not _PREFIX.match(prefix) or "*" in prefix or "?" in prefix):
            raise BucketError(
                f"{text!r}: prefix {prefix!r}; allowed: printable characters without * or ? "
                f"({FORMAT})"
            )
        return cls(bucket, prefix, mode == "rw")

    def __str__(self) -> str:
        path = f"{self.bucket}/{self.prefix}" if self.prefix else self.bucket
        return f"{path}:{'rw' if self.writable else 'ro'}"

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix + '/' if self.prefix else ''}"

    @property
    def objects(self) -> str:
        """The object part of the ARN this grant covers (``BUCKET/PREFIX/*``)."""
        return f"{self.bucket}/{self.prefix}/*" if self.prefix else f"{self.bucket}/*"

    @property
    def list_prefixes(self) -> tuple[str, ...]:
        """The ``s3:prefix`` values a listing may ask for: the prefix as a folder and what is
        under it. Never the bare prefix: ListObjectsV2 matches plain string prefixes, so
        ``data`` would also list ``data-private/`` (the S3 user guide's per-user folders grant
        ``home/${aws:username}/*``, with the slash: example-policies-s3.html)."""
        return (f"{self.prefix}/", f"{self.prefix}/*") if self.prefix else ()

    def covers(self, other: DataBucket) -> bool:
        """Whether this grant includes everything ``other`` asks for."""
        if self.bucket != other.bucket or (other.writable and not self.writable):
            return False
        return (
            not self.prefix
            or other.prefix == self.prefix
            or (other.prefix.startswith(self.prefix + "/"))
        )


def _check_bucket(text: str, bucket: str) -> None:
    if (
        not _BUCKET.match(bucket)
        or ".." in bucket
        or _IP_ADDRESS.match(bucket)
        or bucket.startswith(_RESERVED_PREFIXES)
        or bucket.endswith(_RESERVED_SUFFIXES)
    ):
        raise BucketError(
            f"{text!r}: bucket {bucket!r} breaks S3's naming rules (3-63 lower-case letters, "
            f"digits, dots, hyphens; {FORMAT})"
        )


def parse_all(entries: tuple[str, ...] | list[str]) -> tuple[DataBucket, ...]:
    """Every entry parsed; a bucket named twice is refused (one grant per location)."""
    buckets = tuple(DataBucket.parse(e) for e in entries)
    seen: set[tuple[str, str]] = set()
    for b in buckets:
        if (b.bucket, b.prefix) in seen:
            raise BucketError(f"{b.bucket}/{b.prefix}: given twice; give each location once")
        seen.add((b.bucket, b.prefix))
    return buckets
