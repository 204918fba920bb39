"""The tags the launcher gives images in the cluster's repository, by kind.

Part of the contract with the stack: the repository's lifecycle policy (infra/storage.py)
expires each kind after its own age, by these prefixes.
"""

from __future__ import annotations

WORKSPACE_PREFIX = "ws-"  # a workspace patched onto a base: ws-<content key>
BASE_PREFIX = "base-"  # a base copied by a copy job: base-sha256-<its digest>
