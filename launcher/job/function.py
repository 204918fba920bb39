"""A Python function as a job (``launcher.api.functions``): its payload, its spec, its results.

A call is a directory of objects (``launcher.backend.Payloads``: S3 on AWS, the EFS stand-in
in a local run): ``payload``, which the launcher writes, and one ``result-RANK`` per node,
which the runner writes (launcher.node.function). The payload is a zip of ``meta.json`` (the
caller's Python and cloudpickle versions), ``call.pkl`` (the function and its arguments,
cloudpickled) and the caller's cloudpickle package, so the node always loads a call with the
cloudpickle that wrote it.

Why cloudpickle: the standard pickle sends a function by its module and name only, so a lambda,
a closure or anything defined in ``__main__`` or a notebook cannot travel; cloudpickle sends
those by value, and is what Covalent, submitit, Dask and Ray send functions with. Its README
promises loading only between the same versions of itself and of Python: the first is made
so here, and the second is checked on both sides (``check_python``).

Pure but for ``pack`` and ``value_of``, which pickle and unpickle.
"""

from __future__ import annotations

import io
import json
import linecache
import os
import re
import secrets
import sys
import sysconfig
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from launcher.errors import FunctionError, UsageError
from launcher.job.job_name import MAX_LENGTH, clean
from launcher.node.function import (
    CALL,
    FUNCTION_ENV,
    GATHER_ENV,
    META,
    REGION_ENV,
    RESULT,
    RUNNER,
)

RANKS = ("main", "all")  # whose value a call returns: the main node's, or every node's in order
# make_spec's options that a function's job does not take: its command is the runner, on every
# node alike.
NOT_FOR_FUNCTIONS = {
    "array": "a function runs once per node; call it once per input instead",
    "groups": "every node of a function's job runs the same function",
    "torchrun": "a function's job runs the function itself on each node",
    "command": "a function's job runs the function",
}


class RemoteTraceback(Exception):
    """The remote traceback, as the cause of an exception re-raised here; printed the way
    concurrent.futures prints a worker process's (its ``_RemoteTraceback``)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text}"""'


@dataclass(frozen=True)
class Versions:
    """What a payload can be loaded with: Python ``X.Y.Z`` and cloudpickle."""

    python: str
    cloudpickle: str


def caller_versions() -> Versions:
    import cloudpickle

    return Versions(".".join(map(str, sys.version_info[:3])), cloudpickle.__version__)


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def check_python(image_python: str | None, image: str, caller: Versions) -> None:
    """UsageError when the image's Python (from its ``PYTHON_VERSION``, as the Docker official
    python images set it) is another minor version than the caller's: CPython's bytecode, which
    a function by value carries, changes between minor versions (its magic number,
    ``importlib.util.MAGIC_NUMBER``) and not within one. None: unknown here, checked on the node
    before the payload is loaded."""
    if image_python and _minor(image_python) != _minor(caller.python):
        raise UsageError(
            f"image {image} runs Python {image_python}, this caller Python {caller.python}: a "
            f"function travels only between one Python version; use an image with Python "
            f"{_minor(caller.python)}, or call from Python {_minor(image_python)}"
        )


def new_call_id() -> str:
    """A call's directory name: 128 random bits, unguessable by another job of the team."""
    return secrets.token_hex(16)


def describe(fn: object) -> str:
    """The function as a message names it: ``module.qualname``."""
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{getattr(fn, '__qualname__', type(fn).__name__)}"


def pack(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> bytes:
    """The payload's bytes. UsageError, before anything is sent, for something that is not
    callable or that cloudpickle cannot send (an open file, a lock, a generator...)."""
    import cloudpickle

    if not callable(fn):
        raise UsageError(f"{fn!r} is not callable; pass a function")
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    by_value = module is not None and not _installed(module)
    if by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        call = cloudpickle.dumps((fn, tuple(args), dict(kwargs)))
    except Exception as exc:  # noqa: BLE001 - pickle's errors have no common base
        raise UsageError(
            f"{describe(fn)}: the function or its arguments cannot be sent: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    finally:
        if by_value:
            cloudpickle.unregister_pickle_by_value(module)
    versions = caller_versions()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr(
            META, json.dumps({"python": versions.python, "cloudpickle": versions.cloudpickle})
        )
        # Stored, not deflated: a call's bulk is its arguments (arrays, weights), which
        # deflate barely shrinks at about 20 MB/s; cloudpickle's sources shrink well.
        bundle.writestr(CALL, call, zipfile.ZIP_STORED)
        package = Path(cloudpickle.__file__).parent
        for source in sorted(package.glob("*.py")):
            bundle.write(source, f"cloudpickle/{source.name}")
    return out.getvalue()


def _installed(module: ModuleType) -> bool:
    """Whether a module is one an image would have too: the standard library's, or installed
    in site-packages, as opposed to the caller's own (a script, a notebook, a checkout).
    cloudpickle sends functions by reference (module and name) and only ``__main__``'s by
    value; the caller's own module is sent by value too (``register_pickle_by_value``), so a
    function of ``train.py`` runs on an image without a copy of it."""
    if module.__name__ == "__main__" or module.__name__ in sys.builtin_module_names:
        return module.__name__ != "__main__"
    path = getattr(module, "__file__", None)
    if path is None:
        return True  # a namespace or built-in module: nothing of it could be sent
    roots = {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    where = os.path.realpath(path)
    return any(where.startswith(os.path.realpath(r) + os.sep) for r in roots if r)


def spec_options(fn: Callable[..., Any], options: dict[str, Any]) -> dict[str, Any]:
    """``make_spec``'s options for a function's job: refused ones named in one line, and its
    name from the function's unless given (``call-NAME``)."""
    for key, why in NOT_FOR_FUNCTIONS.items():
        if options.get(key):
            raise UsageError(f"{key}: not for a function's job ({why})")
    name = clean(getattr(fn, "__name__", "fn"))  # Batch's characters: ASCII only
    options.setdefault("name", f"call-{name}"[:MAX_LENGTH])
    return options


def command(python: str) -> tuple[str, ...]:
    """What every node runs: the image's ``python`` with the runner."""
    return (python, "-c", RUNNER)


def check_ranks(ranks: str) -> None:
    if ranks not in RANKS:
        raise UsageError(f"ranks: {ranks!r}; allowed: {', '.join(RANKS)}")


def environment(location: str, region: str | None, ranks: str) -> dict[str, str]:
    """The submit's environment for every node: where the call is, and whether the main node
    gathers every rank's result before it ends the job."""
    check_ranks(ranks)
    env = {FUNCTION_ENV: location, GATHER_ENV: ranks}
    if region:
        env[REGION_ENV] = region
    return env


def result_name(rank: int) -> str:
    return f"{RESULT}{rank}"


@dataclass(frozen=True)
class Outcome:
    """One node's result: ``status`` ok, error or refused, and what came with it."""

    rank: int
    status: str
    body: bytes = b""
    attempt: str = ""
    type: str = ""
    message: str = ""
    traceback: str = ""


def parse_result(rank: int, data: bytes) -> Outcome:
    """A ``result-RANK`` object: its JSON line, then the pickled value or exception."""
    line, _, body = data.partition(b"\n")
    try:
        header = json.loads(line)
        status = str(header["status"])
    except (ValueError, KeyError, TypeError):
        raise FunctionError(f"node {rank}'s result is not one the runner writes") from None
    return Outcome(
        rank,
        status,
        body,
        str(header.get("attempt", "")),
        str(header.get("type", "")),
        str(header.get("message", "")),
        str(header.get("traceback", "")),
    )


def located(text: str, fn: object) -> str:
    """A remote traceback with the caller's file named where cloudpickle left ``<dynamic-code>``
    (it drops the file names of the code it sends by value, keeping the lines: cloudpickle's
    ``_code_reduce``), and that line of the file beneath, as Python prints its own: the code
    sent by value is the function's own module's (``_installed``). The function's own code
    names its file where it has one: a function that itself came by value (to a Covalent
    server, from its client) has no file here, and its module's file (the server's) is not its."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    code = getattr(fn, "__code__", None)
    path = code.co_filename if code is not None else getattr(module, "__file__", None)
    if not path or not os.path.isfile(path):
        return text
    out = []
    for line in text.splitlines(keepends=True):
        match = _DYNAMIC_FRAME.match(line)
        if match is None:
            out.append(line)
            continue
        out.append(line.replace('"<dynamic-code>"', f'"{path}"'))
        source = linecache.getline(path, int(match[1])).strip()
        if source:
            out.append(f"    {source}\n")
    return "".join(out)


_DYNAMIC_FRAME = re.compile(r'^  File "<dynamic-code>", line (\d+), in ')


def stale(outcomes: Mapping[int, Outcome]) -> list[int]:
    """The nodes whose result is of another attempt than the main node's: written before the
    job was retried (its workers ran again, and one that did not finish left the old one)."""
    main = outcomes.get(0)
    if main is None:
        return []
    return [r for r, o in outcomes.items() if o.attempt != main.attempt]


def value_of(outcome: Outcome) -> Any:
    """The value a node returned; or the exception it raised, raised here with the remote
    traceback as its cause (``RemoteTraceback``); UsageError for a payload the node refused."""
    import cloudpickle

    if outcome.status == "ok":
        return cloudpickle.loads(outcome.body)
    if outcome.status == "refused":
        raise UsageError(outcome.message)
    exc: BaseException | None = None
    if outcome.body:
        try:
            exc = cloudpickle.loads(outcome.body)
        except Exception:  # noqa: BLE001 - a class this side cannot import: said in words
            exc = None
    if not isinstance(exc, BaseException):
        raise FunctionError(
            f"node {outcome.rank} raised {outcome.type}: {outcome.message}", outcome.traceback
        )
    raise exc from RemoteTraceback(outcome.traceback)
