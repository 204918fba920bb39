"""A job file (``launcher run -f job.yaml``): everything ``run``'s flags hold, as YAML.

YAML because SkyPilot's task file is what this audience knows, it takes comments, and JSON is
valid YAML. The file is read with ``yaml.safe_load`` (no tags, no objects) and checked key by
key before anything is built or submitted: every error is one line naming the file, the key
path and what is allowed (``job.yaml: env.FOO: expected a string, got a list``).

The values become ``JobSpec`` fields through the same parsers as the flags
(``launcher.job.jobspec``), so a file and the equivalent flags make the same job. ``merge`` lays
flags over a file: scalars replace, and lists and mappings add to the file's, a flag winning
where both name one key (a variable, tag, secret, limit, or a mount's or tmpfs's path).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.errors import UsageError, did_you_mean
from launcher.job import jobspec
from launcher.job.jobspec import JobSpec, Mount, MountKind, NodeGroup
from launcher.job.options import make_spec, spec_options
from launcher.job.shapes import parse_after

SHELL = ("sh", "-c")  # a command given as one string is a shell script


@dataclass(frozen=True)
class JobFile:
    """A checked job file: ``options`` are ``JobSpec`` fields (``make_spec``'s keywords),
    ``command`` the file's command (None: none given), ``declared_workspace`` the directory
    it names to patch into the image, relative paths taken from the file's directory (None:
    the file does not say; with ``no_workspace`` the image runs as it is); ``workspace``
    is that directory, checked."""

    path: str
    options: Mapping[str, object] = field(default_factory=dict)
    command: tuple[str, ...] | None = None
    declared_workspace: str | None = None
    no_workspace: bool = False
    team: str | None = None  # the team to submit as (``--team``), on a stack with teams

    @property
    def workspace(self) -> str | None:
        """The directory the file names to ship, refused (UsageError) when it is not the
        file's own directory or under it: everyone who may pull the image may read what it
        ships, and a job file that came with a cloned repository must not choose to ship
        ``~/`` (issue 43). Links are followed, so a link in the repository that leads out
        is refused too. Only the command line (``--workspace``) names another directory."""
        declared = self.declared_workspace
        if declared is None:
            return None
        top = os.path.realpath(Path(self.path).parent)
        real = os.path.realpath(declared)
        if os.path.commonpath([real, top]) != top:
            shown = declared if declared == real else f"{declared} ({real})"
            raise UsageError(
                f"{self.path}: workspace: {shown} is outside the job file's directory "
                f"{top}; a job file ships only that directory or one under it (give "
                f"--workspace {declared} on the command line to ship it)"
            )
        return declared

    def spec(self, command: tuple[str, ...] | list[str] | None = None, **overrides: Any) -> JobSpec:
        """The job: the file's values with ``overrides`` (``make_spec``'s keywords) merged
        over them, ``command`` (a non-empty one) instead of the file's. UsageError; no I/O."""
        chosen = tuple(command) if command else self.command
        return make_spec(chosen or (), **merge(self.options, spec_options(**overrides)))


def load(path: str | os.PathLike[str]) -> JobFile:
    """Read and check a job file; UsageError with one line on any fault."""
    name = os.fspath(path)
    try:
        text = Path(name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{name}: no such job file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{name}: cannot read the job file: {exc}") from None
    return parse(text, name)


def parse(text: str, name: str = "job.yaml") -> JobFile:
    """A job file's text (``name``: where it came from, for messages and relative paths)."""
    import yaml

    try:
        data = yaml.load(text, Loader=_loader())  # noqa: S506 (a SafeLoader's subclass)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        raise UsageError(f"{where}: not valid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{name}: not valid YAML: {exc}") from None
    return _Reader(name).read(data)


def merge(base: Mapping[str, object], over: Mapping[str, object]) -> dict[str, object]:
    """``over``'s fields laid over ``base``'s (both ``JobSpec`` fields): scalars replace;
    env, tags, secrets, ulimits, tmpfs, mounts and after add to ``base``'s, ``over``
    winning where both name one key."""
    merged = dict(base)
    for key, value in over.items():
        keyed = _MERGED_BY.get(key)
        if keyed is not None and key in merged:
            items = {keyed(item): item for item in _items(merged[key])}
            items.update((keyed(item), item) for item in _items(value))
            merged[key] = tuple(items.values())
        else:
            merged[key] = value
    return merged


def _items(value: object) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, tuple | list) else ()


_MERGED_BY: dict[str, Callable[[Any], object]] = {
    "env": lambda pair: pair[0],
    "tags": lambda pair: pair[0],
    "secrets": lambda secret: secret.env,
    "ulimits": lambda limit: limit.name,
    "tmpfs": lambda fs: fs.dst,
    "mounts": lambda mount: mount.dst,
    "after": lambda dependency: dependency,
}


@functools.cache
def _loader() -> type:
    """``safe_load``'s loader, made on first use (PyYAML is imported only for a job file)."""
    import yaml

    class Loader(yaml.SafeLoader):
        """Refuses a key given twice: YAML would keep the last one without a word, and the
        job would run with half of what its file says."""

        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            seen: set[object] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if isinstance(key, str | int | float | bool) and key in seen:
                    raise yaml.MarkedYAMLError(
                        problem=f"{key}: given twice; give each key once",
                        problem_mark=key_node.start_mark,
                    )
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return Loader


# --- reading the values --------------------------------------------------------------------

# The keys of a job file, in the order its "allowed" lists name them.
KEYS = (
    "name",
    "command",
    "image",
    "workspace",
    "nodes",
    "gpus_per_node",
    "pool",
    "env",
    "secrets",
    "mounts",
    "ulimits",
    "shm_size",
    "tmpfs",
    "efa",
    "timeout",
    "checkpoint_signal",
    "checkpoint_lead",
    "retries",
    "restarts",
    "torchrun",
    "port",
    "array",
    "after",
    "share_id",
    "priority",
    "tags",
    "privileged",
    "groups",
    "team",
)
GROUP_KEYS = ("name", "nodes", "image", "command", "gpus_per_node", "env")
# A mount's keys by type: which it takes and which it needs (``--mount``'s fields).
MOUNT_KEYS: dict[MountKind, tuple[tuple[str, ...], tuple[str, ...]]] = {
    MountKind.EFS: (("type", "dst", "readonly"), ("dst",)),
    MountKind.FSX: (("type", "dst", "readonly"), ("dst",)),
    MountKind.BIND: (("type", "src", "dst", "readonly"), ("src", "dst")),
    MountKind.DEVICE: (("type", "src", "dst", "perm"), ("src",)),
}
# A flag named in JobSpec's own checks, and the key of the file that holds it.
_FLAG = re.compile(r"--[a-z][a-z-]*")
_FLAG_KEYS = {
    "--name": "name",
    "--nodes": "nodes",
    "--gpus-per-node": "gpus_per_node",
    "--retries": "retries",
    "--priority": "priority",
    "--port": "port",
    "--share-id": "share_id",
    "--tag": "tags",
    "--secret": "secrets",
    "--ulimit": "ulimits",
    "--tmpfs": "tmpfs",
    "--mount": "mounts",
    "--env": "env",
    "--array": "array",
    "--after": "after",
    "--checkpoint-signal": "checkpoint_signal",
    "--checkpoint-lead": "checkpoint_lead",
}


def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


class _Reader:
    """One file's checks; every fault a UsageError naming ``name`` and the key path."""

    def __init__(self, name: str) -> None:
        self.name = name

    def fail(self, path: str, message: str) -> UsageError:
        return UsageError(f"{self.name}: {path}: {message}" if path else f"{self.name}: {message}")

    def parsed(self, path: str, parse: Callable[[str], Any], text: str) -> Any:
        """A flag parser's value, its message's ``--flag 'VALUE':`` put as the key path."""
        try:
            return parse(text)
        except UsageError as exc:
            message = str(exc)
            detail = message.split(": ", 1)[1] if message.startswith("--") else message
            raise self.fail(path, detail) from None

    # Values of one type.

    def string(self, path: str, value: object) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)  # env: {EPOCHS: 3}
        booleans = " (quote it: YAML reads yes, no, on and off as booleans)"
        hint = booleans if isinstance(value, bool) else ""
        raise self.fail(path, f"expected a string, got {_kind(value)}{hint}")

    def integer(self, path: str, value: object) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise self.fail(path, f"expected an integer, got {_kind(value)}")

    def boolean(self, path: str, value: object) -> bool:
        if isinstance(value, bool):
            return value
        raise self.fail(path, f"expected true or false, got {_kind(value)}")

    def mapping(self, path: str, value: object) -> dict[str, object]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping (KEY: VALUE lines), got {_kind(value)}")
        for key in value:
            if not isinstance(key, str):
                raise self.fail(f"{path}.{key}", "keys are strings here")
        return value

    def strings(self, path: str, value: object) -> tuple[str, ...]:
        """A list of strings; one string is a shell command (``sh -c``) where ``path`` is a
        command."""
        if isinstance(value, str):
            return (*SHELL, value)
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list of strings or one string, got {_kind(value)}")
        return tuple(self.string(f"{path}[{i}]", item) for i, item in enumerate(value))

    def keys(self, path: str, data: dict[str, object], allowed: tuple[str, ...]) -> None:
        for key in data:
            if key not in allowed:
                where = f"{path}.{key}" if path else key
                raise self.fail(where, f"not a key; {did_you_mean(key, allowed)}")

    # The file.

    def read(self, data: object) -> JobFile:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise self.fail(
                "", f"expected a mapping of keys (name, command, ...), got {_kind(data)}"
            )
        self.keys("", data, KEYS)
        data = {k: v for k, v in data.items() if v is not None}  # `key:` alone: not given
        options: dict[str, object] = {}
        simple: dict[str, tuple[str, Callable[[str, object], object]]] = {
            "name": ("name", self.string),
            "image": ("image", self.string),
            "nodes": ("nodes", self.integer),
            "gpus_per_node": ("gpus_per_node", self.integer),
            "pool": ("pool", self.string),
            "retries": ("attempts", self.integer),
            "restarts": ("restarts", self.boolean),
            "torchrun": ("torchrun", self.boolean),
            "port": ("rendezvous_port", self.integer),
            "array": ("array_size", self.integer),
            "share_id": ("share_id", self.string),
            "priority": ("priority", self.integer),
            "privileged": ("privileged", self.boolean),
        }
        for key, (option, read) in simple.items():
            if key in data:
                options[option] = read(key, data[key])
        if "env" in data:
            options["env"] = self.env("env", data["env"])
        # KEY: {NAME: VALUE} mappings, each pair read as its flag would read NAME=VALUE.
        for key, parse, sep in (
            ("tags", jobspec.parse_tag, "="),
            ("secrets", jobspec.parse_secret, "="),
            ("ulimits", jobspec.parse_ulimit, "="),
            ("tmpfs", jobspec.parse_tmpfs, ":"),
        ):
            if key in data:
                options[key] = tuple(
                    self.parsed(f"{key}.{k}", parse, f"{k}{sep}{self.string(f'{key}.{k}', v)}")
                    for k, v in self.mapping(key, data[key]).items()
                )
        if "mounts" in data:
            mounts = data["mounts"]
            if not isinstance(mounts, list):
                raise self.fail("mounts", f"expected a list of mounts, got {_kind(mounts)}")
            options["mounts"] = tuple(self.mount(f"mounts[{i}]", m) for i, m in enumerate(mounts))
        if "shm_size" in data:
            size = self.string("shm_size", data["shm_size"])
            options["shm_mib"] = self.parsed("shm_size", jobspec.parse_size_mib, size)
        if "timeout" in data:
            timeout = self.string("timeout", data["timeout"])
            options["timeout_seconds"] = self.parsed("timeout", jobspec.parse_duration, timeout)
        for key, option, parse_flag in (
            ("checkpoint_signal", "checkpoint_signal", jobspec.parse_signal),
            ("checkpoint_lead", "checkpoint_lead_seconds", jobspec.parse_lead),
        ):
            if key in data:
                options[option] = self.parsed(key, parse_flag, self.string(key, data[key]))
        if "efa" in data:
            efa = data["efa"]
            # YAML reads an unquoted off as false (and on as true).
            text = {False: "off", True: "auto"}[efa] if isinstance(efa, bool) else efa
            options["efa"] = self.parsed("efa", jobspec.parse_efa, self.string("efa", text))
        if "after" in data:
            after = data["after"]
            items = [after] if isinstance(after, str) else after
            if not isinstance(items, list):
                raise self.fail("after", f"expected a list of job ids, got {_kind(after)}")
            options["after"] = tuple(
                self.parsed(f"after[{i}]", parse_after, self.string(f"after[{i}]", item))
                for i, item in enumerate(items)
            )
        if "groups" in data:
            options["groups"] = self.groups(data["groups"])
            total = sum(g.size for g in options["groups"])  # type: ignore[attr-defined]
            options.setdefault("nodes", total)
        command = self.strings("command", data["command"]) if "command" in data else None
        if command == ():
            raise self.fail("command", "empty; give the program and its arguments")
        workspace, no_workspace = self.workspace(data)
        self.check(options, command)
        team = self.string("team", data["team"]) if "team" in data else None
        return JobFile(self.name, options, command, workspace, no_workspace, team)

    def env(self, path: str, value: object) -> tuple[tuple[str, str], ...]:
        env = self.mapping(path, value)
        return tuple(
            self.parsed(f"{path}.{k}", jobspec.parse_env, f"{k}={self.string(f'{path}.{k}', v)}")
            for k, v in env.items()
        )

    def workspace(self, data: dict[str, object]) -> tuple[str | None, bool]:
        if "workspace" not in data:
            return None, False
        value = data["workspace"]
        if value is False:
            return None, True
        if not isinstance(value, str) or not value:
            raise self.fail(
                "workspace", f"expected a directory, or false for none; got {_kind(value)}"
            )
        # Like a Compose file's build context: relative to the file, wherever it is run from.
        return os.path.normpath(Path(self.name).parent / Path(value).expanduser()), False

    def mount(self, path: str, value: object) -> Mount:
        if isinstance(value, str):  # as --mount takes it: type=efs,dst=/data
            mount: Mount = self.parsed(path, jobspec.parse_mount, value)
            return mount
        data = self.mapping(path, value)
        if "type" not in data:
            raise self.fail(f"{path}.type", "required; allowed: " + ", ".join(map(str, MountKind)))
        type_text = self.string(f"{path}.type", data["type"])
        try:
            kind = MountKind(type_text)
        except ValueError:
            allowed = ", ".join(map(str, MountKind))
            raise self.fail(f"{path}.type", f"{type_text!r}; allowed: {allowed}") from None
        takes, needs = MOUNT_KEYS[kind]
        self.keys(path, data, takes)
        for key in needs:
            if key not in data:
                raise self.fail(f"{path}.{key}", f"required for a mount of type {kind}")
        parts = [f"type={kind}"]
        for key in ("src", "dst", "perm"):
            if key in data:
                parts.append(f"{key}={self.string(f'{path}.{key}', data[key])}")
        if "readonly" in data and self.boolean(f"{path}.readonly", data["readonly"]):
            parts.append("readonly")
        text = ",".join(parts)
        mount = self.parsed(path, jobspec.parse_mount, text)
        return mount

    def groups(self, value: object) -> tuple[NodeGroup, ...]:
        if not isinstance(value, list) or not value:
            raise self.fail("groups", f"expected a list of node groups, got {_kind(value)}")
        groups = []
        first = 0
        for i, item in enumerate(value):
            path = f"groups[{i}]"
            data = self.mapping(path, item)
            self.keys(path, data, GROUP_KEYS)
            if "nodes" not in data:
                raise self.fail(f"{path}.nodes", "required: how many nodes the group has")
            size = self.integer(f"{path}.nodes", data["nodes"])
            if size < 1:
                raise self.fail(f"{path}.nodes", f"{size}; a group has at least 1 node")
            command = (
                self.strings(f"{path}.command", data["command"]) if "command" in data else None
            )
            groups.append(
                NodeGroup(
                    first=first,
                    last=first + size - 1,
                    image=self.string(f"{path}.image", data["image"]) if "image" in data else None,
                    command=command or None,
                    gpus_per_node=(
                        self.integer(f"{path}.gpus_per_node", data["gpus_per_node"])
                        if "gpus_per_node" in data
                        else None
                    ),
                    env=self.env(f"{path}.env", data["env"]) if "env" in data else (),
                    name=self.string(f"{path}.name", data["name"]) if "name" in data else None,
                )
            )
            first += size
        return tuple(groups)

    def check(self, options: dict[str, object], command: tuple[str, ...] | None) -> None:
        """JobSpec's own checks (ranges, clashes) on the file alone, named by its keys."""
        fields = {f.name for f in dataclasses.fields(JobSpec)}
        assert set(options) <= fields, sorted(set(options) - fields)
        probe = {"name": "job", "image": "image", **options}
        try:
            JobSpec(command=command or ("true",), **probe)  # type: ignore[arg-type]
        except UsageError as exc:
            # "--nodes 0: ..." as "nodes 0: ...": the file's keys for the flags' names
            message = _FLAG.sub(lambda m: _FLAG_KEYS.get(m.group(), m.group()), str(exc))
            raise self.fail("", message) from None
