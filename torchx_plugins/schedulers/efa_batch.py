"""``efa_batch`` for TorchX's plugin registry (TorchX main, torchx-nightly).

A portion of the ``torchx_plugins.schedulers`` namespace package. The same scheduler is also
an entry point (for TorchX 0.7.0); where TorchX still reads entry points, registering it here
too would be a "cross-channel collision" that TorchX reports on every run, so it registers
here only where entry points are not read.

There TorchX's default scheduler would become ``efa_batch``: nightly takes the first scheduler
it finds as the default, registered plugins first (torchx/schedulers/__init__.py
``get_scheduler_factories``), in the order the registry walks this module, ``dir(module)``,
alphabetical (torchx/plugins/_registry.py ``_collect_plugins_from_module``). So TorchX's own
default, ``local_docker``, is registered here too, under an attribute name that sorts first.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from torchx.plugins import register

from launcher.torchx.scheduler import create_scheduler

if TYPE_CHECKING:
    from launcher.torchx.scheduler import EfaBatchScheduler


def _entry_points_are_read() -> bool:
    try:
        from torchx.plugins._registry import PluginSource
    except ImportError:  # a TorchX without entry-point discovery
        return False
    if not hasattr(PluginSource, "ENTRYPOINT"):
        return False
    setting = os.environ.get("TORCHX_PLUGINS_SOURCE")
    if setting is None:
        return True  # TorchX's default: every channel
    try:
        return bool(int(setting) & PluginSource.ENTRYPOINT.value)
    except ValueError:
        return True


if not _entry_points_are_read():
    # Defined here: the registry keeps only functions whose __module__ is this module.
    # "default_..." sorts before "efa_batch" in dir(): local_docker stays TorchX's default.
    @register.scheduler(name="local_docker")
    def default_local_docker(session_name: str, **kwargs: Any) -> Any:
        from torchx.schedulers.docker_scheduler import create_scheduler as torchx_own

        return torchx_own(session_name, **kwargs)

    @register.scheduler(name="efa_batch")
    def efa_batch(session_name: str, **kwargs: Any) -> EfaBatchScheduler:
        return create_scheduler(session_name, **kwargs)
