"""``launcher``: the command line. Thin: parse, call the library, print, map errors to exits.

Imports of boto3 and friends happen inside the commands so that ``launcher --help`` is fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Sequence

from launcher.errors import LauncherError, UsageError
from launcher.outputs import DEFAULT_STACK_NAME


def _err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Command:
    """One subcommand: ``add_arguments`` declares its flags, ``run`` does the work."""

    name = ""
    help = ""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:  # pragma: no cover
        pass

    def run(self, args: argparse.Namespace) -> int:  # pragma: no cover
        raise NotImplementedError


def _aws(args: argparse.Namespace):
    from launcher.aws import Aws

    return Aws(profile=args.profile, region=args.region)


def _cluster(args: argparse.Namespace, aws):
    from launcher.jobs import discover

    return discover(aws, args.stack)


class Outputs(Command):
    name = "outputs"
    help = "show the cluster discovered from the stack outputs"

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print JSON")

    def run(self, args):
        cluster = _cluster(args, _aws(args))
        data = cluster.as_dict()
        if args.json:
            print(json.dumps(data, indent=2))
        else:
            _print_fields(data)
        return 0


def _print_fields(fields: dict) -> None:
    width = max(map(len, fields))
    for key, value in fields.items():
        print(f"{key:<{width}}  {value if value is not None else '-'}")


class Run(Command):
    name = "run"
    help = "build the workspace image and submit a multi-node job"

    def add_arguments(self, parser):
        parser.add_argument("--name", help="job name (default: from the command)")
        parser.add_argument("--nodes", type=int, default=1, help="number of nodes (default 1)")
        parser.add_argument("--image", help="base image (default: $LAUNCHER_IMAGE)")
        parser.add_argument("--workspace", default=".", help="directory to patch into the image")
        parser.add_argument(
            "--no-workspace",
            action="store_true",
            help="run --image as it is, without the workspace",
        )
        _image_arguments(parser)
        parser.add_argument("--gpus-per-node", type=int, help="default: every GPU of the node")
        parser.add_argument("--env", action="append", default=[], metavar="K=V")
        parser.add_argument(
            "--mount",
            action="append",
            default=[],
            metavar="SPEC",
            help="type=efs,dst=P | type=bind,src=P,dst=P[,readonly] | "
            "type=device,src=P[,dst=P][,perm=rwm]",
        )
        parser.add_argument(
            "--efa",
            default="auto",
            choices=["auto", "require", "off"],
            help="auto: EFA devices, warn if the image lacks libfabric/aws-ofi-nccl; "
            "require: fail the job instead; off: no EFA",
        )
        parser.add_argument("--shm-size", help="/dev/shm size, e.g. 64g (default: 1/4 of memory)")
        parser.add_argument("--timeout", help="per-attempt limit, e.g. 90m (at least 60s)")
        parser.add_argument(
            "--retries",
            type=int,
            default=3,
            help="attempts, 1-10; only host loss is retried (default 3)",
        )
        parser.add_argument("--share-id", help="fair-share identifier")
        parser.add_argument("--priority", type=int, help="fair-share scheduling priority")
        parser.add_argument("--tag", action="append", default=[], metavar="K=V")
        parser.add_argument(
            "--torchrun",
            action="store_true",
            help="wrap the command in torchrun with nodes and GPUs per node",
        )
        parser.add_argument("--port", type=int, default=29500, help="rendezvous port")
        parser.add_argument("--follow", action="store_true", help="stream logs until it ends")
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
            "--dryrun", action="store_true", help="print the requests as JSON; change nothing"
        )
        parser.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")

    def spec(self, args, image: str):
        from launcher import jobspec

        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        return jobspec.JobSpec(
            name=args.name or jobspec.default_name(command),
            command=tuple(command),
            image=image,
            nodes=args.nodes,
            gpus_per_node=args.gpus_per_node,
            env=tuple(jobspec.parse_env(e) for e in args.env),
            mounts=tuple(jobspec.parse_mount(m) for m in args.mount),
            efa=args.efa,
            shm_mib=jobspec.parse_size_mib(args.shm_size) if args.shm_size else None,
            timeout_seconds=jobspec.parse_duration(args.timeout) if args.timeout else None,
            attempts=args.retries,
            share_id=args.share_id,
            priority=args.priority,
            tags=tuple(jobspec.parse_tag(t) for t in args.tag),
            torchrun=args.torchrun,
            rendezvous_port=args.port,
        )

    def run(self, args):
        from launcher import jobdef, jobs

        base = args.image or os.environ.get("LAUNCHER_IMAGE")
        if not base:
            raise UsageError("--image: no base image; pass --image or set LAUNCHER_IMAGE")
        # Parse and validate everything before any AWS call or upload.
        spec = self.spec(args, base)
        aws = _aws(args)
        cluster = _cluster(args, aws)
        if not args.no_workspace:
            from launcher.image.build import workspace_image

            built = workspace_image(
                base,
                args.workspace,
                cluster.repository_uri,
                aws=aws,
                builder=args.builder,
                platform=args.platform or _platform(cluster),
                dryrun=args.dryrun,
            )
            _err(
                f"workspace image {built.reference}"
                + (" (unchanged, reused)" if built.reused else "")
            )
            spec = dataclasses.replace(spec, image=built.reference)
        requests = jobdef.build(spec, cluster)
        if args.dryrun:
            print(json.dumps(requests.as_dict(), indent=2))
            return 0
        if args.local:
            return self.run_local(args, requests, cluster)
        submitted = jobs.submit(aws, requests)
        _err(
            f"{'registered' if submitted.registered else 'reusing'} job definition "
            f"{submitted.job_definition_arn}"
        )
        _err(
            f"submitted {requests.submit['jobName']} to {cluster.job_queue_name}: "
            f"{args.nodes} x {cluster.instance_type}"
        )
        code = 0
        if args.follow:
            lines = jobs.iter_logs(aws, cluster, submitted.job_id, None, None, follow=True)
            code = _follow(lines, lambda: jobs.describe(aws, submitted.job_id))
        print(submitted.job_id)
        return code

    def run_local(self, args, requests, cluster) -> int:
        from launcher import local

        efs = (
            args.local_efs
            or os.environ.get("LAUNCHER_LOCAL_EFS")
            or os.path.expanduser(f"~/.local/share/efa-batch/efs/{cluster.stack_name}")
        )
        job_id = local.start(requests, cluster.job_queue_name, efs, warn=_err)
        _err(f"started {requests.submit['jobName']} locally: {args.nodes} node(s), EFS at {efs}")
        code = 0
        if args.follow:
            code = _follow(local.iter_logs(job_id, None, follow=True), lambda: local.load(job_id))
        print(job_id)
        return code


def _status_line(job: dict) -> str:
    from launcher.jobs import status_line

    return status_line(job)


def _describe(args, handle: str) -> dict:
    from launcher import jobs, local

    if local.is_local(handle):
        return local.load(handle)
    return jobs.describe(_aws(args), handle)


def _image_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--builder",
        default="auto",
        choices=["auto", "registry", "docker"],
        help="registry: patch in the registry; docker: Docker SDK build "
        "(auto: docker when the workspace has Dockerfile.launcher)",
    )
    parser.add_argument("--platform", help="image platform (default: the cluster's, linux/amd64)")


def _platform(cluster) -> str:
    instance = cluster.instance
    return f"linux/{instance.architecture if instance else 'amd64'}"


class Build(Command):
    name = "build"
    help = "patch the workspace into the base image, push it, print REPO@sha256:..."

    def add_arguments(self, parser):
        parser.add_argument("--image", help="base image (default: $LAUNCHER_IMAGE)")
        parser.add_argument("--workspace", default=".", help="directory to patch in")
        parser.add_argument("--repo", help="target repository (default: the stack's ECR)")
        _image_arguments(parser)
        parser.add_argument(
            "--dryrun", action="store_true", help="compute the image's digest without pushing"
        )

    def run(self, args):
        from launcher.image.build import workspace_image

        base = args.image or os.environ.get("LAUNCHER_IMAGE")
        if not base:
            raise UsageError("--image: no base image; pass --image or set LAUNCHER_IMAGE")
        aws = None
        repo, platform = args.repo, args.platform
        if repo is None:  # the stack's repository, and the platform of its instances
            aws = _aws(args)
            cluster = _cluster(args, aws)
            repo, platform = cluster.repository_uri, platform or _platform(cluster)
        elif ".dkr.ecr." in repo:
            aws = _aws(args)  # ECR credentials come from AWS
        platform = platform or "linux/amd64"
        built = workspace_image(
            base,
            args.workspace,
            repo,
            aws=aws,
            builder=args.builder,
            platform=platform,
            dryrun=args.dryrun,
        )
        if built.reused:
            _err("workspace unchanged: image already in the registry")
        print(built.reference)
        return 0


def _follow(lines, final_job) -> int:
    """Stream every node's log lines to stderr, then the job's end; exit code from its state."""
    for node, message in lines:
        _err(f"[node {node}] {message}")
    job = final_job()
    _err(_status_line(job))
    return 0 if job["status"] == "SUCCEEDED" else 1


class Status(Command):
    name = "status"
    help = "print a job's state (one DescribeJobs call)"

    def add_arguments(self, parser):
        parser.add_argument("job", help="job id (or QUEUE:JOB_ID)")

    def run(self, args):
        print(_status_line(_describe(args, args.job)))
        return 0


class Describe(Command):
    name = "describe"
    help = "show a job's details"

    def add_arguments(self, parser):
        parser.add_argument("job")
        parser.add_argument("--json", action="store_true")

    def run(self, args):
        from launcher import jobs

        job = _describe(args, args.job)
        if args.json:
            print(json.dumps(job, indent=2, default=str))
            return 0
        container = (
            job.get("nodeProperties", {}).get("nodeRangeProperties", [{}])[0].get("container", {})
        )
        rows = {
            "job": f"{job['jobId']} ({job['jobName']})",
            "status": job["status"]
            + (f": {job['statusReason']}" if job.get("statusReason") else ""),
            "queue": job.get("jobQueue", "-"),
            "definition": job.get("jobDefinition", "-"),
            "nodes": jobs.node_count(job),
            "image": container.get("image", "-"),
            "attempts": len(job.get("attempts", [])),
        }
        _print_fields(rows)
        return 0


class Logs(Command):
    name = "logs"
    help = "print a job's logs, per node"

    def add_arguments(self, parser):
        parser.add_argument("job")
        parser.add_argument("--node", type=int, help="only this node (default: all)")
        parser.add_argument("--follow", "-f", action="store_true")
        parser.add_argument("--since", help="only the last DURATION, e.g. 10m")

    def run(self, args):
        from launcher import jobs, jobspec, local

        since = jobspec.parse_since(args.since) if args.since else None
        if local.is_local(args.job):
            lines = local.iter_logs(args.job, args.node, args.follow)
        else:
            aws = _aws(args)
            lines = jobs.iter_logs(
                aws, _cluster(args, aws), args.job, args.node, since, args.follow
            )
        for node, message in lines:
            print(message if args.node is not None else f"[node {node}] {message}", flush=True)
        return 0


class Cancel(Command):
    name = "cancel"
    help = "terminate a job in any state"

    def add_arguments(self, parser):
        parser.add_argument("job")

    def run(self, args):
        from launcher import jobs, local

        if local.is_local(args.job):
            job = local.cancel(args.job)
        else:
            job = jobs.cancel(_aws(args), args.job)
        _err(f"cancelled {job['jobId']} ({job['jobName']}, was {job['status']})")
        return 0


class List(Command):
    name = "list"
    help = "list the cluster queue's jobs (active ones unless --all)"

    def add_arguments(self, parser):
        parser.add_argument("--all", action="store_true", help="include finished jobs")
        parser.add_argument("--json", action="store_true")
        parser.add_argument("--local", action="store_true", help="jobs run with run --local")

    def run(self, args):
        from launcher import jobs, local

        if args.local:
            listed = local.list_jobs(include_finished=args.all)
        else:
            aws = _aws(args)
            listed = jobs.list_jobs(aws, _cluster(args, aws), include_finished=args.all)
        if args.json:
            print(json.dumps(listed, indent=2, default=str))
            return 0
        for job in listed:
            print(f"{job['jobId']}  {job['status']:<9}  {job['jobName']}")
        return 0


COMMANDS: tuple[Command, ...] = (
    Outputs(),
    Build(),
    Run(),
    Status(),
    Describe(),
    Logs(),
    Cancel(),
    List(),
)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="launcher",
        description="Run multi-node EFA jobs on the AWS Batch cluster of an efa-batch stack.",
    )
    top.add_argument(
        "--stack",
        default=os.environ.get("LAUNCHER_STACK", DEFAULT_STACK_NAME),
        help="cluster stack (default: $LAUNCHER_STACK or %(default)s)",
    )
    top.add_argument("--profile", help="AWS profile")
    top.add_argument("--region", help="AWS region")
    top.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = top.add_subparsers(dest="command_name", metavar="COMMAND", required=True)
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.help)
        command.add_arguments(p)
        p.set_defaults(handler=command)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.handler.run(args)
    except LauncherError as exc:
        if args.debug:
            raise
        _err(f"launcher: error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
