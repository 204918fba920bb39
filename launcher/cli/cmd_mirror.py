"""``launcher mirror``: a base image copied into the cluster's registry by a copy job, so its
layers never pass through this machine."""

from __future__ import annotations

import argparse

from launcher.cli.base import Command, cluster_from, console, output_argument, print_image

_NCCL_TESTS = (
    "public.ecr.aws/hpc-cloud/nccl-tests:cuda12.8.1-efa1.42.0-ofiv1.16.0-ncclv2.27.5-1-testsv2.16.4"
)


class Mirror(Command):
    name = "mirror"
    help = "copy a base image into the cluster's registry with a copy job (never through here)"
    notes = "Prints the copy's reference, REPO@sha256:..., on stdout; progress goes to stderr."
    examples = (
        "# what would move, moving none",
        f"launcher mirror --dryrun {_NCCL_TESTS}",
        f"launcher mirror {_NCCL_TESTS}",
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("image", help="the base image, e.g. a Deep Learning Container")
        parser.add_argument("--platform", help="image platform (default: the cluster's)")
        parser.add_argument("--local", action="store_true", help="copy with the local engine")
        parser.add_argument("--dryrun", action="store_true", help="say what would move; move none")
        output_argument(parser, '{"image": REFERENCE}')

    def run(self, args: argparse.Namespace) -> int:
        reference = cluster_from(args, args.local).mirror(
            args.image, platform=args.platform, dryrun=args.dryrun, progress=console()
        )
        print_image(args, reference)
        return 0
