"""A configuration value: how one is refused and how one is read from CDK context.

The vocabulary every configuration module speaks (infra/config.py, infra/pool_config.py,
infra/data_config.py): ``ConfigError``, whose message is one line naming the key and what is
allowed; ``check``, a value against its pattern; ``coerce``, a context value to its field's
annotated type. It sits below them all, so none of them imports another to refuse a value.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import fields
from typing import Any


class ConfigError(ValueError):
    """A configuration value is wrong; the message is one line naming the key."""


def check(pattern: re.Pattern[str], key: str, value: object, allowed: str) -> None:
    """``value`` is a string ``pattern`` matches; else an error naming ``key`` and ``allowed``."""
    if not isinstance(value, str) or not pattern.match(value):
        raise ConfigError(f"{key}: {value!r} is malformed; expected {allowed}")


def coerce(key: str, value: Any, hint: Any) -> Any:
    """Coerce one value to its field's annotated type.

    ``-c key=value`` on the CDK command line always gives strings; cdk.json gives JSON types.
    The dataclass's own annotations say what each key is, so no key list is kept by hand.
    """
    if value is None:
        return None
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        (hint,) = args  # optional: X | None
        args = list(typing.get_args(hint))
    origin = typing.get_origin(hint) or hint
    if hint is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "1", "yes"):
            return True
        if str(value).lower() in ("false", "0", "no"):
            return False
        raise ConfigError(f"{key}: {value!r} is not a boolean; allowed: true, false")
    if hint is int:
        if isinstance(value, (bool, float)):
            raise ConfigError(f"{key}: {value!r} is not an integer")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: {value!r} is not an integer") from None
    if hint is float:
        return _number(key, value)
    if origin is tuple:
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
            raise ConfigError(f"{key}: expected a list of strings (or one comma-separated string)")
        return tuple(i.strip() for i in items if i.strip())
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _coerce_object(key, value, hint)
    if origin in (Mapping, dict):
        value = _from_json(key, value)
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected an object of strings, got {value!r}")
        item = args[1] if len(args) == 2 else str
        if isinstance(item, type) and dataclasses.is_dataclass(item):
            return {str(k): _coerce_object(f"{key}.{k}", v, item) for k, v in value.items()}
        if item is float:
            return {str(k): _number(f"{key}.{k}", v) for k, v in value.items()}
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, (dict, list)):
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    return str(value)


def _from_json(key: str, value: Any) -> Any:
    """``-c key=value`` gives an object as its JSON text; cdk.json gives the object itself."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise ConfigError(f"{key}: {value!r} is not a JSON object") from None


def _coerce_object(key: str, value: Any, kind: type) -> Any:
    """A nested setting (a JSON object, or its text on ``-c``), each key by its annotation."""
    value = _from_json(key, value)
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}: expected a JSON object, got {value!r}")
    hints = typing.get_type_hints(kind)
    allowed = [f.name for f in fields(kind)]
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown key; allowed: {', '.join(allowed)}")
    missing = [f.name for f in fields(kind) if f.name == "instance_type" and f.name not in value]
    if missing:
        raise ConfigError(f"{key}.{missing[0]}: missing")
    return kind(**{k: coerce(f"{key}.{k}", v, hints[k]) for k, v in value.items()})


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{key}: {value!r} is not a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}: {value!r} is not a number") from None
