"""The launcher's errors as TorchX reports them: a line, not a traceback (``torchx_errors``).

``torchx run`` prints a ``ComponentValidationException`` as one line and exits 1; anything
else a scheduler raises reaches the user as a traceback. So each of the launcher's errors is
raised again as a ``reported`` error of the same kind that is also that exception.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torchx.specs.finder import ComponentValidationException

from launcher.errors import LauncherError, RemoteError

_REPORTED: dict[str, type[LauncherError]] = {}


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
    except LauncherError as exc:
        raise reported(type(exc))(str(exc)) from exc
    except Exception as exc:
        if not type(exc).__module__.startswith("botocore."):
            raise
        raise reported(RemoteError)(f"AWS request failed: {exc}") from exc
