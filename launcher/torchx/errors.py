"""The launcher's errors as TorchX reports them: a line, not a traceback (``torchx_errors``).

``torchx run`` prints a ``ComponentValidationException`` as one line and exits 1; anything
else a scheduler raises reaches the user as a traceback. So each of the launcher's errors is
raised again as a ``reported`` error of the same kind that is also that exception; one about
job settings (``SettingError``) names them as a TorchX user gave them (``torchx_words``:
``num_replicas 3``, ``-cfg share_id``), not as the launcher's flags.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torchx.specs.finder import ComponentValidationException

from launcher.errors import LauncherError, RemoteError
from launcher.job.setting_error import Setting, SettingError

_REPORTED: dict[str, type[LauncherError]] = {}

# JobSpec's fields as a TorchX user gives them: a role's num_replicas (one replica is one node;
# the value is the app's nodes in all), else a run option (launcher.torchx.options). A field
# not here has no TorchX form (an array), so a hint to use it is left out.
_ROLE_FIELDS = {"nodes": "num_replicas"}
_RUN_OPTIONS = {
    "pool": "pool",
    "share_id": "share_id",
    "priority": "priority",
    "efa": "efa",
    "privileged": "privileged",
    "port": "port",
    "secrets": "secrets",
    "team": "team",
}


def torchx_words(setting: Setting) -> str | None:
    """A job setting as a TorchX user gives it: ``num_replicas 3``, ``-cfg pool=cpu``."""
    if setting.field in _ROLE_FIELDS:
        name = _ROLE_FIELDS[setting.field]
        return name if setting.value is None else f"{name} {setting.value}"
    if setting.field in _RUN_OPTIONS:
        name = f"-cfg {_RUN_OPTIONS[setting.field]}"
        if isinstance(setting.value, tuple):  # TorchX's KEY:VALUE (its values cannot hold =)
            return f"{name}={':'.join(map(str, setting.value))}"
        return name if setting.value is None else f"{name}={setting.value}"
    return None


def reported(kind: type[LauncherError]) -> type[LauncherError]:
    """``kind``, and also the one error ``torchx run`` reports as a line instead of a traceback:
    its CLI catches ``ComponentValidationException`` (and ``ComponentNotFoundException``),
    logs "Failed to run component ...: MESSAGE" and exits 1; anything else a scheduler raises
    reaches the user as a traceback. A caller of the Runner still catches ``kind``."""
    key = f"{kind.__module__}.{kind.__qualname__}"
    if key not in _REPORTED:
        bases = (kind, ComponentValidationException)
        _REPORTED[key] = type(kind.__name__, bases, {"__module__": __name__})
    return _REPORTED[key]


@contextlib.contextmanager
def torchx_errors() -> Iterator[None]:
    """The launcher's errors (bad input, AWS or a registry failing) and botocore's, as
    ``reported`` errors; the original stays the ``__cause__``."""
    try:
        yield
    except ComponentValidationException:
        raise
    except SettingError as exc:
        raise reported(type(exc))(exc.worded(torchx_words)) from exc
    except LauncherError as exc:
        raise reported(type(exc))(str(exc)) from exc
    except Exception as exc:
        if not type(exc).__module__.startswith("botocore."):
            raise
        raise reported(RemoteError)(f"AWS request failed: {exc}") from exc
