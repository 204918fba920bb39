"""Command-line values: each malformed one is refused with one line saying what is allowed."""

from __future__ import annotations

import pytest

from launcher.errors import UsageError
from launcher.job.jobspec import (
    EfaMode,
    JobSpec,
    Mount,
    default_name,
    parse_duration,
    parse_efa,
    parse_env,
    parse_mount,
    parse_since,
    parse_size_mib,
    parse_tag,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90m", 5400), ("2h", 7200), ("1h30m", 5400), ("3600", 3600), ("60s", 60), ("1h0m5s", 3605)],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["59s", "1m-", "ninety", "", "5x", "30"])
def test_bad_or_short_timeouts(text):
    with pytest.raises(UsageError, match="--timeout"):
        parse_duration(text)


def test_since_has_no_minimum():
    assert parse_since("10m") == 600
    assert parse_since("30s") == 30


@pytest.mark.parametrize(
    ("text", "mib"),
    [("64g", 65536), ("512m", 512), ("1024", 1024), ("2GiB", 2048), ("1t", 1048576)],
)
def test_sizes(text, mib):
    assert parse_size_mib(text) == mib


@pytest.mark.parametrize("text", ["lots", "-1g", "512k", "1.5g"])
def test_bad_sizes(text):
    with pytest.raises(UsageError, match="--shm-size"):
        parse_size_mib(text)


def test_env_and_tags():
    assert parse_env("NCCL_DEBUG=INFO") == ("NCCL_DEBUG", "INFO")
    assert parse_env("EMPTY=") == ("EMPTY", "")
    assert parse_env("URL=a=b") == ("URL", "a=b")
    assert parse_tag("team=ml") == ("team", "ml")
    for bad in ("NOVALUE", "1X=2", "A-B=1"):
        with pytest.raises(UsageError, match="--env"):
            parse_env(bad)
    with pytest.raises(UsageError, match="reserved by AWS Batch"):
        parse_env("AWS_BATCH_JOB_ID=1")
    with pytest.raises(UsageError, match="--tag"):
        parse_tag("aws:owner=me")


def test_mounts():
    assert parse_mount("type=efs,dst=/data") == Mount("efs", "/data")
    assert parse_mount("type=bind,src=/scratch,dst=/scratch,readonly") == Mount(
        "bind", "/scratch", "/scratch", readonly=True
    )
    assert parse_mount("type=device,src=/dev/fuse") == Mount(
        "device", "/dev/fuse", "/dev/fuse", permissions=("READ", "WRITE", "MKNOD")
    )
    assert parse_mount("type=device,src=/dev/a,dst=/dev/b,perm=r").permissions == ("READ",)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("type=nfs,dst=/x", "unknown type 'nfs'"),
        ("type=bind,dst=/x", "src= must be an absolute host path"),
        ("type=bind,src=rel,dst=/x", "src= must be an absolute host path"),
        ("type=efs,dst=relative", "dst= must be an absolute path"),
        ("type=efs,src=/a,dst=/b", "takes no src="),
        ("type=device", "a device needs src="),
        ("type=device,src=/dev/x,perm=rwx", "perm= takes letters from rwm"),
        ("type=bind,src=/a,dst=/b,colour=red", "unknown option colour"),
        ("type=efs,dst=/b,perm=r", "perm= applies to type=device only"),
    ],
)
def test_bad_mounts(text, fragment):
    with pytest.raises(UsageError, match="--mount") as info:
        parse_mount(text)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"nodes": 0}, "--nodes 0"),
        ({"attempts": 11}, "--retries 11: allowed 1-10"),
        ({"attempts": 0}, "--retries 0"),
        ({"name": "bad name"}, "--name 'bad name'"),
        ({"command": ()}, "no command given"),
        ({"priority": 10000}, "--priority 10000"),
        ({"gpus_per_node": -1}, "--gpus-per-node -1"),
        ({"efa": "fast"}, "--efa 'fast': allowed auto, require, off"),
    ],
)
def test_spec_rejects_bad_values(kwargs, fragment):
    values = {"name": "train", "command": ("python", "train.py"), "image": "img"} | kwargs
    with pytest.raises(UsageError) as info:
        JobSpec(**values)
    assert fragment in str(info.value)


def test_efa_modes_by_name():
    assert parse_efa("off") is EfaMode.OFF
    spec = JobSpec(name="train", command=("true",), image="img", efa="require")
    assert spec.efa is EfaMode.REQUIRE


def test_default_names():
    assert default_name(["python", "-u", "train.py", "--lr", "1"]) == "train"
    assert default_name(["python", "train.py"]) == "train"
    assert default_name(["/opt/bin/run-me.sh"]) == "run-me"
    assert default_name(["echo", "hi"]) == "echo"
