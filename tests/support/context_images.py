"""Small test images built from an in-memory context: a Dockerfile and a few files."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Mapping


def build(engine, tag: str, dockerfile: str, files: Mapping[str, tuple[str, int]]) -> str:
    """Build ``tag`` on ``engine`` (devenv's DockerEngine) from ``dockerfile`` and ``files``
    (context path -> text and mode); the tag back."""
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for path, (text, mode) in {"Dockerfile": (dockerfile, 0o644), **files}.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    engine.client().images.build(fileobj=context, custom_context=True, tag=tag, rm=True)
    return tag
