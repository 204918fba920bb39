"""The nodes' user data: what the launch template adds to the instance's boot.

Batch merges a launch template's user data with its own, so it "must be in the MIME multi-part
archive format" (Batch user guide, launch-templates.html); each part is a shell script run at
boot, before the ECS agent starts. The format follows that page's example: a blank line before
every boundary and after every part's headers.
"""

from __future__ import annotations

from collections.abc import Mapping

BOUNDARY = "==EFABATCH=="
# Settings Batch writes to /etc/ecs/ecs.config itself; user data must not set them (Batch user
# guide, launch-templates.html).
RESERVED_ECS_SETTINGS = ("ECS_CLUSTER", "ECS_INSTANCE_ATTRIBUTES")


def ecs_agent_settings(settings: Mapping[str, str]) -> str:
    """A shell part that appends settings to the ECS agent's configuration file."""
    reserved = sorted(set(settings) & set(RESERVED_ECS_SETTINGS))
    if reserved:
        raise ValueError(f"{', '.join(reserved)}: Batch sets these itself")
    lines = [f"echo {key}={value} >> /etc/ecs/ecs.config" for key, value in settings.items()]
    return "#!/bin/bash\n" + "\n".join(lines) + "\n"


def mime_multipart(scripts: list[str]) -> str:
    """Shell scripts as one MIME multi-part archive, the format Batch can merge."""
    parts = [
        f'--{BOUNDARY}\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n{script}\n'
        for script in scripts
    ]
    header = f'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="{BOUNDARY}"\n\n'
    return header + "".join(parts) + f"--{BOUNDARY}--\n"
