"""What the user asked for, as a frozen value, and the parsers for each command-line flag.

Every parser raises ``UsageError`` with one line that says what was wrong and what is allowed.
"""

from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass

from launcher.errors import UsageError
from launcher.job.job_name import default_name as default_name  # its callers import it here
from launcher.job.setting_error import Setting, SettingError
from launcher.job.shapes import Dependency, check_array, check_dependencies
from launcher.stack.secrets import SecretError, SecretRef

DEFAULT_EFS_PATH = "/mnt/efs"
# Where nodes mount the stack's FSx for Lustre file system (infra/lustre.py), and where jobs
# see it unless --mount type=fsx,dst= says otherwise.
FSX_NODE_PATH = "/fsx"
DEFAULT_FSX_PATH = "/fsx"
DEFAULT_RENDEZVOUS_PORT = 29500
DEFAULT_ATTEMPTS = 3
# In a Capacity Block (launcher.job.capacity): the signal the command gets before EC2 ends the
# block's instances, and how long before. Names only: a signal's number differs between
# architectures for some signals, and a typo in a number would kill the command outright.
CHECKPOINT_SIGNALS = ("USR1", "USR2", "INT", "TERM", "HUP")
DEFAULT_CHECKPOINT_SIGNAL = "USR1"
DEFAULT_CHECKPOINT_LEAD = 600  # seconds
IMAGE_ENV = "LAUNCHER_IMAGE"  # the base image when none is given


class MountKind(str, enum.Enum):
    EFS = "efs"  # the cluster's file system, through its access point
    FSX = "fsx"  # the cluster's FSx for Lustre file system, as the node mounted it
    BIND = "bind"  # a directory of the node
    DEVICE = "device"  # a device file of the node

    def __str__(self) -> str:
        return self.value


class EfaMode(str, enum.Enum):
    """What a job asks of EFA. Unset (``JobSpec.efa`` None), the pool decides
    (``launcher.job.validation.in_pool``): ``require`` for a multi-node job on a pool with EFA,
    ``auto`` for a one-node job there (NCCL stays on the node's NVLink), ``off`` elsewhere."""

    AUTO = "auto"  # EFA devices, a warning when the image lacks libfabric or aws-ofi-nccl
    REQUIRE = "require"  # ... and the job fails instead: the fabric guard (launcher.node.prelude)
    OFF = "off"  # no EFA

    @property
    def on(self) -> bool:
        return self is not EfaMode.OFF

    def __str__(self) -> str:
        return self.value


# A device's permissions: the letters of --mount perm= and Batch's words for them.
DEVICE_PERMISSIONS = {"r": "READ", "w": "WRITE", "m": "MKNOD"}


def base_image(image: str | None) -> str:
    """The base image given, else $LAUNCHER_IMAGE; UsageError when there is none."""
    found = image or os.environ.get(IMAGE_ENV)
    if not found:
        raise UsageError(f"--image: no base image; pass --image or set {IMAGE_ENV}")
    return found


MIN_TIMEOUT_SECONDS = 60  # AWS Batch refuses attemptDurationSeconds below 60

# AWS Batch limits checked before anything is created (Batch API reference: SubmitJob,
# RegisterJobDefinition, NodeRangeProperty; multi-node parallel jobs, node groups).
MAX_TAGS = 50  # job + job definition tags together; over 50 Batch fails the job
# Two are the launcher's own: efa-batch:stack, and efa-batch:checkpoint on a resubmitted job.
# The stack's node replacer adds one, efa-batch:replaced, only while the job has room for it
# (launcher.job.replacements): with 48 of the user's, a first submission has; a resubmission not.
MAX_USER_TAGS = MAX_TAGS - 2
MAX_NODE_GROUPS = 5
_SHARE_ID = re.compile(r"^[A-Za-z0-9]{1,255}\*?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_JOB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
_TAG_KEY = re.compile(r"^[\w.:/=+\-@ ]{1,128}$")
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s?)?$")
_SIZE = re.compile(r"^(\d+)([kmgt]?)(i?b)?$", re.IGNORECASE)


@dataclass(frozen=True)
class Mount:
    kind: MountKind
    dst: str
    src: str | None = None
    readonly: bool = False
    permissions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", MountKind(self.kind))

    @property
    def of_host(self) -> bool:
        """A path or device of the machine the job runs on (its node, or this machine in a
        local run), not the cluster's file systems."""
        return self.kind in (MountKind.BIND, MountKind.DEVICE)

    def __str__(self) -> str:
        """As ``--mount`` takes it: ``type=bind,src=/x,dst=/y,readonly``."""
        fields = [f"type={self.kind}"]
        if self.src is not None:
            fields.append(f"src={self.src}")
        fields.append(f"dst={self.dst}")
        if self.permissions:
            letters = {word: letter for letter, word in DEVICE_PERMISSIONS.items()}
            fields.append("perm=" + "".join(letters[p] for p in self.permissions))
        if self.readonly:
            fields.append("readonly")
        return ",".join(fields)


# The limits a container may set (Batch API, Ulimit name: "core | cpu | data | fsize | locks |
# memlock | msgqueue | nice | nofile | nproc | rss | rtprio | rttime | sigpending | stack");
# values are Integers, -1 is unlimited.
ULIMIT_NAMES = (
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "memlock",
    "msgqueue",
    "nice",
    "nofile",
    "nproc",
    "rss",
    "rtprio",
    "rttime",
    "sigpending",
    "stack",
)
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Ulimit:
    name: str
    soft: int  # -1: unlimited
    hard: int

    def as_batch(self) -> dict[str, str | int]:
        return {"name": self.name, "softLimit": self.soft, "hardLimit": self.hard}


@dataclass(frozen=True)
class Tmpfs:
    """A memory-backed directory of the container (Batch linuxParameters.tmpfs)."""

    dst: str
    size_mib: int


@dataclass(frozen=True)
class Secret:
    """An environment variable whose value the ECS agent reads from Secrets Manager or SSM
    when the container starts (Batch ``secrets``): the job carries the reference only."""

    env: str
    ref: SecretRef
    text: str  # the reference as the user gave it, for messages and local runs


@dataclass(frozen=True)
class NodeGroup:
    """Nodes ``first``..``last`` of the job with their own image, command, GPUs or env
    (a Batch node range). Unset fields take the job's."""

    first: int
    last: int
    image: str | None = None
    command: tuple[str, ...] | None = None
    gpus_per_node: int | None = None
    env: tuple[tuple[str, str], ...] = ()
    name: str | None = None  # the TorchX role, for describe and logs
    # The range's own mounts (a TorchX role's), None: the job's (``JobSpec.mounts_of``).
    mounts: tuple[Mount, ...] | None = None

    @property
    def size(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True)
class JobSpec:
    name: str
    command: tuple[str, ...]
    image: str
    nodes: int = 1
    gpus_per_node: int | None = None  # None: every GPU of the instance
    env: tuple[tuple[str, str], ...] = ()
    mounts: tuple[Mount, ...] = ()
    efa: EfaMode | None = None  # None: the pool's default (EfaMode)
    shm_mib: int | None = None  # None: the instance's default
    timeout_seconds: int | None = None
    attempts: int = DEFAULT_ATTEMPTS
    # Whether the command's own failures are retried too (up to ``attempts`` in all), not only
    # a lost or bad host (launcher.job.jobdef.retry_rules): a TorchX role's max_retries.
    retry_errors: bool = False
    share_id: str | None = None
    priority: int | None = None
    tags: tuple[tuple[str, str], ...] = ()
    torchrun: bool = False
    rendezvous_port: int = DEFAULT_RENDEZVOUS_PORT
    groups: tuple[NodeGroup, ...] = ()
    # Restarts that resume: a node watch that turns a lost node into another attempt, and a
    # checkpoint directory kept across attempts (launcher.node.prelude). None: on with torchrun.
    restarts: bool | None = None
    secrets: tuple[Secret, ...] = ()
    ulimits: tuple[Ulimit, ...] = ()  # over the defaults the launcher needs (launcher.job.jobdef)
    tmpfs: tuple[Tmpfs, ...] = ()
    privileged: bool = False
    # Shapes (launcher.job.shapes): N one-node children, and the jobs this one waits for.
    array_size: int | None = None
    after: tuple[Dependency, ...] = ()
    pool: str | None = None  # the stack's compute pool (its queue); None: the default pool
    # In a Capacity Block: what the command is sent, this long before EC2 ends the instances.
    checkpoint_signal: str = DEFAULT_CHECKPOINT_SIGNAL
    checkpoint_lead_seconds: int = DEFAULT_CHECKPOINT_LEAD

    @property
    def restarts_on(self) -> bool:
        return self.torchrun if self.restarts is None else self.restarts

    @property
    def efa_on(self) -> bool:
        """EFA devices asked for (decided: after ``launcher.job.validation.in_pool``)."""
        return self.efa is not None and self.efa.on

    def mounts_of(self, group: NodeGroup | None) -> tuple[Mount, ...]:
        """The mounts of a node range: its own when it has them, else the job's."""
        return self.mounts if group is None or group.mounts is None else group.mounts

    @property
    def mount_sets(self) -> tuple[tuple[Mount, ...], ...]:
        """Each distinct set of mounts some node of the job gets."""
        sets = [self.mounts_of(g) for g in self.groups] or [self.mounts]
        return tuple(dict.fromkeys(sets))

    @property
    def host_mounts(self) -> tuple[Mount, ...]:
        """The job's own mounts of its host's paths and devices (``type=bind``,
        ``type=device``), on any of its nodes; the mounts the launcher makes (EFS, FSx, EFA
        devices) are not here."""
        every = dict.fromkeys(m for mounts in self.mount_sets for m in mounts)
        return tuple(m for m in every if m.of_host)

    @property
    def single_node(self) -> bool:
        """One node: a container job, not a one-node multi-node job."""
        return self.nodes == 1

    def __post_init__(self) -> None:
        if not self.command:
            raise UsageError(
                "no command given; put it after --, e.g. launcher run -- python train.py"
            )
        if not _JOB_NAME.match(self.name):
            raise UsageError(
                f"--name {self.name!r}: use 1-128 letters, digits, '-' or '_', starting with a "
                "letter or digit"
            )
        if self.nodes < 1:
            raise UsageError(f"--nodes {self.nodes}: a job needs at least 1 node")
        if not 1 <= self.attempts <= 10:
            raise UsageError(f"--retries {self.attempts}: allowed 1-10 (AWS Batch attempts)")
        if self.efa is not None:
            object.__setattr__(self, "efa", parse_efa(self.efa))  # or the flag's str
        object.__setattr__(self, "checkpoint_signal", parse_signal(self.checkpoint_signal))
        if self.checkpoint_lead_seconds < 0:
            raise UsageError(
                f"--checkpoint-lead {self.checkpoint_lead_seconds}: must be 0 seconds or more"
            )
        if self.gpus_per_node is not None and self.gpus_per_node < 0:
            raise UsageError(f"--gpus-per-node {self.gpus_per_node}: must be 0 or more")
        if self.priority is not None and not 0 <= self.priority <= 9999:
            raise SettingError(Setting("priority", self.priority), ": allowed 0-9999")
        if not 1024 <= self.rendezvous_port <= 65534:
            raise SettingError(
                Setting("port", self.rendezvous_port),
                ": allowed 1024-65534 (the next port is the node watch's)",
            )
        if self.share_id is not None and not _SHARE_ID.match(self.share_id):
            raise SettingError(
                Setting("share_id", repr(self.share_id)),
                ": use 1-255 letters and digits (AWS Batch)",
            )
        if len(dict(self.tags)) > MAX_USER_TAGS:
            raise UsageError(
                f"--tag: {len(dict(self.tags))} tags and the launcher's own exceed AWS Batch's "
                f"{MAX_TAGS} per job; allowed: at most {MAX_USER_TAGS}"
            )
        for key, _ in self.env:
            parse_env(f"{key}=")
        self._check_container_settings()
        self._check_groups()
        check_array(self.array_size, self.nodes)
        check_dependencies(self.after, self.array_size)

    def _check_container_settings(self) -> None:
        names = [s.env for s in self.secrets]
        clash = sorted(
            {n for n in names if names.count(n) > 1} | (set(names) & dict(self.env).keys())
        )
        if clash:
            raise UsageError(
                f"--secret {clash[0]}: the variable is given twice (by --secret or --env); "
                "give each once"
            )
        limits = [u.name for u in self.ulimits]
        if len(set(limits)) != len(limits):
            raise UsageError("--ulimit: a limit is given twice; give each NAME once")
        # One file system per path on a node: a second would hide the first (devices
        # included: two at one /dev path is a typo too).
        for mounts in self.mount_sets:
            flags = [("--tmpfs", t.dst) for t in self.tmpfs] + [("--mount", m.dst) for m in mounts]
            paths = [path for _, path in flags]
            twice = [(flag, path) for flag, path in flags if paths.count(path) > 1]
            if twice:
                both = " and ".join(sorted({flag for flag, path in twice if path == twice[0][1]}))
                raise UsageError(
                    f"{both}: two of them use the path {twice[0][1]}; give each its own"
                )

    def _check_groups(self) -> None:
        if not self.groups:
            return
        if len(self.groups) > MAX_NODE_GROUPS:
            raise UsageError(
                f"node groups: {len(self.groups)}; AWS Batch allows {MAX_NODE_GROUPS} node "
                "ranges per multi-node job"
            )
        covered = sorted((g.first, g.last) for g in self.groups)
        expected = 0
        for first, last in covered:
            if first != expected or last < first:
                raise UsageError(
                    f"node groups {covered}: must cover nodes 0-{self.nodes - 1} in order, "
                    "each node once"
                )
            expected = last + 1
        if expected != self.nodes:
            raise UsageError(
                f"node groups {covered}: must cover nodes 0-{self.nodes - 1}, each node once"
            )
        for group in self.groups:
            if group.gpus_per_node is not None and group.gpus_per_node < 0:
                raise UsageError(f"node group {group.first}-{group.last}: GPUs must be 0 or more")
            for key, _ in group.env:
                parse_env(f"{key}=")


def parse_env(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not _ENV_NAME.match(key):
        raise UsageError(
            f"--env {item!r}: expected NAME=VALUE with NAME like [A-Za-z_][A-Za-z0-9_]*"
        )
    if key.startswith("AWS_BATCH"):
        raise UsageError(f"--env {key}: names starting with AWS_BATCH are reserved by AWS Batch")
    return key, value


def parse_efa(value: str) -> EfaMode:
    try:
        return EfaMode(value)
    except ValueError:
        allowed = ", ".join(m.value for m in EfaMode)
        raise UsageError(f"--efa {value!r}: allowed {allowed}") from None


def valid_tag(key: str, value: str) -> bool:
    """A tag AWS Batch takes: key 1-128 characters of letters, digits, spaces and
    ``_.:/=+-@``, not ``aws:*``; value at most 256 characters."""
    return bool(_TAG_KEY.match(key)) and len(value) <= 256 and not key.startswith("aws:")


def parse_tag(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not valid_tag(key, value):
        raise UsageError(
            f"--tag {item!r}: expected KEY=VALUE (key 1-128 chars, not aws:*; value <= 256)"
        )
    return key, value


def _seconds(text: str, flag: str, examples: str) -> int:
    match = _DURATION.match(text.strip().lower())
    if not text.strip() or not match or not any(match.groups()):
        raise UsageError(f"{flag} {text!r}: expected a duration like {examples}")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def parse_duration(text: str) -> int:
    """``90m``, ``1h30m``, ``45s``, ``3600`` -> seconds (at least 60)."""
    total = _seconds(text, "--timeout", "90m, 2h, 1h30m or 3600s")
    if total < MIN_TIMEOUT_SECONDS:
        raise UsageError(f"--timeout {text!r}: AWS Batch needs at least 60 seconds")
    return total


def parse_lead(text: str) -> int:
    """``10m``, ``90s``, ``0`` -> seconds (``--checkpoint-lead``: no lower bound)."""
    return _seconds(text, "--checkpoint-lead", "10m, 90s or 1h")


def parse_signal(text: str) -> str:
    """``USR1``, ``SIGUSR1``, ``usr1`` -> ``USR1`` (the name ``kill -s`` takes)."""
    name = str(text).strip().upper().removeprefix("SIG")
    if name not in CHECKPOINT_SIGNALS:
        allowed = ", ".join(CHECKPOINT_SIGNALS)
        raise UsageError(f"--checkpoint-signal {text!r}: allowed {allowed} (with or without SIG)")
    return name


def parse_since(text: str) -> int:
    """``10m``, ``2h``, ``30s`` -> seconds back from now (no lower bound)."""
    return _seconds(text, "--since", "10m, 2h or 30s")


def parse_size_mib(text: str, flag: str = "--shm-size") -> int:
    """``64g``, ``512m``, ``1024`` (MiB) -> MiB."""
    match = _SIZE.match(text.strip())
    if not match:
        raise UsageError(f"{flag} {text!r}: expected a size like 512m, 64g or 1024 (MiB)")
    number, unit = int(match.group(1)), match.group(2).lower()
    mib = {
        "": number,
        "k": number // 1024,
        "m": number,
        "g": number * 1024,
        "t": number * 1024 * 1024,
    }[unit]
    if mib < 1:
        raise UsageError(f"{flag} {text!r}: must be at least 1 MiB")
    return mib


def parse_mount(text: str) -> Mount:
    """``type=efs,dst=/data`` | ``type=fsx,dst=/fsx`` | ``type=bind,src=/x,dst=/y[,readonly]`` |
    ``type=device,src=/dev/x[,dst=/dev/y][,perm=rwm]``."""
    fields: dict[str, str] = {}
    flags: set[str] = set()
    for part in filter(None, text.split(",")):
        key, sep, value = part.partition("=")
        if sep:
            fields[key.strip()] = value.strip()
        else:
            flags.add(key.strip())
    kind_text = fields.pop("type", "")
    usage = (
        "expected type=efs,dst=PATH | type=fsx,dst=PATH | type=bind,src=PATH,dst=PATH[,readonly]"
        " | type=device,src=PATH[,dst=PATH][,perm=rwm]"
    )
    try:
        kind = MountKind(kind_text)
    except ValueError:
        raise UsageError(f"--mount {text!r}: unknown type {kind_text!r}; {usage}") from None
    src, dst = fields.pop("src", None), fields.pop("dst", None)
    readonly = bool(flags & {"readonly", "ro"})
    flags -= {"readonly", "ro"}
    perm = fields.pop("perm", None)
    if fields or flags:
        extra = ", ".join(sorted([*fields, *flags]))
        raise UsageError(f"--mount {text!r}: unknown option {extra}; {usage}")
    if kind is MountKind.DEVICE:
        if not src:
            raise UsageError(f"--mount {text!r}: a device needs src=; {usage}")
        perm = perm or "rwm"
        if not perm or set(perm) - set(DEVICE_PERMISSIONS):
            raise UsageError(f"--mount {text!r}: perm= takes letters from rwm")
        return Mount(MountKind.DEVICE, dst or src, src, permissions=device_permissions(perm))
    if perm is not None:
        raise UsageError(f"--mount {text!r}: perm= applies to type=device only")
    if not dst or not dst.startswith("/"):
        raise UsageError(f"--mount {text!r}: dst= must be an absolute path; {usage}")
    if kind is MountKind.BIND:
        if not src or not src.startswith("/"):
            raise UsageError(f"--mount {text!r}: src= must be an absolute host path; {usage}")
        return Mount(MountKind.BIND, dst, src, readonly=readonly)
    if src:
        raise UsageError(f"--mount {text!r}: type={kind} takes no src= (it is the cluster's)")
    return Mount(kind, dst, readonly=readonly)


def parse_secret(item: str) -> Secret:
    """``NAME=SECRET``: the variable and its reference (launcher.stack.secrets)."""
    key, sep, text = item.partition("=")
    if not sep or not text or not _ENV_NAME.match(key):
        raise UsageError(
            f"--secret {item!r}: expected NAME=SECRET with NAME like [A-Za-z_][A-Za-z0-9_]* and "
            "SECRET a Secrets Manager name or ARN, or ssm:PARAMETER"
        )
    if key.startswith("AWS_BATCH"):
        raise UsageError(f"--secret {key}: names starting with AWS_BATCH are reserved by AWS Batch")
    try:
        return Secret(key, SecretRef.parse(text), text)
    except SecretError as exc:
        raise UsageError(f"--secret {key}: {exc}") from None


def _limit(text: str, item: str) -> int:
    if text.lower() in ("-1", "unlimited"):
        return -1
    if not text.isdigit() or int(text) > _INT32_MAX:
        raise UsageError(
            f"--ulimit {item!r}: limits are integers 0-{_INT32_MAX}, or unlimited (-1)"
        )
    return int(text)


def parse_ulimit(item: str) -> Ulimit:
    """``NAME=SOFT[:HARD]`` (HARD defaults to SOFT; ``unlimited`` or -1 for no limit)."""
    name, sep, values = item.partition("=")
    if not sep or name not in ULIMIT_NAMES:
        raise UsageError(
            f"--ulimit {item!r}: expected NAME=SOFT[:HARD] with NAME one of "
            + ", ".join(ULIMIT_NAMES)
        )
    soft_text, _, hard_text = values.partition(":")
    soft = _limit(soft_text, item)
    hard = _limit(hard_text, item) if hard_text else soft
    if hard != -1 and (soft == -1 or soft > hard):
        raise UsageError(f"--ulimit {item!r}: the soft limit must not exceed the hard limit")
    return Ulimit(name, soft, hard)


def parse_tmpfs(item: str) -> Tmpfs:
    """``DST:SIZE`` (``/scratch:8g``): a tmpfs of SIZE at DST in the container."""
    dst, sep, size = item.rpartition(":")
    if not sep or not dst.startswith("/") or dst == "/":
        raise UsageError(
            f"--tmpfs {item!r}: expected DST:SIZE with DST an absolute path, e.g. /scratch:8g"
        )
    return Tmpfs(dst, parse_size_mib(size, "--tmpfs"))


def device_permissions(letters: str) -> tuple[str, ...]:
    """``rw`` -> ("READ", "WRITE"), in Batch's order."""
    return tuple(DEVICE_PERMISSIONS[c] for c in "rwm" if c in letters)
