"""The ``efa_batch`` scheduler's workspaces: a layer on the role's image, in the registry.

TorchX hands each role's workspace to ``build_workspace_and_update_role`` during the dry run;
here the image is looked up then (nothing pushed) and pushed at schedule time
(``push_workspaces``), so a dry run uploads nothing.

What the dry run knows of the image depends on the builder (``launcher.image.build``): the
registry builder computes its digest, a Docker build (a workspace with a Dockerfile.launcher,
or TorchX's Dockerfile.torchx) only its content tag, since the digest comes from the push. So
the schedule compares content tags, and sends the requests with the image it pushed
(``with_images``), as ``launcher run`` does, which builds before it makes its requests.

``image_repo`` is a registry HOST[:PORT], handed to each build (never left in the
environment for the next run of the process); aws_batch's full repository path is refused
(``registry_of``).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from torchx.specs import CfgVal, Role
from torchx.workspace.api import WorkspaceMixin

from launcher.api import BuildOptions, Cluster
from launcher.errors import UsageError
from launcher.image.build import DEFAULT_DOCKERFILE, DOCKERFILE_ENV, target_repository
from launcher.job import jobdef
from launcher.stack.cluster import ClusterInfo
from launcher.torchx.appdef import choose_pool
from launcher.torchx.errors import torchx_errors
from launcher.torchx.options import str_option

TORCHX_MERGE_SUFFIX = "torchx_workspace_"  # torchx.workspace.api's temporary merges
# TorchX's Docker workspaces build with this file (torchx/workspace/docker_workspace.py).
TORCHX_DOCKERFILE = "Dockerfile.torchx"


class Push(NamedTuple):
    """A workspace image still to push: onto ``base``, from ``path``; the dry run's
    ``reference`` in the requests and its content ``tag``."""

    base: str
    path: str
    reference: str
    tag: str
    options: BuildOptions


class RegistryWorkspace(WorkspaceMixin[None]):
    """TorchX's workspace hook, building the workspace into the role's image in the registry
    (a patched layer, or a Docker build for a workspace with a Dockerfile). The scheduler
    provides ``_cluster``."""

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
        cluster = self._cluster(cfg)
        registry = registry_of(str_option(cfg, "image_repo"), cluster.info)
        cluster = cluster.in_pool(choose_pool([role], cluster.info, cfg))  # its platform
        options: BuildOptions = {
            "stream_base": bool(cfg.get("stream_base")),
            "registry": registry,
            "dockerfile": dockerfile_of(path),
        }
        # The image looked up; nothing pushed yet.
        looked_up: BuildOptions = {**options, "dryrun": True}
        built = cluster.build(role.image, path, **looked_up)
        if built.reused:
            role.image = built.reference
            return
        # TorchX (main) hands a merge of several directories over in a temporary directory
        # that is gone by schedule time: push that now. A plain directory waits for schedule.
        if os.path.basename(os.path.normpath(path)).endswith(TORCHX_MERGE_SUFFIX):
            built = cluster.build(role.image, path, **options)
        else:
            self._pending = getattr(self, "_pending", [])
            self._pending.append(Push(role.image, path, built.reference, built.tag, options))
        role.image = built.reference

    def take_pushes(self) -> list[Push]:
        """The images the dry run found still to push; the next dry run starts afresh."""
        pushes, self._pending = list(getattr(self, "_pending", [])), []
        return pushes


def registry_of(image_repo: str | None, cluster: ClusterInfo) -> str | None:
    """The registry HOST[:PORT] ``image_repo`` names (None: the stack's, or
    $LAUNCHER_REGISTRY). aws_batch's form, a whole repository path, is taken only where it
    is the stack's repository on another host: the stack's nodes may pull from that
    repository alone (its execution role's grant), so another is refused, in one line."""
    if image_repo is None:
        return None
    value = image_repo.removesuffix("/")
    host, _, path = value.partition("/")
    repository = cluster.repository_uri.split("/", 1)[1]
    if not path or path == repository:
        return host
    default = target_repository(cluster.repository_uri).name  # $LAUNCHER_REGISTRY's host
    raise UsageError(
        f"image_repo {image_repo}: efa_batch takes a registry HOST[:PORT], not aws_batch's "
        f"repository path; workspace images go to the stack's repository {default}, or "
        f"with image_repo=HOST to HOST/{repository}"
    )


def dockerfile_of(path: str) -> str | None:
    """TorchX's Dockerfile.torchx when the workspace has it and not the launcher's own
    (Dockerfile.launcher, or the file $LAUNCHER_DOCKERFILE names), which wins: it is written
    for this launcher, where a Dockerfile.torchx beside it stays for TorchX's own schedulers.
    None: the launcher's choice (``launcher.image.build.choose_builder``)."""
    own = os.environ.get(DOCKERFILE_ENV) or DEFAULT_DOCKERFILE
    if (Path(path) / own).is_file() or not (Path(path) / TORCHX_DOCKERFILE).is_file():
        return None
    return TORCHX_DOCKERFILE


def push_workspaces(
    cluster: Cluster, pushes: list[Push], requests: jobdef.Requests
) -> jobdef.Requests:
    """Push each image the dry run looked up, check it is the one the dry run named (the same
    content tag), and return the requests with the pushed images (``with_images``)."""
    images = {}
    for push in pushes:
        built = cluster.build(push.base, push.path, **push.options)
        if built.tag != push.tag:
            raise UsageError(f"workspace {push.path} changed since the dry run; run again")
        images[push.reference] = built.reference
    return with_images(requests, images)


def with_images(requests: jobdef.Requests, images: Mapping[str, str]) -> jobdef.Requests:
    """``requests`` with each container image that ``images`` maps replaced, and the job
    definition renamed for its new content (``jobdef.definition_name``)."""
    images = {old: new for old, new in images.items() if old != new}
    if not images:
        return requests
    body = copy.deepcopy(requests.register)
    body.pop("jobDefinitionName", None)
    containers: list[dict[str, Any]] = [
        *([body["containerProperties"]] if "containerProperties" in body else []),
        *(r["container"] for r in body.get("nodeProperties", {}).get("nodeRangeProperties", [])),
    ]
    for container in containers:
        container["image"] = images.get(container["image"], container["image"])
    name = jobdef.definition_name(body)
    submit = {**requests.submit, "jobDefinition": name}
    return jobdef.Requests({"jobDefinitionName": name, **body}, submit)
