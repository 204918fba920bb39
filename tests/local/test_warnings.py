"""A local run's warnings: one readable line each, naming only what concerns the job."""

from __future__ import annotations

from launcher.local.backend import missing_devices
from launcher.local.containers import capped_limits, limit_text


def test_only_the_limits_the_job_asked_for_that_were_lowered_are_named():
    asked = [
        {"name": "memlock", "softLimit": -1, "hardLimit": -1},
        {"name": "nofile", "softLimit": 65536, "hardLimit": 65536},
        {"name": "stack", "softLimit": 67108864, "hardLimit": 67108864},
    ]
    caps = {"core": -1, "cpu": -1, "memlock": 8 * 2**20, "nofile": 1048576, "stack": -1}
    assert capped_limits(asked, caps) == ["memlock 8 MiB (asked unlimited)"]
    caps["nofile"] = 4096
    assert capped_limits(asked, caps) == [
        "memlock 8 MiB (asked unlimited)",
        "nofile 4096 (asked 65536)",
    ]
    assert capped_limits(asked, {"memlock": -1, "nofile": -1}) == []


def test_limits_read_in_their_units():
    assert limit_text("memlock", -1) == "unlimited"
    assert limit_text("memlock", 65536) == "64 KiB"
    assert limit_text("stack", 8 * 2**20) == "8 MiB"
    assert limit_text("nproc", 4096) == "4096"


def test_missing_efa_and_gpus_are_one_line():
    assert missing_devices(efa=True, gpu=True) == (
        "no EFA or GPU on this machine: the job runs on CPU, NCCL over TCP "
        "(expected for a local run)"
    )
    assert missing_devices(efa=True, gpu=False) == (
        "no EFA on this machine: NCCL runs over TCP (expected for a local run)"
    )
    assert missing_devices(efa=False, gpu=True) == (
        "no GPU on this machine: the job runs on CPU (expected for a local run)"
    )
    assert missing_devices(efa=False, gpu=False) is None
