"""``launcher build``: the workspace patched into a base image and pushed, to the stack's
registry or any other (``--repo``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from launcher.cli.base import (
    Command,
    cluster_from,
    console,
    image_arguments,
    output_argument,
    print_err,
    print_image,
    walk_ahead,
)
from launcher.job.jobspec import base_image

if TYPE_CHECKING:
    from launcher.api import ImageOptions


class Build(Command):
    name = "build"
    help = "patch the workspace into the base image, push it, print REPO@sha256:..."
    examples = (
        "launcher build --workspace demo/workspace",
        "# the digest it would have, and the files it would ship; push nothing",
        "launcher build --dryrun --workspace demo/workspace",
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--image", help="base image (default: $LAUNCHER_IMAGE)")
        parser.add_argument("--workspace", default=".", help="directory to patch in")
        parser.add_argument("--repo", help="target repository (default: the stack's ECR)")
        image_arguments(parser)
        parser.add_argument(
            "--dryrun",
            action="store_true",
            help="compute the image's digest without pushing; list the files it would ship "
            "and those left out as secrets (on stderr)",
        )
        output_argument(parser, '{"image": REFERENCE, "reused": true|false}')

    def run(self, args: argparse.Namespace) -> int:
        walk_ahead(args.workspace)
        base = base_image(args.image)
        options: ImageOptions = {
            "builder": args.builder,
            "dryrun": args.dryrun,
            "progress": console(),
            "stream_base": args.stream_base,
            "compression": args.compression,
        }
        if args.repo is None:  # the stack's repository, and the platform of its instances
            built = cluster_from(args).build(
                base, args.workspace, platform=args.platform, **options
            )
        else:
            from launcher.api import build_image

            built = build_image(
                base,
                args.workspace,
                args.repo,
                platform=args.platform or "linux/amd64",
                profile=args.profile,
                region=args.region,
                **options,
            )
        if built.reused:
            print_err("workspace unchanged: image already in the registry")
        print_image(args, built.reference, reused=built.reused)
        return 0
