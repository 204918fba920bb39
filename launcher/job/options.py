"""``make_spec``: a job spec from a command and keyword options, the Python form of ``run``'s
flags, checked on its own (no cluster, no I/O).

The API (``Cluster.run``), a job file's ``spec()`` and the CLI build their jobs here, so a
keyword, a flag and a job file's key are parsed by the same functions (``launcher.job.jobspec``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from launcher.errors import UsageError
from launcher.job import jobspec
from launcher.job.jobspec import JobSpec
from launcher.job.shapes import Dependency, parse_after


def make_spec(command: Sequence[str], **options: Any) -> JobSpec:
    """A job spec from a command and keyword options, validated on its own (no cluster):
    ``nodes``, ``image``, ``env`` (mapping or pairs), ``mounts``, ``gpus_per_node``, ``efa``,
    ``shm_mib``, ``timeout_seconds``, ``attempts``, ``share_id``, ``priority``, ``tags``,
    ``torchrun``, ``rendezvous_port``, ``groups``, ``secrets`` (``{"ENV": "team/token"}``),
    ``ulimits`` (``{"nproc": "4096:8192"}``), ``tmpfs`` (``{"/scratch": "8g"}``),
    ``privileged``, ``array`` (N one-node children), ``after`` (jobs to wait for: ``Job``s,
    ids, ``"ID:each"`` or ``job.each()`` for array to array) and ``name`` (default: from the
    command). A job file's values: ``launcher.job.jobfile.load(PATH).spec(**options)``."""
    command = tuple(command)
    options = spec_options(**options)
    options.setdefault("name", jobspec.default_name(command))
    options["image"] = jobspec.base_image(options.get("image"))
    return JobSpec(command=command, **options)


def spec_options(**options: Any) -> dict[str, Any]:
    """``make_spec``'s keyword options as ``JobSpec`` fields (mappings as pairs, ``array``
    as ``array_size``, ``after`` as dependencies), with no defaults added; no I/O."""
    if "array" in options:
        options["array_size"] = options.pop("array")
    if "after" in options:
        options["after"] = tuple(_dependency(d) for d in options["after"] or ())
    for key in ("env", "tags"):
        if isinstance(options.get(key), dict):
            options[key] = tuple(options[key].items())
    # NAME -> reference, NAME -> SOFT[:HARD], DST -> SIZE: parsed as the CLI parses its flags.
    for key, parse, join in (
        ("secrets", jobspec.parse_secret, "="),
        ("ulimits", jobspec.parse_ulimit, "="),
        ("tmpfs", jobspec.parse_tmpfs, ":"),
    ):
        value = options.get(key)
        if isinstance(value, Mapping):
            options[key] = tuple(parse(f"{k}{join}{v}") for k, v in value.items())
    return options


def _dependency(item: object) -> Dependency:
    if isinstance(item, Dependency):
        return item
    job_id = getattr(item, "job_id", None)  # a launcher.api.Job, or any job with an id
    if isinstance(job_id, str):
        return Dependency(job_id)
    if isinstance(item, str):
        return parse_after(item)
    raise UsageError(f"after: {item!r}: expected a Job, a job id or job.each()")
