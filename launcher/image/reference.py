"""Image references (``host[:port]/repo[:tag][@digest]``) as Docker reads them."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from launcher.errors import UsageError

DOCKER_HUB = "registry-1.docker.io"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPO = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class Reference:
    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def ref(self) -> str:
        """What to ask the registry for: the digest if pinned, else the tag."""
        return self.digest or self.tag or "latest"

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.repository}"

    def with_digest(self, digest: str) -> Reference:
        return Reference(self.registry, self.repository, None, digest)

    def __str__(self) -> str:
        if self.digest:
            return f"{self.name}@{self.digest}"
        return f"{self.name}:{self.tag or 'latest'}"


def parse(text: str, flag: str = "--image") -> Reference:
    rest, _, digest = text.partition("@")
    if digest and not _DIGEST.match(digest):
        raise UsageError(f"{flag} {text!r}: digest must be sha256: followed by 64 hex digits")
    first, slash, remainder = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, remainder
    else:
        registry, path = DOCKER_HUB, rest
        if "/" not in path:
            path = f"library/{path}"
    tag = None
    if ":" in path.rsplit("/", 1)[-1]:
        path, tag = path.rsplit(":", 1)
        if not _TAG.match(tag):
            raise UsageError(f"{flag} {text!r}: malformed tag {tag!r}")
    if not path or not _REPO.match(path):
        raise UsageError(
            f"{flag} {text!r}: malformed repository {path!r}; expected lower-case "
            "[registry/]name[:tag][@sha256:...]"
        )
    return Reference(registry, path, tag, digest or None)


def is_loopback(registry: str) -> bool:
    """Plain HTTP is allowed only for loopback registries, as Docker does."""
    host = registry.rsplit(":", 1)[0] if registry.count(":") == 1 else registry
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
