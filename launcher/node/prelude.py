"""The POSIX shell that runs in front of the user's command on every node, and its words.

``/bin/sh -c PRELUDE launcher CMD...``: the prelude does what Batch leaves to the job
(rendezvous, the EFA userspace check, node health, the fabric guard, the Capacity Block's
checkpoint signal, restarts that resume through the node watch, NCCL's transport in the log),
then runs CMD. What it does and why is written beside the shell, in launcher/node/prelude.sh,
and the node watch's in launcher/node/watch/.

This module holds what the launcher and the script share: the exit codes, the log line and the
environment names the rest of the launcher reads or sets (launcher.job.jobdef's retry rules,
launcher.job.lost_nodes, launcher.local, infra's node replacer), and the values the script's
``@NAME@`` placeholders stand for. It assembles SCRIPT once, at import, from prelude.sh and the
watch's two programs (launcher.node.assemble says how the files become the same bytes every job
definition carried when they were f-strings; tests/node/test_assembled.py holds that), and
``command`` puts it in front of a job's command.

The environment names the shell reads (LAUNCHER_WATCH_TOKEN, LAUNCHER_REHEARSAL,
LAUNCHER_NCCL_DIR) are written out in prelude.sh, where ``${NAME:-}`` must be shell; the
assembly checks that the script names each of them.
"""

from __future__ import annotations

import re

from launcher.node import assemble
from launcher.node.watch import (
    HEARTBEAT_SECONDS,
    HELLO_SECONDS,
    LOST_AFTER_SECONDS,
    PENDING_PEERS,
    RETRY_SECONDS,
    START_SECONDS,
    VALUES,
    WATCH_TOKEN_ENV,
    WELCOME,
)

__all__ = [
    "ARGV0",
    "BAD_HOST_EXIT",
    "CHECKPOINT_TIMER",
    "CONTRACT",
    "EFA_CHECK",
    "EFA_REQUIRED_EXIT",
    "GPU_CHECK",
    "HEARTBEAT_SECONDS",
    "HELLO_SECONDS",
    "LIBFABRIC_DIRS",
    "LOST_AFTER_SECONDS",
    "LOST_NODES_LINE",
    "MONITOR",
    "MONITOR_MAIN",
    "MONITOR_WORKER",
    "NCCL_DIR_ENV",
    "NCCL_LOG_DIR",
    "NCCL_WATCH",
    "NODE_LOST_EXIT",
    "PENDING_PEERS",
    "PLUGIN_DIRS",
    "PLUGIN_NAMES",
    "PRIVATE",
    "REHEARSAL_ENV",
    "RENDEZVOUS",
    "REPARSE_GUARD",
    "RETRY_SECONDS",
    "RUN",
    "SCRIPT",
    "SECRETS",
    "SECTIONS",
    "START_GATE",
    "START_SECONDS",
    "SYSTEM_LIB_DIRS",
    "WATCH_TOKEN_ENV",
    "WELCOME",
    "command",
    "user_command",
]

EFA_REQUIRED_EXIT = 78  # EX_CONFIG: the image cannot do what the job asked
CONTRACT = "docs/jobs.md, 'The base image contract'"  # where a failed check sends the user
ARGV0 = "launcher"  # the script's $0: how it knows it runs as the command it was given
NODE_LOST_EXIT = 75  # EX_TEMPFAIL: a node was lost; the job's retry rules try again
# This host is bad (a GPU or EFA device missing, an uncorrected ECC error, fewer NICs than the
# type has): the job's retry rules try again, and the stack's node replacer (infra) drains and
# terminates the instance so the retry lands elsewhere. Outside sysexits' 64-78 and below 126,
# so no shell, signal or library gives it another meaning.
BAD_HOST_EXIT = 79
# How the main node says which nodes it lost or never saw start (launcher.api reads it back).
LOST_NODES_LINE = re.compile(r"^launcher: node\(s\) [\d ]+(lost|never started)")
NCCL_LOG_DIR = "/tmp/launcher-nccl"
# Where the prelude looks for NCCL's files instead (the job definition's NCCL_DEBUG_FILE then
# names it too): for tests that run the prelude on a machine whose /tmp others share.
NCCL_DIR_ENV = "LAUNCHER_NCCL_DIR"
# What the local backend sets in every container, so the prelude knows a rehearsal on a machine
# without EFA from a node on AWS (launcher.local.containers).
REHEARSAL_ENV = "LAUNCHER_REHEARSAL"
# Where the EFA installer, AWS's DLAMIs/DLCs and NGC builds put aws-ofi-nccl (newest first).
PLUGIN_DIRS = (
    "/opt/amazon/ofi-nccl/lib",
    "/opt/amazon/aws-ofi-nccl/lib",
    "/opt/aws-ofi-nccl/lib",
    "/opt/aws-ofi-nccl/install/lib",
)
# libnccl-net-ofi.so since aws-ofi-nccl 1.14 (loaded with NCCL_NET_PLUGIN=ofi); the older
# libnccl-net.so is what NCCL loads when NCCL_NET_PLUGIN is unset.
PLUGIN_NAMES = ("libnccl-net-ofi.so", "libnccl-net-aws-ofi.so", "libnccl-net.so")
LIBFABRIC_DIRS = ("/opt/amazon/efa/lib", "/opt/amazon/efa/lib64")
SYSTEM_LIB_DIRS = (
    "/usr/local/lib",
    "/usr/lib",
    "/usr/lib64",
    "/lib",
    "/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
)

# The node watch's programs, as python3 -c gets them (launcher/node/watch/).
MONITOR_MAIN = assemble.program(assemble.read("launcher.node.watch", "main_node.py"), VALUES)
MONITOR_WORKER = assemble.program(assemble.read("launcher.node.watch", "worker.py"), VALUES)


def _script() -> dict[str, str]:
    """prelude.sh's sections, assembled (``## === NAME ===`` names them, in order)."""
    values = {
        "ARGV0": ARGV0,
        "CONTRACT": CONTRACT,
        "EFA_REQUIRED_EXIT": str(EFA_REQUIRED_EXIT),
        "BAD_HOST_EXIT": str(BAD_HOST_EXIT),
        "NODE_LOST_EXIT": str(NODE_LOST_EXIT),
        "START_SECONDS": str(START_SECONDS),
        "NCCL_LOG_DIR": NCCL_LOG_DIR,
        "SYSTEM_LIB_PATH": ":".join(SYSTEM_LIB_DIRS),  # for a case pattern over LD_LIBRARY_PATH
        "SYSTEM_LIB_DIRS": " ".join(SYSTEM_LIB_DIRS),  # for a for loop
        "LIBFABRIC_DIRS": " ".join(LIBFABRIC_DIRS),
        "PLUGIN_DIRS": " ".join(PLUGIN_DIRS),
        "PLUGIN_NAMES": " ".join(PLUGIN_NAMES),
        "MONITOR_MAIN": MONITOR_MAIN,
        "MONITOR_WORKER": MONITOR_WORKER,
    }
    parts = assemble.sections(assemble.read("launcher.node", "prelude.sh"))
    done = {name: assemble.shell(text, values) for name, text in parts.items()}
    for name in (WATCH_TOKEN_ENV, REHEARSAL_ENV, NCCL_DIR_ENV):
        if "${" + name + ":-" not in "".join(done.values()):
            raise ValueError(f"prelude.sh does not read ${name}, which the launcher sets")
    return done


# The script by its sections (prelude.sh says what each does), in the order they run.
SECTIONS = _script()
REPARSE_GUARD = SECTIONS["REPARSE_GUARD"]  # first: for an entrypoint that parses it again
SECRETS = SECTIONS["SECRETS"]
START_GATE = SECTIONS["START_GATE"]
PRIVATE = SECTIONS["PRIVATE"]
RENDEZVOUS = SECTIONS["RENDEZVOUS"]
MONITOR = SECTIONS["MONITOR"]
GPU_CHECK = SECTIONS["GPU_CHECK"]
EFA_CHECK = SECTIONS["EFA_CHECK"]
NCCL_WATCH = SECTIONS["NCCL_WATCH"]
CHECKPOINT_TIMER = SECTIONS["CHECKPOINT_TIMER"]
RUN = SECTIONS["RUN"]
SCRIPT = "".join(SECTIONS.values())


def command(user_command: list[str] | tuple[str, ...]) -> list[str]:
    """The container command: the prelude, then the user's command as its arguments."""
    return ["/bin/sh", "-c", SCRIPT, ARGV0, *user_command]


def user_command(container_command: list[str]) -> list[str]:
    """The user's command back out of a container command made by ``command``."""
    return list(container_command[4:])
