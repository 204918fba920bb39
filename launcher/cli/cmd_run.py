"""``launcher run``: the flags (and a job file's values under them) made into a JobSpec before
any call, then built and submitted; ``--follow`` streams the logs and exits with the job.

The longest command: its flags are JobSpec's fields, each with its help.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from launcher.cli import interrupt
from launcher.cli.base import (
    Command,
    cluster_from,
    console,
    image_arguments,
    local_network_argument,
    output_argument,
    pool_argument,
    print_err,
    print_job_id,
    team_argument,
    walk_ahead,
)
from launcher.errors import UsageError
from launcher.job.jobspec import DEFAULT_ATTEMPTS, DEFAULT_RENDEZVOUS_PORT, EfaMode

if TYPE_CHECKING:
    from launcher.api import BuildOptions, Job
    from launcher.progress import ProgressFn


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
        image_arguments(parser)
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
        pool_argument(parser, "the pool to run in")
        team_argument(parser, "the team to submit as: its pools, roles, share and directory")
        parser.add_argument(
            "--share-id", help="fair-share identifier (your team; with teams, the team's)"
        )
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
        local_network_argument(parser)
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
        output_argument(parser, '{"job_id": ...} (--dryrun prints the requests either way)')

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
            if args.team is None:
                args.team = job_file.team
            command = command or list(job_file.command or ())
            if args.workspace is None and not args.no_workspace:  # the file's, checked
                workspace = None if job_file.no_workspace else (job_file.workspace or ".")
        if args.no_workspace:
            workspace = None
        if workspace is not None:
            walk_ahead(workspace)
        from launcher.job.options import make_spec

        if args.follow and options.get("array_size") is not None:
            raise UsageError(
                "--follow with --array: each child has its own logs; follow one with "
                "launcher logs JOB --index K --follow"
            )
        spec = make_spec(command, **options)  # before any call
        cluster = cluster_from(args, args.local)
        progress = console()
        image_options: BuildOptions = {
            "builder": args.builder,
            "platform": args.platform,
            "progress": progress,
            "stream_base": args.stream_base,
            "compression": args.compression,
        }
        if args.dryrun:
            requests = cluster.dryrun(spec=spec, workspace=workspace, **image_options)
            print(json.dumps(requests, indent=2))
            return 0
        try:
            job = cluster.run(spec=spec, workspace=workspace, **image_options)
        except KeyboardInterrupt:
            return interrupt.not_submitted(progress)
        again = interrupt.Again.of(args, job)
        # With --follow, stdout has the id only at the end; a person at a terminal gets the
        # command that follows the job either way.
        if args.follow or sys.stderr.isatty():
            interrupt.submitted(again, progress)
        code = 0
        if args.follow:
            try:
                code = _follow(job, progress)
            except KeyboardInterrupt:
                code = interrupt.stopped(again, progress)
        print_job_id(args, job.job_id)  # even after Ctrl-C: the job exists
        return code


def _follow(job: Job, progress: ProgressFn) -> int:
    """Stream every node's log lines to stderr (escaped on a terminal: ``launcher.cli.escapes``),
    then the job's end; exit code from its state."""
    from launcher.cli.escapes import for_terminal, visible
    from launcher.job.info import JobState

    escaped = for_terminal(sys.stderr)
    for line in job.logs(follow=True, waiting=progress):
        print_err(f"[node {line.node}] {visible(line.message) if escaped else line.message}")
    info = job.status()
    print_err(info.status_line())
    return 0 if info.state is JobState.SUCCEEDED else 1
