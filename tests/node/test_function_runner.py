"""The runner a Python function's nodes run (launcher.node.function), on this machine's python3:
what it refuses before loading anything, S3 signed with the standard library against the
emulator, the main node gathering its workers' results, and a hostile name in the directory."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
import zipfile

import pytest

from launcher.errors import UsageError
from launcher.job import function
from launcher.node.function import (
    FUNCTION_ENV,
    GATHER_ENV,
    PAYLOAD,
    REFUSED_EXIT,
    REGION_ENV,
    RUNNER,
)

PYTHON3 = "/usr/bin/python3"  # an image's interpreter: no cloudpickle of its own


def run(tmp_path, env: dict[str, str], rank: int = 0, nodes: int = 1):
    scratch = tmp_path / "node-tmp"
    scratch.mkdir(exist_ok=True)
    return subprocess.run(
        [PYTHON3, "-c", RUNNER],
        env={
            "PATH": os.environ["PATH"],
            "TMPDIR": str(scratch),  # the machine's /tmp is every run's
            "LAUNCHER_NODE_RANK": str(rank),
            "LAUNCHER_NNODES": str(nodes),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def with_meta(payload: bytes, **meta: str) -> bytes:
    """The payload with ``meta.json``'s values replaced, as another version's caller writes it."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(payload)) as old, zipfile.ZipFile(out, "w") as new:
        for item in old.infolist():
            data = old.read(item)
            if item.filename == "meta.json":
                data = json.dumps({**json.loads(data), **meta}).encode()
            new.writestr(item, data)
    return out.getvalue()


def square(x: int) -> int:
    return x * x


@pytest.fixture
def call_dir(tmp_path):
    where = tmp_path / "call"
    where.mkdir(mode=0o700)
    return where


def test_a_payload_of_another_python_is_refused_before_any_of_it_is_loaded(tmp_path, call_dir):
    """cloudpickle's README: pickles are for "the exact same version of Python"; CPython's
    bytecode changes between minor versions (importlib.util.MAGIC_NUMBER)."""
    (call_dir / PAYLOAD).write_bytes(with_meta(function.pack(square, (3,), {}), python="3.12.1"))
    done = run(tmp_path, {FUNCTION_ENV: f"{call_dir}/"})
    version = "import platform; print(platform.python_version())"
    mine = subprocess.check_output([PYTHON3, "-c", version], text=True).strip()
    line = (
        f"this image runs Python {mine}, the caller Python 3.12.1: a function travels only "
        f"between one Python version; use an image with Python 3.12, or call from Python "
        f"{mine.rsplit('.', 1)[0]}"
    )
    assert done.returncode == REFUSED_EXIT
    assert done.stderr == f"launcher: {line}\n"
    outcome = function.parse_result(0, (call_dir / "result-0").read_bytes())
    with pytest.raises(UsageError) as raised:
        function.value_of(outcome)
    assert str(raised.value) == line


def test_a_missing_payload_is_said_not_crashed_on(tmp_path, call_dir):
    done = run(tmp_path, {FUNCTION_ENV: f"{call_dir}/"})
    assert done.returncode == REFUSED_EXIT
    assert done.stderr.startswith(f"launcher: no payload at {call_dir}/payload: it expired or ")
    assert "Traceback" not in done.stderr


def test_a_result_is_the_directory_owners_and_a_planted_link_is_replaced_not_followed(
    tmp_path, call_dir
):
    (call_dir / PAYLOAD).write_bytes(function.pack(square, (7,), {}))
    victim = tmp_path / "victim"
    victim.write_text("mine")
    os.symlink(victim, call_dir / "result-0")
    done = run(tmp_path, {FUNCTION_ENV: f"{call_dir}/"})
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "mine"
    result = call_dir / "result-0"
    assert not result.is_symlink() and oct(result.stat().st_mode & 0o777) == "0o600"
    assert function.value_of(function.parse_result(0, result.read_bytes())) == 49


def test_the_main_node_waits_for_its_workers_results_when_every_rank_is_asked_for(
    tmp_path, call_dir
):
    """Batch ends a multi-node job when the main node's command ends ("the job is considered
    finished when the main node exits": Batch user guide, multi-node-parallel-jobs.html)."""
    (call_dir / PAYLOAD).write_bytes(function.pack(square, (2,), {}))
    env = {FUNCTION_ENV: f"{call_dir}/", GATHER_ENV: "all"}
    later = threading.Timer(3, lambda: run(tmp_path, env, rank=1, nodes=2))
    started = time.monotonic()
    later.start()
    done = run(tmp_path, env, rank=0, nodes=2)
    later.join()
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started >= 3  # it waited for node 1
    assert (call_dir / "result-1").exists()
    # A retried job's main node waits for its own attempt's, not a failed attempt's left there.
    (call_dir / "result-0").unlink()
    retried = {**env, "AWS_BATCH_JOB_ATTEMPT": "2"}
    later = threading.Timer(3, lambda: run(tmp_path, retried, rank=1, nodes=2))
    started = time.monotonic()
    later.start()
    assert run(tmp_path, retried, rank=0, nodes=2).returncode == 0
    later.join()
    assert time.monotonic() - started >= 3
    outcomes = {
        r: function.parse_result(r, (call_dir / f"result-{r}").read_bytes()) for r in (0, 1)
    }
    assert [o.attempt for o in outcomes.values()] == ["2", "2"]
    assert function.stale(outcomes) == []
    # With only the main node's value asked for, it does not wait.
    started = time.monotonic()
    (call_dir / "result-0").unlink()
    assert run(tmp_path, {**env, GATHER_ENV: "main"}, rank=0, nodes=4).returncode == 0
    assert time.monotonic() - started < 10


@pytest.fixture
def bucket(moto_server):
    s3 = moto_server.client("s3")
    name = f"payloads-{os.getpid()}"
    s3.create_bucket(Bucket=name)
    return s3, name


def test_s3_is_read_and_written_with_the_standard_library_alone(tmp_path, moto_server, bucket):
    """The image's python3 has no SDK: GET and PUT signed with SigV4 by hand (the S3 API
    reference, "Authenticating Requests (AWS Signature Version 4)"), path-style against the
    emulator as AWS_ENDPOINT_URL asks. moto does not verify signatures; the signing code is
    the check job's S3 probe's (launcher.node.check_script), which real accounts answer."""
    s3, name = bucket
    prefix = "functions/" + function.new_call_id() + "/"
    s3.put_object(Bucket=name, Key=prefix + PAYLOAD, Body=function.pack(square, (9,), {}))
    env = {
        **moto_server.env,
        FUNCTION_ENV: f"s3://{name}/{prefix}",
        REGION_ENV: moto_server.env["AWS_REGION"],
    }
    done = run(tmp_path, env)
    assert done.returncode == 0, done.stderr
    body = s3.get_object(Bucket=name, Key=prefix + "result-0")["Body"].read()
    assert function.value_of(function.parse_result(0, body)) == 81
    # A bucket that is not there: S3's 404 ends the node with S3's words, not a hang.
    gone = run(tmp_path, {**env, FUNCTION_ENV: f"s3://no-such-bucket-{os.getpid()}/{prefix}"})
    assert gone.returncode == REFUSED_EXIT and "no payload at s3://no-such-bucket" in gone.stderr


def test_the_callers_cloudpickle_is_the_one_that_loads_the_call(tmp_path, call_dir):
    """The image's python3 has no cloudpickle at all; the payload brings the caller's."""
    assert subprocess.run([PYTHON3, "-c", "import cloudpickle"], capture_output=True).returncode
    (call_dir / PAYLOAD).write_bytes(function.pack(lambda: sys.version_info[:2], (), {}))
    done = run(tmp_path, {FUNCTION_ENV: f"{call_dir}/"})
    assert done.returncode == 0, done.stderr
    value = function.value_of(function.parse_result(0, (call_dir / "result-0").read_bytes()))
    assert tuple(value) == tuple(sys.version_info[:2])
