"""The copy job's program, the copier image's command: ``python3 -m launcher.copyjob.program
SOURCE@DIGEST TARGET_REPOSITORY`` copies one base image into the cluster's repository
(``launcher.image.transfer.copy_image``) and says what it did, one ``copy:`` line per blob,
which the launcher reports as progress. Exit 2 for a request that can never succeed (the retry
rules do not try it again), 1 for a registry or AWS failure.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from launcher.copyjob.plan import SOURCE_SECRET_ENV, SOURCE_USER_ENV
from launcher.errors import LauncherError, UsageError
from launcher.image import auth
from launcher.image.reference import parse
from launcher.image.registry import Registry
from launcher.image.transfer import copy_image
from launcher.progress import size_text

if TYPE_CHECKING:
    from launcher.aws.client import Aws


def _source_credentials(host: str, aws: Aws | None) -> auth.Credentials | None:
    user, token = os.environ.get(SOURCE_USER_ENV), os.environ.get(SOURCE_SECRET_ENV)
    if user and token:
        return user, token
    return auth.credentials(host, aws)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m launcher.copyjob.program",
        description="copy a base image (pinned by digest) into a repository, blobs first",
    )
    parser.add_argument("source", help="REGISTRY/REPO@sha256:... (one platform's manifest)")
    parser.add_argument("target", help="REGISTRY/REPO to copy into")
    args = parser.parse_args(argv)
    try:
        source, target = parse(args.source, "source"), parse(args.target, "target")
        aws = None
        if auth.is_ecr(source.registry) or auth.is_ecr(target.registry):
            from launcher.aws.client import Aws

            aws = Aws()
        pull = [f"repository:{source.repository}:pull"]
        push = [f"repository:{target.repository}:pull,push"]
        if source.registry == target.registry:
            pull = push = [*pull, *push]
        source_registry = Registry(
            source.registry, lambda: _source_credentials(source.registry, aws), pull
        )
        target_registry = (
            source_registry
            if source.registry == target.registry
            else Registry(target.registry, lambda: auth.credentials(target.registry, aws), push)
        )

        def report(desc: dict[str, Any], how: str) -> None:
            print(f"copy: {desc['digest']} {size_text(int(desc.get('size', 0)))} {how}", flush=True)

        copied = copy_image(source, target, source_registry, target_registry, report)
    except LauncherError as exc:
        print(f"copy: error: {exc}", file=sys.stderr, flush=True)
        return 2 if isinstance(exc, UsageError) else 1
    what = "already there" if copied.already else f"{size_text(copied.bytes_sent)} sent"
    print(f"copy: done {copied.reference} ({what})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
