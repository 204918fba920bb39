"""Bad input about a job's settings, worded by the front door that took them.

The checks in ``launcher.job`` name a setting as the CLI spells it (``--nodes 3: ...``), but a
TorchX user gave the same setting as a role's ``num_replicas`` or ``-cfg share_id``. So such an
error keeps its message as parts, text and ``Setting``s: ``str()`` is the CLI's line (its flags,
as tests/cli expect), and ``worded(names)`` is the line in another front door's terms
(``launcher.torchx.errors``). No message is rewritten by searching its text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from launcher.errors import UsageError

# JobSpec's fields as the CLI's flags (launcher/cli/cmd_run.py) spell them.
FLAGS = {
    "nodes": "--nodes",
    "pool": "--pool",
    "share_id": "--share-id",
    "priority": "--priority",
    "efa": "--efa",
    "privileged": "--privileged",
    "port": "--port",
    "array": "--array",
    "secrets": "--secret",
    "team": "--team",
}


@dataclass(frozen=True)
class Setting:
    """A setting a message names, with the value it shows (None: the name alone). ``aside``:
    words shown only by a front door that has the setting (a hint to use it)."""

    field: str  # JobSpec's
    value: object = None  # a (key, value) pair for a setting given as KEY=VALUE (--secret)
    aside: str = ""


# A front door's name for a setting with its value (``--nodes 3``, ``-cfg pool=cpu``); None
# where it has no such setting.
Names = Callable[[Setting], "str | None"]


def flag(setting: Setting) -> str:
    """The CLI's words: ``--nodes 3``."""
    name = FLAGS[setting.field]
    if isinstance(setting.value, tuple):
        return f"{name} {'='.join(map(str, setting.value))}"
    return name if setting.value is None else f"{name} {setting.value}"


class SettingError(UsageError):
    """A UsageError whose message names job settings (``Setting`` parts): its ``str()`` names
    them as the CLI's flags."""

    def __init__(self, *parts: str | Setting) -> None:
        self.parts = parts
        super().__init__(self.worded(flag))

    def worded(self, names: Names) -> str:
        """The message with each setting as ``names`` calls it; a setting the front door lacks
        keeps the CLI's name, and its ``aside`` is left out."""
        words = []
        for part in self.parts:
            if isinstance(part, str):
                words.append(part)
                continue
            name = names(part)
            if name is None:
                name = "" if part.aside else flag(part)
            elif part.aside:
                name = part.aside.format(name)
            words.append(name)
        return "".join(words)
