"""A Python function as a job, without running it (launcher.job.function): what is refused
before anything is sent, what travels by value, where a call's objects go, and the traceback
the caller reads."""

from __future__ import annotations

import dataclasses
import json
import sys
import threading

import pytest

from devenv.clusters import cluster_info
from launcher.errors import FunctionError, UsageError
from launcher.job import function
from launcher.target import AwsTarget

CALLER = function.Versions("3.11.7", "3.1.3")


def test_an_image_of_another_minor_python_is_refused_and_a_patch_release_is_not():
    """CPython changes its bytecode (importlib.util.MAGIC_NUMBER) between minor versions only."""
    function.check_python("3.11.2", "img", CALLER)
    function.check_python(None, "img", CALLER)  # unknown here: the node checks
    with pytest.raises(UsageError) as raised:
        function.check_python("3.10.14", "REPO@sha256:ab", CALLER)
    assert str(raised.value) == (
        "image REPO@sha256:ab runs Python 3.10.14, this caller Python 3.11.7: a function "
        "travels only between one Python version; use an image with Python 3.11, or call from "
        "Python 3.10"
    )


def test_options_that_are_not_for_a_function_are_refused_in_one_line():
    for key, value in (("array", 4), ("torchrun", True), ("groups", ("g",))):
        with pytest.raises(UsageError, match=rf"^{key}: not for a function's job \("):
            function.spec_options(len, {key: value})
    with pytest.raises(UsageError, match=r"^ranks: 'every'; allowed: main, all$"):
        function.environment("s3://b/p/", "us-east-1", "every")


def test_a_job_is_named_after_its_function():
    assert function.spec_options(test_a_job_is_named_after_its_function, {})["name"] == (
        "call-test_a_job_is_named_after_its_function"
    )
    assert function.spec_options(lambda: 0, {})["name"] == "call-lambda"
    assert function.spec_options(len, {"name": "mine"})["name"] == "mine"
    # Python names may hold any letter; Batch's job names only ASCII ones (SubmitJob jobName).

    def entraîner() -> None: ...

    assert function.spec_options(entraîner, {})["name"] == "call-entra-ner"


def test_what_cannot_travel_is_refused_before_anything_is_sent():
    with pytest.raises(UsageError, match="is not callable; pass a function"):
        function.pack(42, (), {})  # type: ignore[arg-type]
    with pytest.raises(UsageError) as raised:
        function.pack(print, (threading.Lock(),), {})
    assert str(raised.value).startswith(
        "builtins.print: the function or its arguments cannot be sent: TypeError: "
    )


def helper(x: int) -> int:
    return x + 1


def test_the_callers_own_module_travels_by_value_and_an_installed_one_by_reference():
    """cloudpickle sends a module's function by reference unless the module is registered
    (register_pickle_by_value): this test module, which no image has, goes whole; json's
    functions go by name."""
    import zipfile
    from io import BytesIO

    def call_of(fn: object) -> bytes:
        with zipfile.ZipFile(BytesIO(function.pack(fn, (1,), {}))) as bundle:
            return bundle.read("call.pkl")

    by_value, by_name = call_of(helper), call_of(json.dumps)
    assert b"_make_function" in by_value and b"_make_function" not in by_name
    # Registered for the pack only: pickling this module's functions afterwards is as before.
    import cloudpickle

    assert b"_make_function" not in cloudpickle.dumps(helper)
    assert sys.modules[__name__].__name__ not in cloudpickle.list_registry_pickle_by_value()


def test_a_payload_carries_the_callers_versions_and_cloudpickle():
    import io
    import zipfile

    import cloudpickle

    with zipfile.ZipFile(io.BytesIO(function.pack(helper, (1,), {}))) as bundle:
        meta = json.loads(bundle.read("meta.json"))
        assert meta == {
            "python": ".".join(map(str, sys.version_info[:3])),
            "cloudpickle": cloudpickle.__version__,
        }
        assert "cloudpickle/cloudpickle.py" in bundle.namelist()


def test_a_remote_traceback_names_the_callers_file_and_its_lines():
    """cloudpickle drops a by-value function's file name (``<dynamic-code>``) and keeps its
    lines (its ``_code_reduce``)."""
    line = helper.__code__.co_firstlineno + 1
    remote = (
        "Traceback (most recent call last):\n"
        f'  File "<dynamic-code>", line {line}, in helper\n'
        'TypeError: can only concatenate str (not "int") to str\n'
    )
    assert function.located(remote, helper) == (
        "Traceback (most recent call last):\n"
        f'  File "{__file__}", line {line}, in helper\n'
        "    return x + 1\n"
        'TypeError: can only concatenate str (not "int") to str\n'
    )
    assert function.located(remote, len) == remote  # a built-in has no file to name


def test_a_calls_objects_are_under_its_teams_prefix_in_the_stacks_bucket():
    """One prefix per team, ending in ``/`` (IAM's s3 prefixes are plain string prefixes)."""
    info = dataclasses.replace(cluster_info(), function_bucket="payloads-1")
    plain = AwsTarget(info, aws=None).payloads("ab" * 16, "/mnt/efs")  # type: ignore[arg-type]
    assert plain.location == f"s3://payloads-1/functions/{'ab' * 16}/"
    assert plain.region == info.region
    team = AwsTarget(dataclasses.replace(info, team="vision"), aws=None)  # type: ignore[arg-type]
    assert (
        team.payloads("cd" * 16, "/mnt/efs").location
        == f"s3://payloads-1/functions/vision/{'cd' * 16}/"
    )


def test_a_result_the_runner_did_not_write_is_said_so():
    with pytest.raises(
        FunctionError, match="node 1's result is not one the runner writes"
    ):
        function.parse_result(1, b"garbage")
    refused = function.parse_result(
        0, json.dumps({"status": "refused", "message": "no"}).encode() + b"\n"
    )
    with pytest.raises(UsageError, match="^no$"):
        function.value_of(refused)


def test_a_workers_result_of_an_earlier_attempt_is_not_taken_for_this_ones():
    """Batch runs every node again in a retried attempt (AWS_BATCH_JOB_ATTEMPT); a worker that
    did not finish leaves the failed attempt's result in place."""

    def result(attempt: str) -> bytes:
        return json.dumps({"attempt": attempt, "status": "ok"}).encode() + b"\n"

    outcomes = {r: function.parse_result(r, result(a)) for r, a in ((0, "2"), (1, "1"), (2, "2"))}
    assert function.stale(outcomes) == [1]
    assert function.stale({1: outcomes[1]}) == []  # no main node's result: nothing to compare
