"""The ``efa_batch`` scheduler's run options (``-cfg KEY=VALUE``, ``.torchxconfig``): what each
means (``run_options``, what ``torchx runopts efa_batch`` prints), and how they are read: the
cluster they name (``where_of``), and the two a file may not give (``from_command_line``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Dict, List  # noqa: UP035 (TorchX compares with typing's)

from torchx.specs import CfgVal, runopts

from launcher.api import default_stack
from launcher.errors import UsageError
from launcher.job.jobspec import DEFAULT_RENDEZVOUS_PORT, EfaMode

NAME = "efa_batch"

# (stack, profile, region, local, host mounts allowed in a local run)
Where = tuple[str, str | None, str | None, bool, bool, bool]

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
    opts.add("share_id", type_=str, default=None, help="fair-share identifier")
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
    return opts


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
    )
