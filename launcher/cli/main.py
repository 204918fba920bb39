# PYTHON_ARGCOMPLETE_OK (argcomplete's global completion looks for this line)
"""``launcher``: the command line. Thin: parse, call the library, print, map errors to exits.

Imports of boto3, rich, argcomplete and friends happen inside the commands so that
``launcher --help`` is fast.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import textwrap
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from launcher.errors import LauncherError, UsageError
from launcher.job.jobspec import DEFAULT_ATTEMPTS, DEFAULT_RENDEZVOUS_PORT, EfaMode, base_image
from launcher.stack.outputs import DEFAULT_STACK_NAME, STACK_ENV

if TYPE_CHECKING:
    from launcher.api import BuildOptions, Cluster, ImageOptions, Job
    from launcher.cli.console import Console
    from launcher.job.info import JobInfo, NodeStatus
    from launcher.stack.cluster import ClusterInfo


def _err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class _Parser(argparse.ArgumentParser):
    """No prefix matching (``--node`` is not ``--nodes``), examples kept as written, and bad
    input told in one line with exit 2, pointing to ``--help`` instead of printing the usage."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"launcher: error: {message} (see {self.prog} --help)\n")


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
OUTPUTS = ("table", "json")


def _output_argument(parser: argparse.ArgumentParser, json_help: str) -> None:
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


def _print_json(data: object) -> None:
    print(json.dumps(data, indent=2))


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


def _console() -> Console:
    from launcher.cli.console import Console

    return Console()


def _walk_ahead(workspace: str) -> None:
    """The workspace's walk in a child process while this one imports and reads the stack
    (``launcher.image.scan_ahead``): first thing, before any thread is started."""
    from launcher.image import scan_ahead

    scan_ahead.start(workspace)


def _cluster(args: argparse.Namespace, local: bool = False) -> Cluster:
    """The stack's cluster; with ``local`` (the command's --local), its local Docker engine."""
    from launcher.api import Cluster

    cluster = Cluster.from_stack(args.stack, profile=args.profile, region=args.region)
    if not local:
        return cluster
    return cluster.local(
        getattr(args, "local_efs", None),
        getattr(args, "local_fsx", None),
        getattr(args, "local_network", None),
        allow_host_mounts=getattr(args, "allow_host_mounts", False),
        allow_privileged=bool(getattr(args, "privileged", False)),  # the flag, not a job file
    )


def _local_network_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--local-network",
        choices=("none", "bridge", "host"),
        help="what a --local job's nodes reach: none, their own network with loopback only "
        "(default, or $LAUNCHER_LOCAL_NETWORK); bridge, that and outbound traffic through the "
        "engine's bridge; host, this machine's own network and every service on it",
    )


def _job(args: argparse.Namespace, job_id: str) -> Job:
    from launcher.api import Job

    return Job.attach(job_id, profile=args.profile, region=args.region)


class Outputs(Command):
    name = "outputs"
    help = "show the cluster discovered from the stack outputs"
    examples = (
        "launcher outputs",
        "launcher --stack Dev outputs --all",
        "launcher outputs -o json | jq -r .repository_uri",
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        _output_argument(parser, "every value, the pools' included")
        parser.add_argument(
            "--all", action="store_true", help="every value the stack outputs (ARNs, ids)"
        )

    def run(self, args: argparse.Namespace) -> int:
        cluster = _cluster(args)
        info = cluster.info
        data = info.as_dict()
        blocks = _capacity_blocks(cluster)
        if args.output == "json":
            _print_json({**data, "capacity_windows": blocks})
            return 0
        del data["pools"]  # a table of their own
        windows = {f"capacity ({pool})": window for pool, window in blocks.items()}
        if args.all:
            _print_fields({**data, "internet": info.internet, **windows})
        else:  # what a user needs to run a job; ARNs and ids are for --all
            _print_fields(
                {
                    "stack": f"{info.stack_name} ({info.region})",
                    "images": info.repository_uri,
                    "internet": info.internet,
                    **windows,
                }
            )
        print()
        _pool_table(info)
        print("* the default pool: jobs go there unless they name one (--pool)")
        if not args.all:
            print("every value (ARNs, ids): launcher outputs --all")
        return 0


def _capacity_blocks(cluster: Cluster) -> dict[str, str]:
    """Each pool in a Capacity Block: the block and its window in words (one call each)."""
    now = time.time()
    found = {p.name: cluster.in_pool(p.name).block() for p in cluster.info.pools}
    return {name: block.text(now) for name, block in found.items() if block is not None}


def _print_fields(fields: dict[str, object]) -> None:
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


def _pool_table(info: ClusterInfo) -> None:
    """The pools of ``launcher outputs``: what a job in each gets, the default one marked."""
    from launcher.cli import tables

    headers = (
        "POOL",
        "QUEUE",
        "INSTANCE",
        "MAX NODES",
        "GPUS",
        "VCPUS",
        "MEMORY",
        "EFA",
        "SPOT",
        "FALLBACK",
    )
    rows: list[tuple[str, ...]] = []
    for p in info.pools:
        rows.append(
            (
                p.name + (" *" if p.name == info.pool_name else ""),
                p.queue_name,
                p.instance_type,
                str(p.max_nodes),
                str(p.gpus_per_node),
                str(p.vcpus_per_node),
                f"{p.memory_mib_per_node} MiB",
                str(p.efa_interfaces or "-"),
                "yes: one-node jobs" if p.spot else "no",
                p.fallback or "-",
            )
        )
    tables.render(headers, rows)


class Run(Command):
    name = "run"
    help = "build the workspace image and submit a job (nodes, one node, or an array)"
    notes = (
        "Prints the job's id alone on stdout (JOB=$(launcher run ...)); progress goes to "
        "stderr. With --follow the exit status is the job's: 0 when it succeeded, 1 otherwise."
    )
    examples = (
        "# two nodes of torchrun on $LAUNCHER_IMAGE with this directory patched in; follow",
        "# the logs, and exit with the job's result",
        "launcher run --nodes 2 --torchrun --follow -- train.py --epochs 3",
        "# submit and go on; JOB holds the job's id",
        "JOB=$(launcher run --pool cpu --workspace demo/workspace -- sh /workspace/prepare.sh)",
        "# the same on the local Docker engine, one container per node",
        "launcher run --local --follow --nodes 2 --workspace demo/workspace -- "
        "sh /workspace/rendezvous.sh",
        "# print the requests and submit nothing",
        "launcher run --dryrun --nodes 2 --workspace demo/workspace -- sh /workspace/rendezvous.sh",
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "-f",
            "--file",
            metavar="JOB.yaml",
            help="a job file holding what these flags hold (docs/jobs.md, A job file); flags "
            "given here override it, and env, tags, secrets, mounts, ulimits, tmpfs and after "
            "add to it",
        )
        parser.add_argument("--name", help="job name (default: from the command)")
        parser.add_argument(
            "--nodes",
            type=int,
            help="number of nodes (default 1: a single-node job; more: a multi-node gang)",
        )
        parser.add_argument(
            "--array",
            type=int,
            metavar="N",
            help="N copies of a single-node job (2-10000), each with AWS_BATCH_JOB_ARRAY_INDEX",
        )
        parser.add_argument(
            "--after",
            action="append",
            default=[],
            metavar="JOB[:each]",
            help="wait for JOB to succeed (up to 20); JOB:each pairs two arrays child by child",
        )
        parser.add_argument("--image", help="base image (default: $LAUNCHER_IMAGE)")
        parser.add_argument(
            "--workspace",
            help="directory to patch into the image (default: the job file's, or the current "
            "one); a job file may name only its own directory or one under it",
        )
        parser.add_argument(
            "--no-workspace",
            action="store_true",
            help="run --image as it is, without the workspace",
        )
        _image_arguments(parser)
        parser.add_argument("--gpus-per-node", type=int, help="default: every GPU of the node")
        parser.add_argument(
            "--env",
            action="append",
            default=[],
            metavar="K=V",
            help="an environment variable for every node (repeat for more)",
        )
        parser.add_argument(
            "--mount",
            action="append",
            default=[],
            metavar="SPEC",
            help="type=efs,dst=P | type=fsx,dst=P | type=bind,src=P,dst=P[,readonly] | "
            "type=device,src=P[,dst=P][,perm=rwm]; bind and device only where the stack sets "
            "allow_privileged (with --local: --allow-host-mounts)",
        )
        parser.add_argument(
            "--efa",
            choices=[m.value for m in EfaMode],
            help="require: EFA devices, and a node whose image, devices or NCCL transport "
            "fall short fails in seconds (default for multi-node jobs on a pool with EFA); "
            "auto: warn instead (default for one node); off: no EFA",
        )
        parser.add_argument("--shm-size", help="/dev/shm size, e.g. 64g (default: 1/4 of memory)")
        parser.add_argument(
            "--secret",
            action="append",
            default=[],
            metavar="NAME=SECRET",
            help="environment variable NAME read at start from a Secrets Manager secret (name "
            "or ARN, NAME#KEY for one JSON key) or ssm:PARAMETER; never in the job definition",
        )
        parser.add_argument(
            "--ulimit",
            action="append",
            default=[],
            metavar="NAME=SOFT[:HARD]",
            help="a resource limit over the launcher's (memlock, stack, nofile), e.g. nproc=65536",
        )
        parser.add_argument(
            "--tmpfs",
            action="append",
            default=[],
            metavar="DST:SIZE",
            help="a memory-backed directory, e.g. /scratch:8g",
        )
        parser.add_argument(
            "--privileged",
            action="store_true",
            help="root on the node (only where the stack sets allow_privileged); with --local, "
            "root on this machine, which a job file's privileged: true alone never gets",
        )
        parser.add_argument(
            "--timeout",
            help="per-attempt limit, e.g. 90m (at least 60s; in a Capacity Block's pool, no later "
            "than 30 min before the block ends, when EC2 starts ending its instances)",
        )
        parser.add_argument(
            "--checkpoint-signal",
            metavar="SIGNAL",
            help="in a Capacity Block's pool: the signal the command (torchrun's workers with "
            "--torchrun) gets before EC2 ends the block's instances: USR1 (default), USR2, INT, "
            "TERM or HUP",
        )
        parser.add_argument(
            "--checkpoint-lead",
            metavar="DURATION",
            help="how long before EC2 starts ending the block's instances the signal is sent "
            "(default 10m)",
        )
        parser.add_argument(
            "--retries",
            type=int,
            help="attempts, 1-10; a lost host or node is retried, an error is not "
            f"(default {DEFAULT_ATTEMPTS})",
        )
        _pool_argument(parser, "the pool to run in")
        parser.add_argument("--share-id", help="fair-share identifier (your team)")
        parser.add_argument("--priority", type=int, help="fair-share scheduling priority")
        parser.add_argument(
            "--tag",
            action="append",
            default=[],
            metavar="K=V",
            help="a tag on the job (repeat for more; Batch allows 50 a job, the launcher's own "
            "included)",
        )
        parser.add_argument(
            "--torchrun",
            action="store_true",
            help="wrap the command in torchrun with nodes and GPUs per node",
        )
        parser.add_argument(
            "--port",
            type=int,
            help=f"rendezvous port (the next one: node watch; default {DEFAULT_RENDEZVOUS_PORT})",
        )
        parser.add_argument(
            "--restarts",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="retry the job when a node is lost, resuming from $LAUNCHER_CHECKPOINT_DIR "
            "(default: on with --torchrun)",
        )
        parser.add_argument(
            "--follow",
            action="store_true",
            help="stream logs until it ends, then exit 0 if it succeeded, 1 if not",
        )
        parser.add_argument(
            "--local",
            action="store_true",
            help="run on the local Docker engine, one container per node",
        )
        parser.add_argument(
            "--local-efs",
            metavar="DIR",
            help="directory standing in for EFS with --local "
            "(default: $LAUNCHER_LOCAL_EFS or ~/.local/share/efa-batch/efs/STACK)",
        )
        parser.add_argument(
            "--local-fsx",
            metavar="DIR",
            help="directory standing in for FSx for Lustre with --local "
            "(default: $LAUNCHER_LOCAL_FSX or ~/.local/share/efa-batch/fsx/STACK)",
        )
        _local_network_argument(parser)
        parser.add_argument(
            "--allow-host-mounts",
            action="store_true",
            help="with --local: let the job mount this machine's paths and devices (--mount "
            "type=bind or type=device, here or in the job file), which give it root here; on "
            "AWS the stack's allow_privileged decides",
        )
        parser.add_argument(
            "--dryrun",
            action="store_true",
            help="print the requests as JSON; change nothing (stderr lists the files the "
            "workspace image would ship and those left out as secrets)",
        )
        parser.add_argument(
            "command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]: what every node runs"
        )
        _output_argument(parser, '{"job_id": ...} (--dryrun prints the requests either way)')

    @staticmethod
    def options(args: argparse.Namespace) -> dict[str, object]:
        """The flags given as JobSpec fields, parsed (one line on any bad value) before any
        I/O; flags not given are left out, for a job file's values or JobSpec's defaults."""
        from launcher.job import jobspec
        from launcher.job.shapes import parse_after

        given = {
            "image": args.image,
            "nodes": args.nodes,
            "gpus_per_node": args.gpus_per_node,
            "env": tuple(jobspec.parse_env(e) for e in args.env),
            "mounts": tuple(jobspec.parse_mount(m) for m in args.mount),
            "efa": args.efa,
            "shm_mib": jobspec.parse_size_mib(args.shm_size) if args.shm_size else None,
            "secrets": tuple(jobspec.parse_secret(s) for s in args.secret),
            "ulimits": tuple(jobspec.parse_ulimit(u) for u in args.ulimit),
            "tmpfs": tuple(jobspec.parse_tmpfs(t) for t in args.tmpfs),
            "privileged": args.privileged or None,
            "timeout_seconds": jobspec.parse_duration(args.timeout) if args.timeout else None,
            "checkpoint_signal": (
                jobspec.parse_signal(args.checkpoint_signal) if args.checkpoint_signal else None
            ),
            "checkpoint_lead_seconds": (
                jobspec.parse_lead(args.checkpoint_lead) if args.checkpoint_lead else None
            ),
            "attempts": args.retries,
            "share_id": args.share_id,
            "priority": args.priority,
            "tags": tuple(jobspec.parse_tag(t) for t in args.tag),
            "torchrun": args.torchrun or None,
            "rendezvous_port": args.port,
            "restarts": args.restarts,
            "array_size": args.array,
            "after": tuple(parse_after(a) for a in args.after),
            "pool": args.pool,
            "name": args.name or None,
        }
        return {k: v for k, v in given.items() if v is not None and v != ()}

    def run(self, args: argparse.Namespace) -> int:
        from launcher.job import jobfile

        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        options = self.options(args)
        workspace: str | None = "." if args.workspace is None else args.workspace
        if args.file:  # the file's values under the flags given; the command after -- wins
            job_file = jobfile.load(args.file)
            options = jobfile.merge(job_file.options, options)
            command = command or list(job_file.command or ())
            if args.workspace is None and not args.no_workspace:  # the file's, checked
                workspace = None if job_file.no_workspace else (job_file.workspace or ".")
        if args.no_workspace:
            workspace = None
        if workspace is not None:
            _walk_ahead(workspace)
        from launcher.job.options import make_spec

        if args.follow and options.get("array_size") is not None:
            raise UsageError(
                "--follow with --array: each child has its own logs; follow one with "
                "launcher logs JOB --index K --follow"
            )
        spec = make_spec(command, **options)  # before any call
        cluster = _cluster(args, args.local)
        image_options: BuildOptions = {
            "builder": args.builder,
            "platform": args.platform,
            "progress": _console(),
            "stream_base": args.stream_base,
            "compression": args.compression,
        }
        if args.dryrun:
            requests = cluster.dryrun(spec=spec, workspace=workspace, **image_options)
            print(json.dumps(requests, indent=2))
            return 0
        job = cluster.run(spec=spec, workspace=workspace, **image_options)
        code = _follow(job) if args.follow else 0
        _print_job_id(args, job.job_id)
        return code


def _print_job_id(args: argparse.Namespace, job_id: str) -> None:
    if args.output == "json":
        _print_json({"job_id": job_id})
    else:
        print(job_id)


def _pool_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--pool", help=f"{what} (default: the stack's default pool; launcher outputs lists them)"
    )


def _image_arguments(parser: argparse.ArgumentParser) -> None:
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
        _output_argument(parser, '{"image": REFERENCE}')

    def run(self, args: argparse.Namespace) -> int:
        reference = _cluster(args, args.local).mirror(
            args.image, platform=args.platform, dryrun=args.dryrun, progress=_console()
        )
        _print_image(args, reference)
        return 0


def _print_image(args: argparse.Namespace, reference: str, **extra: object) -> None:
    if args.output == "json":
        _print_json({"image": reference, **extra})
    else:
        print(reference)


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
        _image_arguments(parser)
        parser.add_argument(
            "--dryrun",
            action="store_true",
            help="compute the image's digest without pushing; list the files it would ship "
            "and those left out as secrets (on stderr)",
        )
        _output_argument(parser, '{"image": REFERENCE, "reused": true|false}')

    def run(self, args: argparse.Namespace) -> int:
        _walk_ahead(args.workspace)
        base = base_image(args.image)
        options: ImageOptions = {
            "builder": args.builder,
            "dryrun": args.dryrun,
            "progress": _console(),
            "stream_base": args.stream_base,
            "compression": args.compression,
        }
        if args.repo is None:  # the stack's repository, and the platform of its instances
            built = _cluster(args).build(base, args.workspace, platform=args.platform, **options)
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
            _err("workspace unchanged: image already in the registry")
        _print_image(args, built.reference, reused=built.reused)
        return 0


def _follow(job: Job) -> int:
    """Stream every node's log lines to stderr (escaped on a terminal: ``launcher.cli.escapes``),
    then the job's end; exit code from its state."""
    from launcher.cli.escapes import for_terminal, visible
    from launcher.job.info import JobState

    escaped = for_terminal(sys.stderr)
    for line in job.logs(follow=True, waiting=_console()):
        _err(f"[node {line.node}] {visible(line.message) if escaped else line.message}")
    info = job.status()
    _err(info.status_line())
    return 0 if info.state is JobState.SUCCEEDED else 1


class Status(Command):
    name = "status"
    help = "print a job's state (one DescribeJobs call)"
    notes = (
        "A query: the exit status is 0 whatever the job's state (launcher wait JOB exits with "
        "its result). For an unfinished job of the stack's pools that run in a Capacity Block, "
        "the block's window too (two more calls: the stack, the block)."
    )
    examples = (
        'launcher status "$JOB"',
        'launcher status "$JOB" -o json | jq -r .state',
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("job", help="job id (or QUEUE:JOB_ID)")
        _output_argument(
            parser, "the job's fields, with waiting_for, lost_nodes and what_to_do (or null)"
        )

    def run(self, args: argparse.Namespace) -> int:
        from launcher.aws.explain import explain

        job = _job(args, args.job)
        info = job.status()
        waiting = job.waiting_for(info)
        lost = job.lost_nodes(info)
        nodes = lost.text() if lost else None
        advice = explain(info)
        block = _capacity_block_of(args, info)
        if args.output == "json":
            _print_json(
                {
                    **info.as_dict(),
                    "waiting_for": waiting,
                    "lost_nodes": nodes,
                    "what_to_do": advice,
                    "capacity_window": block,
                }
            )
            return 0
        print(info.status_line())
        if info.is_array:
            print(f"  children: {info.children_line() or 'none yet'} (of {info.array_size})")
        if waiting:
            print(f"  waiting for: {waiting}")
        if nodes:
            print(f"  nodes: {nodes}")
        for line in info.replacements:  # the stack's node replacer (launcher.job.replacements)
            print(f"  replaced: {line}")
        if block:
            print(f"  capacity: {block}")
        if advice:
            print(f"  what to do: {advice}")
        return 0


def _capacity_block_of(args: argparse.Namespace, info: JobInfo) -> str | None:
    """An unfinished AWS job's Capacity Block and its window in words, where the job is in a
    pool of the stack (``--stack``) that runs in one; None otherwise, or when the stack cannot
    be read (a job of another stack, or no access to it: status goes on without it)."""
    from launcher.job.info import BackendName

    if info.state.terminal or info.backend is not BackendName.AWS or not info.queue:
        return None
    try:
        cluster = _cluster(args)
    except LauncherError:
        return None
    pool = cluster.pool_of(info)
    block = cluster.in_pool(pool).block() if pool else None
    return block.text(time.time()) if block else None


class Wait(Command):
    name = "wait"
    help = "wait for a job to end; exit 0 if it succeeded, 1 if not"
    notes = (
        "Asks for the job's state every --poll seconds (one DescribeJobs call each), prints "
        "its status line when it ends, and exits 0 when it SUCCEEDED, 1 when it FAILED or "
        "--timeout passed first."
    )
    examples = (
        'launcher wait "$JOB" && launcher run --workspace demo/workspace -- sh /workspace/'
        "rendezvous.sh",
        'launcher wait "$JOB" --timeout 2h',
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("job", help="job id (or QUEUE:JOB_ID)")
        parser.add_argument(
            "--timeout", help="give up after DURATION, e.g. 90m, exiting 1 (default: never)"
        )
        parser.add_argument(
            "--poll",
            type=float,
            default=10.0,
            metavar="SECONDS",
            help="seconds between two looks at the job (default 10)",
        )
        _output_argument(parser, "the job's fields when it ends, with what_to_do (or null)")

    def run(self, args: argparse.Namespace) -> int:
        from launcher.aws.explain import explain
        from launcher.job import jobspec
        from launcher.job.info import JobState

        try:
            timeout = jobspec.parse_since(args.timeout) if args.timeout else None
        except UsageError:
            raise UsageError(
                f"--timeout {args.timeout!r}: expected a duration like 90m, 2h or 30s"
            ) from None
        if args.poll <= 0:
            raise UsageError(f"--poll {args.poll:g}: give a number of seconds above 0")
        info = _job(args, args.job).wait(timeout=timeout, poll=args.poll, waiting=_console())
        advice = explain(info)
        if args.output == "json":
            _print_json({**info.as_dict(), "what_to_do": advice})
        else:
            print(info.status_line())
            if advice:
                print(f"  what to do: {advice}")
        if not info.state.terminal:
            _err(f"launcher: {info.job_id} still {info.state} after {args.timeout}")
        return 0 if info.state is JobState.SUCCEEDED else 1


class Describe(Command):
    name = "describe"
    help = "show a job's details and each node's state"
    examples = (
        'launcher describe "$JOB"',
        'launcher describe "$JOB" -o json | jq ".node_status[] | .state"',
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("job", help="job id (or QUEUE:JOB_ID, or ID:K for an array's child K)")
        _output_argument(
            parser, "the job's fields (the Python API's JobInfo), lost_nodes and what_to_do"
        )

    def run(self, args: argparse.Namespace) -> int:
        from launcher.aws.explain import explain

        job = _job(args, args.job)
        info = job.describe()
        lost = job.lost_nodes(info)
        nodes = lost.text() if lost else None
        if args.output == "json":
            _print_json({**info.as_dict(), "lost_nodes": nodes, "what_to_do": explain(info)})
            return 0
        rows = {
            "job": f"{info.job_id} ({info.name})",
            "status": f"{info.state}" + (f": {info.reason}" if info.reason else ""),
            "queue": info.queue or "-",
            "definition": info.definition or "-",
            "nodes": info.nodes,
            "image": info.image or "-",
            "attempts": info.attempts,
        }
        if info.is_array:
            rows["array"] = f"{info.array_size} children: {info.children_line() or 'none yet'}"
        elif info.array_index is not None:
            rows["array"] = f"child {info.array_index} of {info.array_size}"
        if info.depends_on:
            rows["after"] = ", ".join(info.depends_on)
        if info.detail:
            rows["container"] = info.detail
        for node in info.node_status:
            rows[f"node {node.index}"] = _node_row(node)
        if nodes:
            rows["lost nodes"] = nodes
        advice = explain(info)
        if advice:
            rows["what to do"] = advice
        _print_fields(rows)
        return 0


def _node_row(node: NodeStatus) -> str:
    """``FAILED, exit 143``; a node its record says was lost or never started says so, a lost
    one with Batch's reason (``FAILED, lost: Host EC2 (instance i-0abc) terminated.``)."""
    from launcher.job.info import NodeFate

    code = "" if node.exit_code is None else f", exit {node.exit_code}"
    fate = f", {node.fate}" if node.fate else ""
    why = f": {node.reason}" if node.fate is NodeFate.LOST and node.reason else ""
    return f"{node.state}{code}{fate}{why}"


class Logs(Command):
    name = "logs"
    help = "print a job's logs, per node"
    examples = (
        'launcher logs --follow "$JOB"',
        'launcher logs --node 1 --since 10m "$JOB"',
        'launcher logs "$JOB" -o json | jq -r "select(.node == 0) | .message"',
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("job", help="job id (or QUEUE:JOB_ID)")
        parser.add_argument("--node", type=int, help="only this node (default: all)")
        parser.add_argument("--index", type=int, metavar="K", help="an array job's child K")
        parser.add_argument(
            "--follow", "-f", action="store_true", help="keep printing new lines until it ends"
        )
        parser.add_argument("--since", help="only the last DURATION, e.g. 10m")
        parser.add_argument(
            "--attempt", type=int, help="an earlier attempt's logs (1-based; default the latest)"
        )
        parser.add_argument(
            "--raw",
            action="store_true",
            help="pass the job's bytes to the terminal as they are, escape sequences included "
            "(by default a terminal gets control characters other than tab and newline as "
            "\\x1b-style escapes; piped output is never changed)",
        )
        _output_argument(
            parser, 'one JSON object a line: {"node": N, "message": ..., "timestamp": ...}'
        )

    def run(self, args: argparse.Namespace) -> int:
        import time

        from launcher.cli.escapes import for_terminal, visible
        from launcher.job import jobspec

        since = time.time() - jobspec.parse_since(args.since) if args.since else None
        if args.attempt is not None and args.attempt < 1:
            raise UsageError(f"--attempt {args.attempt}: attempts count from 1")
        job = _job(args, args.job)
        if args.index is not None:
            job = job.child(args.index)
        lines = job.logs(
            node=args.node,
            since=since,
            follow=args.follow,
            attempt=args.attempt,
            waiting=_console(),
        )
        escaped = for_terminal(sys.stdout, raw=args.raw)
        for line in lines:
            message = visible(line.message) if escaped else line.message
            if args.output == "json":  # JSON escapes control characters itself
                text = json.dumps(
                    {"node": line.node, "message": line.message, "timestamp": line.timestamp}
                )
            elif args.node is not None:
                text = message
            else:
                text = f"[node {line.node}] {message}"
            print(text, flush=True)
        return 0


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
            options = _Parser(prog=args.command_parser.prog, add_help=False)
            self._options(options)
            options.parse_args(words[:cut], namespace=args)
            words = words[cut:]
        command = words[1:] if words[:1] == ["--"] else words
        return _job(args, args.job).enter(args.node, command)


class Resubmit(Command):
    name = "resubmit"
    help = "run a job again, resuming from its checkpoint directory"
    notes = "Prints the new job's id alone on stdout."
    examples = ('AGAIN=$(launcher resubmit "$JOB")',)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("job", help="the job to run again: job id (or QUEUE:JOB_ID)")
        _output_argument(parser, '{"job_id": NEW_ID}')

    def run(self, args: argparse.Namespace) -> int:
        new = _job(args, args.job).resubmit(progress=_console())
        _print_job_id(args, new.job_id)
        return 0


class Cancel(Command):
    name = "cancel"
    help = "terminate jobs in any state (an array with all its children), 50 to an AWS call"
    notes = (
        "One line per job on stderr. Exit status: 0 when every job was cancelled, 1 when "
        "AWS failed to cancel one, else 2 (a job had ended already; an unknown id or a bad "
        "--index cancels nothing)."
    )
    examples = (
        'launcher cancel "$JOB"',
        'launcher cancel "$POST" "$TRAIN" "$PRE"',
        "# only children 0 and 1 of an array",
        'launcher cancel "$PRE" --index 0-1',
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "job",
            nargs="+",
            metavar="JOB",
            help="job id (or QUEUE:JOB_ID, or ID:K for an array's child K); all of one kind, "
            "AWS or local",
        )
        parser.add_argument(
            "--index",
            metavar="K[-M][,...]",
            help="only these children of the array JOB, e.g. 0-9,12 (default: the whole array)",
        )
        _output_argument(
            parser,
            'on stdout, one object a job: {"job_id", "name", "was", "error"} (error: null when '
            "it was cancelled)",
        )

    def run(self, args: argparse.Namespace) -> int:
        from launcher.api import attach, cancel_jobs
        from launcher.job.shapes import parse_indexes

        indexes = parse_indexes(args.index) if args.index is not None else None  # before calls
        if indexes is not None and len(args.job) > 1:
            raise UsageError(f"--index {args.index}: give one array job, not {len(args.job)}")
        jobs = attach(args.job, profile=args.profile, region=args.region)
        if indexes is not None:
            jobs = jobs[0].children(indexes, args.index)
        if len(jobs) == 1:  # one job: one TerminateJob, its error raised as ever
            info = jobs[0].cancel()
            _err(_cancelled(info))
            if args.output == "json":
                _print_json([_cancel_record(info, None)])
            return 0
        outcomes = cancel_jobs(jobs)
        for outcome in outcomes:
            error = outcome.error
            _err(_cancelled(outcome.info) if error is None else f"launcher: error: {error}")
        if args.output == "json":
            _print_json([_cancel_record(o.info, o.error) for o in outcomes])
        codes = {o.error.exit_code for o in outcomes if o.error is not None}
        # AWS failing a job (1) outranks jobs that had ended already (2, as for one job).
        return min(codes, default=0)


def _cancelled(info: JobInfo) -> str:
    return f"cancelled {info.job_id} ({info.name}, was {info.state})"


def _cancel_record(info: JobInfo, error: LauncherError | None) -> dict[str, object]:
    return {
        "job_id": info.job_id,
        "name": info.name,
        "was": info.state.value,
        "error": None if error is None else str(error),
    }


class List(Command):
    name = "list"
    help = "list the cluster queue's jobs (active ones unless --all)"
    notes = (
        "Newest first: ID, NAME, POOL, STATE, NODES, AGE (since it was submitted) and DURATION "
        "(how long it ran, or has run). Scripts should read -o json, not the table."
    )
    examples = (
        "launcher list",
        "launcher list --all --all-pools",
        "launcher list --local --all",
        "launcher list -o json | jq -r '.[] | select(.state == \"FAILED\") | .job_id'",
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--all", action="store_true", help="include finished jobs")
        _pool_argument(parser, "the pool whose queue to list")
        parser.add_argument("--all-pools", action="store_true", help="every pool's queue")
        _output_argument(parser, "a list of the jobs' fields (the Python API's JobInfo) and pool")
        parser.add_argument("--local", action="store_true", help="jobs run with run --local")

    def run(self, args: argparse.Namespace) -> int:
        if args.pool and args.all_pools:
            raise UsageError("--pool and --all-pools: give one")
        if args.local and not (args.pool or args.all_pools):  # local jobs need no stack
            from launcher.api import local_jobs

            listed, pools = local_jobs(all=args.all), None
        else:
            pools = _cluster(args, args.local)
            listed = pools.list(all=args.all, pool=args.pool, every_pool=args.all_pools)
        pool_of = {j.job_id: pools.pool_of(j) if pools else None for j in listed}
        if args.output == "json":
            _print_json([{**j.as_dict(), "pool": pool_of[j.job_id]} for j in listed])
            return 0
        from launcher.cli import tables

        now = time.time()
        rows = [
            (
                job.job_id,
                job.name,
                pool_of[job.job_id] or "-",
                job.state.value,
                str(job.nodes),
                tables.age(job.created_at, now),
                tables.duration(job.started_at, job.stopped_at, now),
            )
            for job in listed
        ]
        headers = ("ID", "NAME", "POOL", "STATE", "NODES", "AGE", "DURATION")
        tables.render(headers, rows, styles={3: tables.STATE_STYLES})
        return 0


class Check(Command):
    name = "check"
    help = "prove the cluster: EFA, GPUs, NCCL all-reduce, rendezvous and EFS on every node"
    notes = "Exit status: 0 when every check passed, 1 when one failed."
    examples = (
        "launcher check",
        "launcher --region us-west-2 check --pool cpu --nodes 1",
        'launcher check --local --image "$LAUNCHER_IMAGE"',
        "launcher check -o json | jq .passed",
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--nodes", type=int, help="nodes to test (default: 2, or max_nodes; 1 on a Spot pool)"
        )
        parser.add_argument("--image", help="an nccl-tests image with EFA (default: AWS's)")
        parser.add_argument("--timeout", default="30m", help="give up after (default 30m)")
        parser.add_argument(
            "--port", type=int, default=DEFAULT_RENDEZVOUS_PORT, help="rendezvous port"
        )
        _pool_argument(parser, "the pool whose nodes to prove")
        parser.add_argument(
            "--share-id", help="fair-share identifier, where the policy names teams"
        )
        _output_argument(parser, "the report: each node's checks and the all-reduce's numbers")
        parser.add_argument("--local", action="store_true", help="run on the local Docker engine")
        parser.add_argument("--local-efs", metavar="DIR", help="EFS stand-in with --local")
        parser.add_argument("--local-fsx", metavar="DIR", help="FSx stand-in with --local")
        _local_network_argument(parser)

    def run(self, args: argparse.Namespace) -> int:
        from launcher.job import jobspec

        timeout = jobspec.parse_duration(args.timeout)
        if args.nodes is not None and args.nodes < 1:
            raise UsageError(f"--nodes {args.nodes}: a check needs at least 1 node")
        report = _cluster(args, args.local).check(
            nodes=args.nodes,
            image=args.image,
            timeout=timeout,
            port=args.port,
            progress=_console(),
            pool=args.pool,
            share_id=args.share_id,
        )
        if args.output == "json":
            _print_json(report.as_dict())
        else:
            print(report.table())
        return 0 if report.passed else 1


class Completion(Command):
    name = "completion"
    help = "print the shell completion script for bash, zsh or fish"
    notes = "The script completes commands and options; it asks launcher itself, with no AWS call."
    examples = (
        "# bash: for this shell, then for every new one",
        'eval "$(launcher completion bash)"',
        "launcher completion bash > ~/.local/share/bash-completion/completions/launcher",
        "# zsh: a directory on $fpath (then `autoload -U compinit && compinit` in ~/.zshrc)",
        'launcher completion zsh > "${fpath[1]}/_launcher"',
        "# fish",
        "launcher completion fish > ~/.config/fish/completions/launcher.fish",
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")

    def run(self, args: argparse.Namespace) -> int:
        from argcomplete.shell_integration import shellcode

        sys.stdout.write(shellcode(["launcher"], shell=args.shell))
        return 0


SHELLS = ("bash", "zsh", "fish")


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


def parser() -> argparse.ArgumentParser:
    top = _Parser(
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
    args, unknown = top.parse_known_args(argv)
    if getattr(args, "handler", None) is None:  # bare `launcher`: what it can do
        top.print_help()
        return 0
    if unknown:  # told against the subcommand, whose --help lists what it takes
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    handler: Command = args.handler
    try:
        return handler.run(args)
    except LauncherError as exc:
        if args.debug:
            raise
        _err(f"launcher: error: {exc}")
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
