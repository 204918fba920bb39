"""The ``efa_batch`` scheduler's run options (``-cfg KEY=VALUE``, ``.torchxconfig``): what each
means (``run_options``, what ``torchx runopts efa_batch`` prints), and how they are read: the
cluster they name (``where_of``), the two a file may not give (``from_command_line``), and
what TorchX's ``aws_batch`` options became here (``migrated``).

TorchX drops an option its scheduler does not declare: 0.7.0's ``runopts.cfg_from_str`` ignores
an unknown ``-cfg`` key ("Unknown keys are ignored and not returned in the resulting map") and
``torchx.runner.config.load`` skips an unknown ``.torchxconfig`` key with a log warning;
nightly's ``cfg_from_str`` refuses an unknown ``-cfg`` key and its ``load`` skips a file's. So
every ``aws_batch`` option (0.7.0's ``AWSBatchScheduler._run_opts`` and
``DockerWorkspaceMixin.workspace_opts``) is declared here, and ``migrated`` answers each one.
"""

from __future__ import annotations

import getpass
from collections.abc import Mapping
from typing import Dict, List  # noqa: UP035 (TorchX compares with typing's)

from torchx.specs import CfgVal, runopts

from launcher.api import default_stack
from launcher.errors import UsageError
from launcher.job.jobspec import DEFAULT_RENDEZVOUS_PORT, EfaMode
from launcher.stack.cluster import ClusterInfo

NAME = "efa_batch"

# (stack, profile, region, local, host mounts allowed in a local run, privileged in a local
# run, team: None is $LAUNCHER_TEAM, else the stack's only team; launcher.job.teams.choose)
Where = tuple[str, str | None, str | None, bool, bool, bool, str | None]

HOST_MOUNTS_OPTION = "allow_host_mounts"


def run_options() -> runopts:
    """Every run option, its type, default and help (the scheduler's ``_run_opts``)."""
    opts = runopts()
    opts.add("stack", type_=str, default=default_stack(), help="efa-batch cluster stack")
    opts.add("profile", type_=str, default=None, help="AWS profile")
    opts.add("region", type_=str, default=None, help="AWS region")
    opts.add(
        "pool",
        type_=str,
        default=None,
        help="the stack's pool to run in (default: the pool of -h aws_TYPE's instance type, "
        "else the default pool)",
    )
    opts.add(
        "team",
        type_=str,
        default=None,
        help="the team to submit as, on a stack with teams: its pools, roles, share and "
        "directory (default: $LAUNCHER_TEAM, else the stack's only team)",
    )
    opts.add(
        "share_id",
        type_=str,
        default=None,
        help="fair-share identifier (with teams: the team's)",
    )
    opts.add("priority", type_=int, default=None, help="fair-share scheduling priority")
    opts.add(
        "image_repo",
        type_=str,
        default=None,
        help="registry HOST[:PORT] to push workspace images to instead of the stack's ECR "
        "(same repository path; $LAUNCHER_REGISTRY)",
    )
    opts.add(
        "efa",
        type_=str,
        default=None,
        help=" | ".join(m.value for m in EfaMode)
        + " (default: require for multi-node jobs on a pool with EFA, auto for one node)",
    )
    opts.add("port", type_=int, default=DEFAULT_RENDEZVOUS_PORT, help="rendezvous port")
    opts.add("local", type_=bool, default=False, help="run on the local Docker engine")
    opts.add(
        HOST_MOUNTS_OPTION,
        type_=bool,
        default=False,
        help="with local=True: the app may mount this machine's paths and devices "
        "(BindMount, DeviceMount), which give it root here; on the command line only, "
        "never from .torchxconfig (on AWS the stack's allow_privileged decides)",
    )
    opts.add(
        "secrets",
        type_=Dict[str, str],  # noqa: UP006 (TorchX compares the type with typing's)
        default=None,
        help="NAME:SECRET;...: variables read at start from Secrets Manager (name or ARN, "
        "NAME#KEY) or ssm:PARAMETER; only those the stack's job_secrets allow",
    )
    opts.add(
        "ulimits",
        type_=Dict[str, str],  # noqa: UP006
        default=None,
        help="NAME:SOFT[:HARD];... over the launcher's memlock, stack, nofile",
    )
    opts.add(
        "tmpfs",
        type_=Dict[str, str],  # noqa: UP006
        default=None,
        help="DST:SIZE;... memory-backed directories (e.g. /scratch:8g)",
    )
    opts.add(
        "privileged",
        type_=bool,
        default=False,
        help="root on the node (only where the stack sets allow_privileged); with "
        "local=True, root on this machine: on the command line only, never from .torchxconfig",
    )
    opts.add(
        "after",
        type_=List[str],  # noqa: UP006
        default=None,
        help="job ids (or efa_batch:// app handles) this app waits for (AWS Batch dependsOn, "
        "at most 20)",
    )
    opts.add(
        "stream_base",
        type_=bool,
        default=False,
        help="send base layers through this machine instead of a copy job",
    )
    aws_batch_options(opts)
    return opts


def _user() -> str | None:
    """aws_batch's default ``user``: ``getpass.getuser()`` (None where this machine's user has
    no name, where getuser raises)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def aws_batch_options(opts: runopts) -> None:
    """TorchX 0.7.0 ``aws_batch``'s options that ``run_options`` lacks, declared so TorchX
    hands them over (an undeclared one is dropped) and ``migrated`` can answer them; each
    help says what it became."""
    opts.add(
        "queue",
        type_=str,
        default=None,
        help="aws_batch's queue: a queue of the stack (name or ARN) runs in the pool whose "
        "queue it is; use pool instead",
    )
    opts.add(
        "user",
        type_=str,
        default=_user(),
        help="the username the job is tagged with (torchx.pytorch.org/user, as aws_batch); "
        "default: getpass.getuser()",
    )
    opts.add(
        "job_role_arn",
        type_=str,
        default=None,
        help="aws_batch's job role: refused; jobs run as the stack's job role, which the "
        "platform team widens with the stack settings data_buckets, job_secrets and "
        "job_role_policies",
    )
    opts.add(
        "execution_role_arn",
        type_=str,
        default=None,
        help="aws_batch's execution role: refused; ECS pulls images and writes logs as the "
        "stack's execution role (secrets: the stack's job_secrets)",
    )
    opts.add(
        "quiet",
        type_=bool,
        default=False,
        help="aws_batch's quiet Docker build: always in effect, efa_batch builds no image "
        "with Docker (workspaces are a layer patched in the registry) and prints no build log",
    )


def str_option(cfg: Mapping[str, CfgVal], key: str) -> str | None:
    """An option's text, None where it is unset or empty."""
    value = cfg.get(key)
    return None if value in (None, "") else str(value)


def from_command_line(cfg: Mapping[str, CfgVal], option: str) -> bool:
    """A local run's ``allow_host_mounts`` or ``privileged``, taken from the command line
    only: ``torchx run`` fills the run options it was not given from ``.torchxconfig`` in the
    working directory and the home directory (torchx.runner.config.apply, find_configs), and a
    cloned repository's file must not let its own app be root on this machine (a BindMount of
    ``/``, a privileged container). UsageError when a file names it."""
    if not cfg.get(option):
        return False
    import configparser

    from torchx.runner import config

    for path in config.find_configs():
        parser = configparser.ConfigParser()
        parser.read(path)
        if parser.has_option(NAME, option):
            raise UsageError(
                f"{path}: [{NAME}] {option}: a config file cannot make a local app root on this "
                f"machine; give -cfg {option}=True on the command line instead"
            )
    return True


def where_of(cfg: Mapping[str, CfgVal]) -> Where:
    """The cluster ``cfg`` names, and how it runs jobs."""
    local = bool(cfg.get("local"))
    return (
        str_option(cfg, "stack") or default_stack(),
        str_option(cfg, "profile"),
        str_option(cfg, "region"),
        local,
        local and from_command_line(cfg, HOST_MOUNTS_OPTION),
        local and from_command_line(cfg, "privileged"),
        str_option(cfg, "team"),
    )


# aws_batch options refused here, and why: what replaces each, in a user's words.
_REFUSED = {
    "job_role_arn": "jobs run as the stack's job role ({arn}); to give jobs other AWS "
    "permissions, ask the platform team to widen it with the stack settings data_buckets, "
    "job_secrets or job_role_policies",
    "execution_role_arn": "ECS pulls the image and writes the logs as the stack's execution "
    "role ({arn}); secrets come through the stack's job_secrets (-cfg secrets)",
}


def _given(option: str, value: str) -> str:
    """Where ``option`` came from, as a message names it: a ``.torchxconfig`` file's section
    when a file gives that value (``-cfg`` wins over a file, so a file holding another value
    did not give it), else ``-cfg``."""
    import configparser

    from torchx.runner import config

    for path in config.find_configs():
        parser = configparser.ConfigParser()
        parser.read(path)
        if parser.has_option(NAME, option) and parser.get(NAME, option) == value:
            return f"{path}: [{NAME}] {option}"
    return f"-cfg {option}"


def _pool_of_queue(queue: str, cluster: ClusterInfo) -> str | None:
    """The pool whose Batch queue ``queue`` names (by name or ARN), if one of the stack's."""
    for pool in cluster.pools:
        if queue in (pool.queue_name, pool.queue_arn):
            return pool.name
    return None


def migrated(cfg: Mapping[str, CfgVal], cluster: ClusterInfo) -> dict[str, CfgVal]:
    """``cfg`` with TorchX ``aws_batch``'s options (0.7.0 aws_batch_scheduler.py ``_run_opts``,
    docker_workspace.py ``workspace_opts``) answered: ``queue`` becomes the ``pool`` whose queue
    it is; ``job_role_arn`` and ``execution_role_arn`` are refused unless they name the stack's
    own roles; ``user``, ``share_id``, ``priority``, ``privileged`` and ``quiet`` stay. Pure but
    for reading ``.torchxconfig`` to say where a refused option came from.

    UsageError, one line, for a queue that is not one of the stack's pools' or that names
    another pool than ``pool``, and for another role."""
    out = dict(cfg)
    queue = str_option(out, "queue")
    if queue is not None:
        pool = _pool_of_queue(queue, cluster)
        if pool is None:
            pools = ", ".join(f"{p.name} (queue {p.queue_name})" for p in cluster.pools)
            raise UsageError(
                f"{_given('queue', queue)}: {queue!r} is not a queue of stack "
                f"{cluster.stack_name}; give -cfg pool=NAME, one of its pools: {pools}"
            )
        named = str_option(out, "pool")
        if named is not None and named != pool:
            raise UsageError(
                f"{_given('queue', queue)}: {queue!r} is the queue of pool {pool}, but "
                f"-cfg pool={named}; give pool alone"
            )
        out["pool"] = pool
    roles = {"job_role_arn": cluster.job_role_arn, "execution_role_arn": cluster.execution_role_arn}
    for option, why in _REFUSED.items():
        value = str_option(out, option)
        if value is not None and value != roles[option]:
            raise UsageError(f"{_given(option, value)}: refused; {why.format(arn=roles[option])}")
    return out
