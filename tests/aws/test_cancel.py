"""`launcher cancel` of several jobs: TerminateJobs 50 ids a call, one TerminateJob a job where
the API is absent (an older botocore, an endpoint that does not know it), one line per job.

AWS's side is botocore 1.44's batch model and the API reference (API_TerminateJobs.html,
API_CancelJobs.html); the emulated side is moto's server over HTTP, whose own access log says
which calls reached it.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import logging
import os
import re
import threading
import uuid
from collections import Counter
from collections.abc import Iterator

import botocore.exceptions
import botocore.loaders
import botocore.parsers
import botocore.session
import pytest

from devenv import moto_gaps
from devenv.emulator import ACCOUNT, REGION, MotoServer
from launcher.aws import client as aws
from launcher.aws.batch import terminate_requests
from launcher.errors import UsageError
from launcher.job.info import CANCEL_REASON, JobState
from launcher.job.shapes import parse_indexes
from launcher.local import LOST_REASON, Store
from tests.cli.test_commands import launcher, ok
from tests.local.test_state import _gone, _record
from tests.support import cli
from tests.support.service_model import assert_valid

IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/base@sha256:" + "a" * 64
MISSING = "00000000-0000-4000-8000-000000000000"
TERMINATE_JOBS = "https://docs.aws.amazon.com/batch/latest/APIReference/API_TerminateJobs.html"

# --- requests and responses (no I/O) -----------------------------------------------------------


def test_requests_carry_50_ids_each_and_fit_the_model():
    """TerminateJobs "Terminates up to 50 jobs" (botocore 1.44 batch model; API reference,
    API_TerminateJobs.html): 120 ids are three calls, each valid for the model."""
    ids = [f"{uuid.UUID(int=n)}" for n in range(120)]
    requests = terminate_requests(ids)
    assert [len(r["jobs"]) for r in requests] == [50, 50, 20]
    assert [j for r in requests for j in r["jobs"]] == ids
    for request in requests:
        assert request["reason"] == CANCEL_REASON
        assert_valid("batch", "TerminateJobs", request)


def _parsed(operation: str, body: dict) -> dict:
    """A 200 answer to ``operation`` as botocore reads it off the wire, by the model."""
    model = botocore.session.get_session().get_service_model("batch").operation_model(operation)
    parser = botocore.parsers.create_parser("rest-json")
    raw = {"status_code": 200, "headers": {}, "body": json.dumps(body).encode()}
    return parser.parse(raw, model.output_shape)


@pytest.mark.parametrize("operation", ["TerminateJobs", "CancelJobs"])
def test_refusals_are_read_from_the_errors_of_a_200_answer(operation):
    """"The response returns an HTTP status code of 200 even when some jobs encountered errors,
    so check the errors list"; each item is a TerminateJobsErrorDetail (CancelJobsErrorDetail)
    of ``job``, ``code`` and ``message`` (botocore 1.44 batch model; API_TerminateJobs.html,
    API_CancelJobs.html)."""
    response = _parsed(
        operation,
        {
            "successful": ["a", "b"],
            "errors": [
                {"job": "c", "code": "AccessDenied", "message": "not yours"},
                {"job": "d", "code": "ThrottlingException", "message": "slow down"},
            ],
        },
    )
    assert aws.refusals(response) == {
        "c": ("AccessDenied", "not yours"),
        "d": ("ThrottlingException", "slow down"),
    }
    assert aws.refusals(_parsed(operation, {"successful": ["a"], "errors": []})) == {}


@pytest.mark.parametrize(
    ("status", "code", "unknown"),
    [
        (404, "404", True),  # moto 5.2.5's server: no such route
        (404, "UnknownOperationException", True),
        (501, "NotImplemented", True),
        (400, "ClientException", False),  # Batch's own refusal of a valid operation
        (500, "ServerException", False),
    ],
)
def test_only_an_unknown_operation_answer_means_no_bulk_api(status, code, unknown):
    """Batch's operations fail with ClientException (400) or ServerException (500), the
    model's only errors for TerminateJobs (botocore 1.44 batch model); anything else that
    is a 404, a 501 or UnknownOperationException says the operation is unknown there."""
    error = botocore.exceptions.ClientError(
        {"Error": {"Code": code, "Message": ""}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "TerminateJobs",
    )
    assert aws.unknown_operation(error) is unknown


@pytest.mark.parametrize(
    ("text", "indexes"),
    [("3", (3,)), ("0-3", (0, 1, 2, 3)), ("7, 2-3,7", (7, 2, 3)), ("9999", (9999,))],
)
def test_index_lists_name_children_in_order_once(text, indexes):
    assert parse_indexes(text) == indexes


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "expected child indexes"),
        ("a", "expected child indexes"),
        ("-1", "expected child indexes"),
        ("3-", "expected child indexes"),
        ("5-2", "5-2 runs backwards; write 2-5"),
        ("0-10000", "children are numbered 0-9999"),
    ],
)
def test_bad_index_lists_are_refused(text, fragment):
    with pytest.raises(UsageError, match=re.escape(fragment)):
        parse_indexes(text)


# --- the command line, refusing before any call ------------------------------------------------

NO_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": REGION,
    "AWS_DEFAULT_REGION": REGION,
    # Nothing listens here: a call made would fail the test with exit 1, not 2.
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    "AWS_MAX_ATTEMPTS": "1",
}


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--index", "2-1", MISSING], "--index '2-1': 2-1 runs backwards"),
        (["--index", "1", MISSING, MISSING[:-1] + "1"], "--index 1: give one array job, not 2"),
        ([MISSING, "local-" + MISSING], "local and AWS Batch jobs in one cancel"),
        ([MISSING, "not a job"], "job 'not a job': not a job id of AWS Batch"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_calls_nothing(tmp_path, args, fragment):
    env = {**os.environ, **NO_AWS, "LAUNCHER_LOCAL_STATE": str(tmp_path)}
    result = cli.launcher("cancel", *args, env=env)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("launcher: error: ") and fragment in line


# --- the local backend: the same command, one cancel a job -------------------------------------


def _local_job(store: Store, status: JobState) -> str:
    """A local job whose supervisor is gone (a cancel ends it itself: no Docker engine)."""
    record = _record(f"local-{uuid.uuid4()}", status=status, writer=_gone())
    store.create(record)
    return record.job_id


def test_local_jobs_are_cancelled_together_one_line_each(tmp_path):
    """Two local jobs whose supervisors are gone are ended (no Docker engine: no containers);
    one that had ended is reported as a cancel of it alone would be, and exits 2."""
    store = Store(tmp_path)
    first, second = (_local_job(store, JobState.RUNNING) for _ in range(2))
    done = _local_job(store, JobState.SUCCEEDED)
    env = {**os.environ, "LAUNCHER_LOCAL_STATE": str(tmp_path)}
    result = cli.launcher("cancel", first, done, second, first, env=env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"cancelled {first} (train, was RUNNING)",
        f"launcher: error: job {done} already SUCCEEDED; nothing to cancel",
        f"cancelled {second} (train, was RUNNING)",
    ]
    for job_id in (first, second):
        assert (store.load(job_id).status, store.load(job_id).status_reason) == (
            JobState.FAILED,
            LOST_REASON,
        )


def test_an_unknown_local_id_cancels_none_of_the_others(tmp_path):
    store = Store(tmp_path)
    job_id = _local_job(store, JobState.RUNNING)
    unknown = f"local-{uuid.uuid4()}"
    env = {**os.environ, "LAUNCHER_LOCAL_STATE": str(tmp_path)}
    result = cli.launcher("cancel", job_id, unknown, env=env)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"launcher: error: job {unknown}: no such job among the local jobs; nothing cancelled"
    ]
    assert store.load(job_id).status is JobState.RUNNING


# --- per-job outcomes no emulator gives, over HTTP ---------------------------------------------


class _Batch(http.server.BaseHTTPRequestHandler):
    """DescribeJobs and TerminateJobs on 127.0.0.1, answered in the shapes of botocore 1.44's
    batch model: every job in ``jobs`` (id -> status) is described; TerminateJobs answers 200
    and puts a job in ``errors`` with ``refuse``'s (code, message), or with a
    ThrottlingException the first time it sees a job in ``throttle``. Records each call."""

    jobs: dict[str, str]
    refuse: dict[str, tuple[str, str]]
    throttle: set[str]
    calls: list[tuple[str, list[str]]]

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        cls.calls.append((self.path, body["jobs"]))
        if self.path == "/v1/describejobs":
            answer: dict = {
                "jobs": [
                    {"jobId": j, "jobName": "shard", "status": cls.jobs[j]}
                    for j in body["jobs"]
                    if j in cls.jobs
                ]
            }
        else:
            errors = {j: cls.refuse[j] for j in body["jobs"] if j in cls.refuse}
            for j in cls.throttle & set(body["jobs"]):
                errors[j] = ("ThrottlingException", "Rate exceeded")
                cls.throttle.discard(j)
            answer = {
                "successful": [j for j in body["jobs"] if j not in errors],
                "errors": [{"job": j, "code": c, "message": m} for j, (c, m) in errors.items()],
            }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def batch_endpoint(monkeypatch):
    handler = type("Handler", (_Batch,), {"jobs": {}, "refuse": {}, "throttle": set()})
    handler.calls = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(aws, "BULK_PAUSE", 0.01)
    for name, value in NO_AWS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_port}")
    yield handler
    server.shutdown()


def test_jobs_throttled_in_a_200_answer_are_sent_again(batch_endpoint):
    """Per-job "ThrottlingException – The request was throttled. Retry the request." (botocore
    1.44 batch model, TerminateJobsErrorDetail.code; API_TerminateJobs.html): the throttled
    job goes again, alone, and nothing is reported refused once it is through."""
    batch_endpoint.throttle = {"b"}
    refused = aws.Aws().terminate_jobs({"jobs": ["a", "b"], "reason": CANCEL_REASON})
    assert refused == {}
    assert batch_endpoint.calls == [("/v1/terminatejobs", ["a", "b"]), ("/v1/terminatejobs", ["b"])]


def test_a_job_throttled_every_round_is_reported_with_its_code(batch_endpoint, monkeypatch):
    monkeypatch.setattr(aws, "BULK_ROUNDS", 1)
    batch_endpoint.throttle = {"a"}
    refused = aws.Aws().terminate_jobs({"jobs": ["a"], "reason": CANCEL_REASON})
    assert refused == {"a": "AWS TerminateJobs failed: ThrottlingException: Rate exceeded"}


def test_a_job_refused_in_a_200_answer_is_its_own_error_line(batch_endpoint):
    """TerminateJobs answers 200 with the jobs it refused in ``errors`` ("AccessDenied – The
    caller isn't authorized to perform the action on the specified job", botocore 1.44 batch
    model; API_TerminateJobs.html): that job gets one error line naming it, the others are
    cancelled, and the command exits 1 as a refused TerminateJob of one job does."""
    ids = [str(uuid.UUID(int=n)) for n in range(1, 4)]
    batch_endpoint.jobs = dict.fromkeys(ids, "RUNNING")
    batch_endpoint.refuse = {ids[1]: ("AccessDenied", "not authorized on this job")}
    result = cli.launcher("cancel", *ids)
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        f"cancelled {ids[0]} (shard, was RUNNING)",
        f"launcher: error: job {ids[1]}: AWS TerminateJobs failed: AccessDenied: "
        "not authorized on this job",
        f"cancelled {ids[2]} (shard, was RUNNING)",
    ]
    assert [path for path, _ in batch_endpoint.calls] == ["/v1/describejobs", "/v1/terminatejobs"]


# --- the emulated AWS: bulk calls, their fallback, counted by the server ------------------------

_ANSI = re.compile(r"\x1b\[[\d;]*m")
_REQUEST = re.compile(r"^(\w+) (/\S*) HTTP/")


@contextlib.contextmanager
def server_log() -> Iterator[Counter[tuple[str, int]]]:
    """``(path, status)`` of each request moto's servers in this process answer meanwhile,
    from their access log (werkzeug's logger, which devenv.emulator keeps quiet)."""
    seen: Counter[tuple[str, int]] = Counter()

    class Count(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if isinstance(record.args, tuple) and len(record.args) == 3:
                line, code, _ = record.args
                match = _REQUEST.match(_ANSI.sub("", str(line)))
                if match:
                    seen[(match[2], int(code))] += 1

    logger = logging.getLogger("werkzeug")
    level, handler = logger.level, Count()
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def calls(seen: Counter[tuple[str, int]], path: str) -> dict[int, int]:
    return {status: n for (p, status), n in seen.items() if p == path}


@pytest.fixture(scope="module")
def cluster(moto_server, synth_default):
    moto_server.reset()
    moto_server.deploy(synth_default.outdir, synth_default.stack_names)
    return moto_server


def submit(server, *args: str) -> str:
    result = launcher(server, "run", "--no-workspace", "--image", IMAGE, *args, "--", "true")
    return ok(result).stdout.strip().splitlines()[-1]


def states(server, job_ids: list[str]) -> dict[str, tuple[str, str | None]]:
    found = server.client("batch").describe_jobs(jobs=job_ids)["jobs"]
    return {j["jobId"]: (j["status"], j.get("statusReason")) for j in found}


def test_the_emulated_bulk_calls_answer_as_the_model_says(cluster):
    """devenv.moto_gaps serves TerminateJobs and CancelJobs as botocore 1.44's model documents
    them (API_TerminateJobs.html, API_CancelJobs.html): "Jobs that can't be found are treated as
    successfully processed", each job reported in ``successful`` or ``errors``, "up to 50"."""
    batch = cluster.client("batch")
    waiting, running = submit(cluster), submit(cluster, "--nodes", "2")
    moto_gaps.start_job(ACCOUNT, REGION, running)
    cancelled = batch.cancel_jobs(jobs=[waiting, running, MISSING], reason="r")
    assert (cancelled["successful"], cancelled["errors"]) == ([waiting, running, MISSING], [])
    assert [s for s, _ in states(cluster, [waiting, running]).values()] == ["FAILED", "RUNNING"]
    terminated = batch.terminate_jobs(jobs=[running, MISSING], reason="r")
    assert (terminated["successful"], terminated["errors"]) == ([running, MISSING], [])
    assert states(cluster, [running])[running] == ("FAILED", "r")
    with pytest.raises(botocore.exceptions.ClientError, match="up to 50 job IDs, not 51"):
        batch.terminate_jobs(jobs=[MISSING] * 51, reason="r")


def test_one_job_is_one_terminate_job_call_as_before(cluster):
    job = submit(cluster)
    with server_log() as seen:
        result = ok(launcher(cluster, "cancel", job))
    assert result.stderr.strip().splitlines() == [f"cancelled {job} (true, was RUNNABLE)"]
    assert calls(seen, "/v1/terminatejob") == {200: 1}
    assert calls(seen, "/v1/terminatejobs") == {}
    assert states(cluster, [job]) == {job: ("FAILED", CANCEL_REASON)}


def test_array_children_are_cancelled_50_to_a_call(cluster):
    """TerminateJobs takes "up to 50 jobs" and reports each one (botocore 1.44 batch model;
    API_TerminateJobs.html): 59 children still waiting are two calls, after one DescribeJobs
    for the array and one for its 60 children (100 ids a call). A child that had ended is
    reported on its own line, as a cancel of it alone is (exit 2), and not sent."""
    array = submit(cluster, "--array", "60")
    moto_gaps.run_container_job(ACCOUNT, REGION, f"{array}:59", lambda _: (0, ["done"]))
    children = [f"{array}:{k}" for k in range(60)]
    with server_log() as seen:
        result = launcher(cluster, "cancel", array, "--index", "0-59")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[:59] == [f"cancelled {c} (true, was RUNNABLE)" for c in children[:59]]
    assert lines[59:] == [f"launcher: error: job {array}:59 already SUCCEEDED; nothing to cancel"]
    assert calls(seen, "/v1/terminatejobs") == {200: 2}
    assert calls(seen, "/v1/terminatejob") == {}
    assert calls(seen, "/v1/describejobs") == {200: 2}
    after = states(cluster, children)
    assert {after[c] for c in children[:59]} == {("FAILED", CANCEL_REASON)}
    assert after[children[59]][0] == "SUCCEEDED"


def test_several_jobs_by_id_and_an_unknown_one_cancels_nothing(cluster):
    """Unknown ids are found by the DescribeJobs before any cancel (TerminateJobs itself would
    count them as successful: "Jobs that can't be found are treated as successfully
    processed", API_TerminateJobs.html), so a typo stops the whole command."""
    first, second = submit(cluster), submit(cluster)
    with server_log() as seen:
        refused = launcher(cluster, "cancel", first, MISSING, second)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"launcher: error: job {MISSING}: no such job in this account and region; "
        "nothing cancelled"
    ]
    assert calls(seen, "/v1/terminatejobs") == {} and calls(seen, "/v1/terminatejob") == {}
    assert {s for s, _ in states(cluster, [first, second]).values()} == {"RUNNABLE"}
    result = ok(launcher(cluster, "cancel", f"EfaBatch-jobs:{first}", second))
    assert len(result.stderr.strip().splitlines()) == 2
    assert states(cluster, [first, second]) == {
        first: ("FAILED", CANCEL_REASON),
        second: ("FAILED", CANCEL_REASON),
    }


@pytest.fixture
def endpoint_as_shipped(cluster):
    """A second moto server onto the same emulated account, with Batch as moto 5.2.5 ships it:
    no TerminateJobs or CancelJobs (its 404), as an endpoint older than the API answers."""
    from moto.server import ThreadedMotoServer

    threaded = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    threaded.start()
    host, port = threaded.get_host_and_port()
    server = MotoServer(threaded, f"http://{host}:{port}")
    with moto_gaps.batch_as_shipped():
        server.client("batch").describe_job_queues()  # its Batch routes are made now
    yield server
    threaded.stop()


def test_an_endpoint_without_the_api_gets_one_call_a_job(cluster, endpoint_as_shipped):
    """Where the endpoint does not know TerminateJobs (moto's 404), the launcher asks once per
    process and then terminates job by job with TerminateJob (botocore 1.44 batch model:
    TerminateJobs is "a bulk version of TerminateJob"; API_TerminateJobs.html): 60 children
    are one 404 and 60 TerminateJob calls, not one 404 per 50."""
    array = submit(cluster, "--array", "60")
    children = [f"{array}:{k}" for k in range(60)]
    with server_log() as seen:
        result = ok(launcher(endpoint_as_shipped, "cancel", array, "--index", "0-59"))
    assert len(result.stderr.strip().splitlines()) == 60
    assert calls(seen, "/v1/terminatejobs") == {404: 1}
    assert calls(seen, "/v1/terminatejob") == {200: 60}
    assert set(states(cluster, children).values()) == {("FAILED", CANCEL_REASON)}


@pytest.fixture
def botocore_without_bulk_calls(tmp_path):
    """botocore's own batch model less TerminateJobs and CancelJobs, where botocore looks
    first (AWS_DATA_PATH): a client as botocore before 1.44 makes it, without those methods."""
    loader = botocore.loaders.Loader()
    model = loader.load_service_model("batch", "service-2")
    for operation in ("TerminateJobs", "CancelJobs"):
        del model["operations"][operation]
    directory = tmp_path / "batch" / model["metadata"]["apiVersion"]
    directory.mkdir(parents=True)
    (directory / "service-2.json").write_text(json.dumps(model))
    return {"AWS_DATA_PATH": str(tmp_path)}


def test_a_botocore_without_the_api_gets_one_call_a_job(cluster, botocore_without_bulk_calls):
    """A botocore whose model lacks TerminateJobs (added in 1.44) makes a client without
    ``terminate_jobs``: no bulk call is attempted, one TerminateJob a job (API_TerminateJob)."""
    jobs = [submit(cluster) for _ in range(3)]
    with server_log() as seen:
        result = ok(launcher(cluster, "cancel", *jobs, env=botocore_without_bulk_calls))
    assert len(result.stderr.strip().splitlines()) == 3
    assert calls(seen, "/v1/terminatejobs") == {}
    assert calls(seen, "/v1/terminatejob") == {200: 3}
    assert set(states(cluster, jobs).values()) == {("FAILED", CANCEL_REASON)}
