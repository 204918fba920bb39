# PYTHON_ARGCOMPLETE_OK (argcomplete's global completion looks for this line)
"""``launcher``: the command line. Thin: parse, call the library, print, map errors to exits.

This module assembles the parser from the commands, one ``cmd_<verb>.py`` module each
(``launcher run`` is ``cmd_run.Run``), in ``COMMANDS``' order, which is the order of
``launcher --help``; ``base.py`` holds what they share. ``run`` is the console script.

Imports of boto3, rich, argcomplete and friends happen inside the commands so that
``launcher --help`` is fast.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from launcher.cli.base import Command, Parser, print_err
from launcher.cli.cmd_build import Build
from launcher.cli.cmd_cancel import Cancel
from launcher.cli.cmd_check import Check
from launcher.cli.cmd_completion import Completion
from launcher.cli.cmd_describe import Describe
from launcher.cli.cmd_exec import Exec
from launcher.cli.cmd_list import List
from launcher.cli.cmd_logs import Logs
from launcher.cli.cmd_mirror import Mirror
from launcher.cli.cmd_outputs import Outputs
from launcher.cli.cmd_resubmit import Resubmit
from launcher.cli.cmd_run import Run
from launcher.cli.cmd_status import Status
from launcher.cli.cmd_wait import Wait
from launcher.errors import LauncherError
from launcher.stack.outputs import DEFAULT_STACK_NAME, STACK_ENV


class _Version(argparse.Action):
    """``--version``: the installed package's version, read only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version(DISTRIBUTION)
        except PackageNotFoundError:  # run from a checkout that was never installed
            number = "unknown"
        parser._print_message(f"launcher {number}\n", sys.stdout)
        parser.exit()


DISTRIBUTION = "efa-batch-launcher"  # pyproject.toml's [project] name


COMMANDS: tuple[Command, ...] = (
    Outputs(),
    Build(),
    Mirror(),
    Run(),
    Status(),
    Describe(),
    Logs(),
    Exec(),
    Cancel(),
    Resubmit(),
    List(),
    Check(),
    Wait(),
    Completion(),
)

TOP_EXAMPLES = (
    "launcher outputs",
    "launcher run --nodes 2 --torchrun --follow -- train.py --epochs 3",
    'launcher status "$JOB"',
    "launcher list --all",
    "launcher COMMAND --help",
)


def parser() -> Parser:
    top = Parser(
        prog="launcher",
        description="Run multi-node EFA jobs on the AWS Batch cluster of an efa-batch stack.",
        epilog="examples:\n" + "\n".join(f"  {e}" for e in TOP_EXAMPLES),
    )
    top.add_argument("--version", action=_Version, help="print the launcher's version and exit")
    top.add_argument(
        "--stack",
        default=os.environ.get(STACK_ENV, DEFAULT_STACK_NAME),
        help="cluster stack (default: $LAUNCHER_STACK or %(default)s)",
    )
    top.add_argument("--profile", help="AWS profile (default: $AWS_PROFILE, else the default)")
    top.add_argument("--region", help="AWS Region (default: $AWS_REGION, else the profile's)")
    top.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = top.add_subparsers(dest="command_name", metavar="COMMAND")
    for command in COMMANDS:
        p = sub.add_parser(
            command.name, help=command.help, description=command.help, epilog=command.epilog()
        )
        command.add_arguments(p)
        p.set_defaults(handler=command, command_parser=p)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    top = parser()
    if "_ARGCOMPLETE" in os.environ:  # a shell asking for completions (launcher completion)
        import argcomplete

        argcomplete.autocomplete(top)
    args_given = sys.argv[1:] if argv is None else argv
    top.refuse_unknown_options_before(args_given)
    args, unknown = top.parse_known_args(argv)
    if getattr(args, "handler", None) is None:  # bare `launcher`: what it can do
        top.print_help()
        return 0
    if unknown:  # told against the subcommand, whose --help lists what it takes
        args.command_parser.refuse_unrecognized(unknown, top)
    handler: Command = args.handler
    try:
        return handler.run(args)
    except LauncherError as exc:
        if args.debug:
            raise
        print_err(f"launcher: error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader left (``launcher logs JOB | head``), as SIGPIPE would
        return 141


def run() -> NoReturn:
    """The ``launcher`` command: ``main``, then an exit that does not free every object one
    by one, as mypy's ``util.hard_exit`` does (0.1-0.15 s after a 50,000-file build, whose
    entries, digests and states the interpreter's teardown would otherwise free). Nothing
    needs that teardown: no atexit hooks, only daemon threads, every file closed by then;
    ``main`` stays an ordinary function for callers in a process of their own."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):  # a reader gone (``launcher list | head``)
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
