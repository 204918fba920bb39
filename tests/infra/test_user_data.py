"""The nodes' user data parses as the MIME multi-part archive Batch merges with its own."""

from __future__ import annotations

import email
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from infra.lustre import AGENT_DROP_IN, MOUNT_UNIT, MOUNTER, mount_script
from infra.user_data import ecs_agent_settings, mime_multipart
from tests.rules.data_rules import unit_settings
from tests.support.chroot import copy_with_libraries


def test_user_data_is_a_mime_archive_of_shell_parts():
    text = mime_multipart([ecs_agent_settings({"ECS_AWSVPC_BLOCK_IMDS": "true"}), "echo two\n"])
    message = email.message_from_string(text)
    assert message.is_multipart() and message.get_content_type() == "multipart/mixed"
    parts = message.get_payload()
    assert [p.get_content_type() for p in parts] == ["text/x-shellscript"] * 2
    assert "echo ECS_AWSVPC_BLOCK_IMDS=true >> /etc/ecs/ecs.config" in parts[0].get_payload()
    # Batch's format rules: a blank line before every boundary, the closing one last.
    assert "\n\n--==EFABATCH==\n" in text and text.endswith("\n--==EFABATCH==--\n")


def test_settings_batch_writes_itself_are_refused():
    with pytest.raises(ValueError, match="ECS_CLUSTER"):
        ecs_agent_settings({"ECS_CLUSTER": "x"})


# --- the FSx mount, run as a node would run it ----------------------------------------------
#
# The user-data part runs in a chroot built from this machine's bash and coreutils, with the
# commands a test machine has no real counterpart for (dnf, mount, mountpoint, systemctl,
# poweroff, sleep) replaced by scripts that record their calls and play a Lustre server that
# answers after some attempts, or never. The unit files it writes are checked by the real
# systemd (systemd-analyze verify, systemctl --root enable) next to stand-ins for the ECS
# agent's and cloud-init's units with the orderings AWS's have.

DNS = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
MOUNT_NAME = "abcdefgh"
HOST_BINARIES = ("bash", "cat", "mkdir", "chmod", "seq", "true")
STUB = """#!/bin/bash
echo "{name}${{*:+ $*}}" >> /state/calls
{body}
"""
STUBS = {
    "dnf": "exit 0",
    "systemctl": "exit 0",
    "poweroff": "exit 0",
    "sleep": "exit 0",
    # A Lustre server that answers from attempt N on (/state/answers-at; none: never).
    "mount": "n=1; [ -e /state/attempts ] && n=$(( $(cat /state/attempts) + 1 ))\n"
    "echo $n > /state/attempts\n"
    "[ -e /state/answers-at ] && [ $n -ge $(cat /state/answers-at) ] && "
    ": > /state/mounted && exit 0\nexit 32",
    "mountpoint": '[ "$2" = /fsx ] && [ -e /state/mounted ]',
}
# The ECS agent's unit as the ECS-optimized AMI ships it, in what matters here (amazon-ecs-agent,
# packaging/amazon-linux-ami-integrated/ecs.service: After=cloud-final.service,
# Restart=on-failure, RestartSec=10s), and cloud-init's final stage (cloud-final.service:
# After=network-online.target, Wants=network-online.target).
AGENT_UNIT = """[Unit]
Description=Amazon Elastic Container Service - container agent
After=cloud-final.service

[Service]
Type=simple
Restart=on-failure
RestartSec=10s
ExecStart=/usr/bin/true

[Install]
WantedBy=multi-user.target
"""
CLOUD_FINAL_UNIT = """[Unit]
Description=Cloud-init: Final Stage
After=network-online.target
Wants=network-online.target

[Service]
Type=oneshot
ExecStart=/usr/bin/true

[Install]
WantedBy=multi-user.target
"""


@pytest.fixture
def node(tmp_path) -> Path:
    """A root with bash, coreutils and the stubs, the ECS agent's and cloud-init's units, and
    systemd's own unit library (for systemd-analyze)."""
    root = tmp_path / "node"
    for binary in HOST_BINARIES:
        copy_with_libraries(binary, root)
    for name, body in STUBS.items():
        stub = root / "usr/bin" / name
        stub.write_text(STUB.format(name=name, body=body))
        stub.chmod(0o755)
    (root / "bin").symlink_to("usr/bin")
    (root / "sbin").symlink_to("usr/bin")
    (root / "usr/sbin").symlink_to("bin")
    (root / "state").mkdir()
    units = root / "etc/systemd/system"
    units.mkdir(parents=True)
    (units / "ecs.service").write_text(AGENT_UNIT)
    (units / "cloud-final.service").write_text(CLOUD_FINAL_UNIT)
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    return root


def _run(root: Path, *command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [shutil.which("chroot") or "/usr/sbin/chroot", str(root), *command],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin", "LANG": "C"},
        timeout=60,
    )


def _calls(root: Path) -> list[str]:
    path = root / "state/calls"
    return path.read_text().splitlines() if path.exists() else []


def _first_boot(root: Path) -> subprocess.CompletedProcess:
    (root / "part.sh").write_text(mount_script(DNS, MOUNT_NAME))
    return _run(root, "/bin/bash", "/part.sh")


def _unit(root: Path, path: str) -> dict[str, dict[str, list[str]]]:
    return unit_settings((root / path.lstrip("/")).read_text())


def test_the_first_boot_installs_a_unit_that_mounts_before_the_agent(node):
    """User data runs once per instance ("By default, user data scripts and cloud-init
    directives run only during the boot cycle when you first launch an instance", EC2 user
    guide, user-data.html), so the part installs a unit enabled for every boot and starts it
    itself; the real systemd finds the units consistent and free of ordering cycles with the
    agent's "After=cloud-final.service" (amazon-ecs-agent, packaging/.../ecs.service)."""
    (node / "state/answers-at").write_text("1")
    done = _first_boot(node)
    assert done.returncode == 0, done.stderr
    assert _calls(node) == [
        "dnf install -y lustre-client",
        "systemctl daemon-reload",
        f"systemctl enable --now {MOUNT_UNIT}",
    ]
    assert oct((node / MOUNTER.lstrip("/")).stat().st_mode & 0o777) == "0o755"
    unit = _unit(node, f"/etc/systemd/system/{MOUNT_UNIT}")
    assert unit["Service"]["ExecStart"] == [MOUNTER]
    agent = _unit(node, AGENT_DROP_IN)
    assert agent["Unit"]["Requires"] == agent["Unit"]["After"] == [MOUNT_UNIT]
    verified = subprocess.run(
        [
            "systemd-analyze",
            "verify",
            f"--root={node}",
            f"/etc/systemd/system/{MOUNT_UNIT}",
            "/etc/systemd/system/ecs.service",
            "/etc/systemd/system/cloud-final.service",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (verified.returncode, verified.stdout + verified.stderr) == (0, "")
    # What `systemctl enable` does on the node: multi-user.target wants the unit at every boot.
    enabled = subprocess.run(
        ["systemctl", f"--root={node}", "enable", MOUNT_UNIT], capture_output=True, text=True
    )
    assert enabled.returncode == 0, enabled.stderr
    wants = node / "etc/systemd/system/multi-user.target.wants" / MOUNT_UNIT
    assert wants.is_symlink() and os.readlink(wants).endswith(MOUNT_UNIT)


def test_after_a_reboot_the_unit_mounts_again_before_the_agent_may_start(node):
    """A reboot loses the mount and does not run user data again; the enabled unit's ExecStart
    (read from the file systemd reads) mounts again, and the agent's ExecStartPre check passes
    only once /fsx is mounted (FSx user guide, mount-fs-auto-mount-onreboot.html)."""
    (node / "state/answers-at").write_text("1")
    assert _first_boot(node).returncode == 0
    (node / "state/mounted").unlink(missing_ok=True)  # the reboot
    (node / "state/calls").unlink()
    check = _unit(node, AGENT_DROP_IN)["Service"]["ExecStartPre"][0].split()
    assert _run(node, *check).returncode != 0  # the agent would not start yet
    (node / "state/attempts").unlink(missing_ok=True)
    (node / "state/answers-at").write_text("3")  # the file server answers on the third try
    (start,) = _unit(node, f"/etc/systemd/system/{MOUNT_UNIT}")["Service"]["ExecStart"]
    booted = _run(node, start)
    assert booted.returncode == 0, booted.stderr
    lustre = f"mount -t lustre -o relatime,flock {DNS}@tcp:/{MOUNT_NAME} /fsx"
    assert [c for c in _calls(node) if not c.startswith("mountpoint")] == [
        lustre,
        "sleep 10",
        lustre,
        "sleep 10",
        lustre,
    ]
    assert _run(node, *check).returncode == 0


def test_a_node_that_never_mounts_powers_off_and_its_agent_never_starts(node):
    """30 attempts 10 s apart, then poweroff, which the launch template turns into terminate
    (InstanceInitiatedShutdownBehavior); the reason goes to the console for
    `aws ec2 get-console-output`."""
    failed = _first_boot(node)
    (start,) = _unit(node, f"/etc/systemd/system/{MOUNT_UNIT}")["Service"]["ExecStart"]
    booted = _run(node, start)
    calls = _calls(node)
    assert booted.returncode == 1
    assert sum(c.startswith("mount -t lustre") for c in calls) == 30
    assert calls[-1] == "poweroff"
    assert booted.stderr.strip() == (
        f"FSx for Lustre: cannot mount {DNS}@tcp:/{MOUNT_NAME} at /fsx; this node powers off "
        "and terminates"
    )
    check = _unit(node, AGENT_DROP_IN)["Service"]["ExecStartPre"][0].split()
    assert _run(node, *check).returncode != 0
    assert failed.returncode == 0  # the part itself: its unit's start is systemd's (stubbed)
