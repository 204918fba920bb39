"""What every command module shares: the ``Command`` each one is, the parser class, the options
several commands take (``-o/--output``, ``--pool``, the image and ``--local-network`` flags),
finding the stack's cluster or a job from the top-level options, and printing for people
(``key  value`` fields) and for scripts (JSON).

Light on purpose: ``launcher --help`` imports it with every command module, so the API, the
console and the tables are imported inside the functions that use them.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from collections.abc import Sequence

    from launcher.api import Cluster, Job
    from launcher.cli.console import Console


def print_err(message: str) -> None:
    """One line on stderr, where progress and errors go: stdout is for data."""
    print(message, file=sys.stderr, flush=True)


class Parser(argparse.ArgumentParser):
    """No prefix matching (``--node`` is not ``--nodes``), examples kept as written, and bad
    input told in one line with exit 2, pointing to ``--help`` instead of printing the usage.

    A misspelt command, choice or option gets the job file's suggestion
    (``launcher.errors.did_you_mean``): ``unknown command 'statsu'; did you mean status?``. It
    is only said: the command still refuses, so a guess never runs anything."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"launcher: error: {message} (see {self.prog} --help)\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """argparse's check of a choice, with the suggestion instead of every choice (Python
        3.14's ``suggest_on_error`` does the like, for choices only)."""
        if action.choices is None or value in action.choices:
            return
        from launcher.errors import did_you_mean

        hint = did_you_mean(str(value), [str(choice) for choice in action.choices])
        if isinstance(action, argparse._SubParsersAction):
            raise argparse.ArgumentError(None, f"unknown command {value!r}; {hint}")
        raise argparse.ArgumentError(action, f"invalid choice: {value!r}; {hint}")

    def refuse_unrecognized(self, unknown: list[str], top: argparse.ArgumentParser) -> NoReturn:
        """``unknown``, what this command's parser did not take, refused in one line with the
        option of this command each one looks like, or, for an option of ``top`` (``--stack``,
        ``--debug``...), where it goes."""
        from launcher.errors import closest

        words = [word.split("=", 1)[0] for word in unknown if word.startswith("-")]
        ours = {option.lstrip("-"): option for option in _options(self)}
        command = self.prog.split(" ", 1)[-1]
        hints: list[str] = []
        for word in words:
            # Matched without the dashes, which every option shares and which would make
            # --gpu look like --output.
            close = closest(word.lstrip("-"), list(ours))
            if word in _options(top):
                hints.append(f"{word} is an option of launcher itself: put it before '{command}'")
            elif close:
                said = f"{word}: " if len(words) > 1 else ""
                hints.append(f"{said}did you mean {ours[close]}?")
        self.error("; ".join([f"unrecognized arguments: {' '.join(unknown)}", *hints]))


    def refuse_unknown_options_before(self, argv: Sequence[str]) -> None:
        """An option of this parser's misspelt before the command (``launcher --stak Dev run``):
        refused here, as argparse would take its value, ``Dev``, for an unknown command."""
        with_value = {
            option
            for action in self._actions
            if action.nargs != 0
            for option in action.option_strings
        }
        known = {option for action in self._actions for option in action.option_strings}
        words = list(argv)
        at = 0
        while at < len(words) and words[at].startswith("-") and words[at] != "--":
            name = words[at].split("=", 1)[0]
            if name not in known:
                self.refuse_unrecognized([name], self)
            at += 2 if name in with_value and "=" not in words[at] else 1


def _options(parser: argparse.ArgumentParser) -> list[str]:
    """The option strings ``parser --help`` shows (a hidden alias is never suggested)."""
    return [
        option
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for option in action.option_strings
    ]


class Command:
    """One subcommand: ``add_arguments`` declares its flags, ``run`` does the work.

    ``examples`` end its ``--help`` (commands as a user types them, ``#`` lines say what the
    next one does); ``notes`` come before them."""

    name = ""
    help = ""
    notes = ""
    examples: tuple[str, ...] = ()

    def epilog(self) -> str:
        lines = [textwrap.fill(self.notes, 88), ""] if self.notes else []
        lines.append("examples:")
        lines.extend(f"  {example}" for example in self.examples)
        return "\n".join(lines)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:  # pragma: no cover
        pass

    def run(self, args: argparse.Namespace) -> int:  # pragma: no cover
        raise NotImplementedError


OUTPUTS = ("table", "json")


def output_argument(parser: argparse.ArgumentParser, json_help: str) -> None:
    """``-o/--output table|json``; ``--json`` stays as a hidden alias for older scripts."""
    parser.add_argument(
        "-o",
        "--output",
        choices=OUTPUTS,
        default="table",
        help=f"table: for people (default); json: {json_help}",
    )
    parser.add_argument(
        "--json", dest="output", action="store_const", const="json", help=argparse.SUPPRESS
    )


def pool_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--pool``: ``what`` says what the pool is for in this command."""
    parser.add_argument(
        "--pool", help=f"{what} (default: the stack's default pool; launcher outputs lists them)"
    )


def team_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--team``, on a stack deployed with teams (``launcher.job.teams``)."""
    parser.add_argument(
        "--team",
        help=f"{what} on a stack with teams (default: $LAUNCHER_TEAM, else the stack's only "
        "team; launcher outputs lists them)",
    )


def image_arguments(parser: argparse.ArgumentParser) -> None:
    """How the workspace image is made: the flags of ``build`` and ``run``."""
    parser.add_argument(
        "--builder",
        default="auto",
        choices=["auto", "registry", "docker"],  # launcher.image.build.Builder (kept light)
        help="registry: patch in the registry; docker: Docker SDK build "
        "(auto: docker when the workspace has Dockerfile.launcher)",
    )
    parser.add_argument("--platform", help="image platform (default: the cluster's, linux/amd64)")
    parser.add_argument(
        "--compression",
        choices=["gzip", "zstd"],  # launcher.image.compress.Compression (kept light)
        help="the workspace layer's compression (default: zstd where whoever pulls reads it: "
        "the cluster's nodes, a local Docker 23+; else gzip)",
    )
    parser.add_argument(
        "--stream-base",
        action="store_true",
        help="send base layers missing from the registry through this machine instead of "
        "copying them with a copy job next to the registries",
    )


def local_network_argument(parser: argparse.ArgumentParser) -> None:
    """``--local-network``, for commands that take ``--local``."""
    parser.add_argument(
        "--local-network",
        choices=("none", "bridge", "host"),
        help="what a --local job's nodes reach: none, their own network with loopback only "
        "(default, or $LAUNCHER_LOCAL_NETWORK); bridge, that and outbound traffic through the "
        "engine's bridge; host, this machine's own network and every service on it",
    )


def console() -> Console:
    """The progress drawer (``launcher.cli.console``), imported when a command runs."""
    from launcher.cli.console import Console

    return Console()


def walk_ahead(workspace: str) -> None:
    """The workspace's walk in a child process while this one imports and reads the stack
    (``launcher.image.scan_ahead``): first thing, before any thread is started."""
    from launcher.image import scan_ahead

    scan_ahead.start(workspace)


def cluster_from(args: argparse.Namespace, local: bool = False) -> Cluster:
    """The stack's cluster; with ``local`` (the command's --local), its local Docker engine."""
    from launcher.api import Cluster

    cluster = Cluster.from_stack(
        args.stack, profile=args.profile, region=args.region, team=getattr(args, "team", None)
    )
    if not local:
        return cluster
    return cluster.local(
        getattr(args, "local_efs", None),
        getattr(args, "local_fsx", None),
        getattr(args, "local_network", None),
        allow_host_mounts=getattr(args, "allow_host_mounts", False),
        allow_privileged=bool(getattr(args, "privileged", False)),  # the flag, not a job file
    )


def job_from(args: argparse.Namespace, job_id: str) -> Job:
    """The job ``job_id`` (AWS or local), reached with the top-level --profile and --region."""
    from launcher.api import Job

    return Job.attach(job_id, profile=args.profile, region=args.region)


def print_json(data: object) -> None:
    print(json.dumps(data, indent=2))


def print_job_id(args: argparse.Namespace, job_id: str) -> None:
    """A new job's id alone on stdout (``JOB=$(launcher run ...)``), or as JSON."""
    if args.output == "json":
        print_json({"job_id": job_id})
    else:
        print(job_id)


def print_image(args: argparse.Namespace, reference: str, **extra: object) -> None:
    """An image's reference alone on stdout, or as JSON with ``extra``."""
    if args.output == "json":
        print_json({"image": reference, **extra})
    else:
        print(reference)


def print_fields(fields: dict[str, object]) -> None:
    """``key  value`` lines; values come from AWS and jobs (a status reason, the main node's
    words), so they are escaped on a terminal (``launcher.cli.escapes``)."""
    from launcher.cli.escapes import for_terminal, visible

    escaped = for_terminal(sys.stdout)
    width = max(map(len, fields))
    for key, value in fields.items():
        shown = _shown(value)
        print(f"{key:<{width}}  {visible(shown) if escaped else shown}")


def _shown(value: object) -> str:
    """A value as a person reads it: lists comma-separated, mappings as key=value, none as -."""
    if value is None or value == [] or value == {}:
        return "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value))
    return str(value)
