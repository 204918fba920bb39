"""The ``efa_batch`` scheduler's workspaces: a layer on the role's image, in the registry.

TorchX hands each role's workspace to ``build_workspace_and_update_role`` during the dry run;
here the digest is computed then (nothing pushed) and the layer is pushed at schedule time
(``push_workspaces``), so a dry run uploads nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple

from torchx.specs import CfgVal, Role
from torchx.workspace.api import WorkspaceMixin

from launcher.api import BuildOptions, Cluster
from launcher.errors import UsageError
from launcher.torchx.appdef import choose_pool
from launcher.torchx.errors import torchx_errors
from launcher.torchx.options import str_option

TORCHX_MERGE_SUFFIX = "torchx_workspace_"  # torchx.workspace.api's temporary merges


class Push(NamedTuple):
    """A workspace layer still to push: onto ``base``, from ``path``, expected ``reference``."""

    base: str
    path: str
    reference: str
    options: BuildOptions


class RegistryWorkspace(WorkspaceMixin[None]):
    """TorchX's workspace hook, patching the workspace into the role's image in the registry
    (never a Docker build). The scheduler provides ``_cluster``."""

    _pending: list[Push]

    def _cluster(self, cfg: Mapping[str, CfgVal]) -> Cluster:
        raise NotImplementedError

    def build_workspace_and_update_role(
        self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        with torchx_errors():
            self._build_workspace(role, workspace, cfg)

    def _build_workspace(self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]) -> None:
        path = workspace.removeprefix("file://")
        if "://" in path or not os.path.isdir(path):
            raise UsageError(f"workspace {workspace!r}: efa_batch takes a local directory")
        repo = str_option(cfg, "image_repo")
        if repo:
            os.environ["LAUNCHER_REGISTRY"] = repo
        cluster = self._cluster(cfg)
        cluster = cluster.in_pool(choose_pool([role], cluster.info, cfg))  # its platform
        stream_base = bool(cfg.get("stream_base"))
        options: BuildOptions = {"stream_base": stream_base}
        # The digest; nothing pushed yet.
        built = cluster.build(role.image, path, dryrun=True, stream_base=stream_base)
        if built.reused:
            role.image = built.reference
            return
        # TorchX (main) hands a merge of several directories over in a temporary directory
        # that is gone by schedule time: push that now. A plain directory waits for schedule.
        if os.path.basename(os.path.normpath(path)).endswith(TORCHX_MERGE_SUFFIX):
            built = cluster.build(role.image, path, **options)
        else:
            self._pending = getattr(self, "_pending", [])
            self._pending.append(Push(role.image, path, built.reference, options))
        role.image = built.reference

    def take_pushes(self) -> list[Push]:
        """The layers the dry run found still to push; the next dry run starts afresh."""
        pushes, self._pending = list(getattr(self, "_pending", [])), []
        return pushes


def push_workspaces(cluster: Cluster, pushes: list[Push]) -> None:
    """Push each layer the dry run computed, and check it is the image the dry run named."""
    for push in pushes:
        built = cluster.build(push.base, push.path, **push.options)
        if built.reference != push.reference:
            raise UsageError(f"workspace {push.path} changed since the dry run; run again")
