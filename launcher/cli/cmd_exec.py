"""``launcher exec``: a command, or a shell, in a running job's node, as ``docker exec`` does;
the API enters the node (docker CLI locally, ECS Exec on AWS)."""

from __future__ import annotations

import argparse

from launcher.cli.base import Command, Parser, job_from


class Exec(Command):
    name = "exec"
    help = "run a command, or a shell, in a running job's node"
    notes = (
        "Like docker exec: a terminal when stdin is one, plain pipes otherwise, and the "
        "command's exit status. Local jobs go through the docker CLI; AWS jobs through ECS "
        "Exec and the Session Manager plugin (the stack's ecs_exec setting on when the job "
        "was submitted; the exit status is then the plugin's). A job that is not running is "
        "refused in one line, exit 2."
    )
    examples = (
        'launcher exec "$JOB"',
        'launcher exec "$JOB" --node 1 -- nvidia-smi',
        'launcher exec "$JOB" -- sh -c "ls -l /workspace"',
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("job", help="job id (or QUEUE:JOB_ID, or ID:K for an array's child K)")
        self._options(parser)
        parser.add_argument(
            "command",
            nargs=argparse.REMAINDER,
            help="-- CMD [ARGS...]: what to run (default: bash where the image has it, else sh)",
        )

    @staticmethod
    def _options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--node", type=int, default=0, help="the node to enter (default 0, the main node)"
        )

    def run(self, args: argparse.Namespace) -> int:
        words: list[str] = args.command
        if words[:1] != ["--"] and words[:1] and words[0].startswith("-"):
            # Options after JOB (exec JOB --node 1 -- CMD), which REMAINDER keeps as words.
            cut = words.index("--") if "--" in words else len(words)
            options = Parser(prog=args.command_parser.prog, add_help=False)
            self._options(options)
            options.parse_args(words[:cut], namespace=args)
            words = words[cut:]
        command = words[1:] if words[:1] == ["--"] else words
        return job_from(args, args.job).enter(args.node, command)
