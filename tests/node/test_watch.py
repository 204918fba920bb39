"""The node watch hears only the job's own nodes (issue 33, finding 3).

The main node's watch (launcher.node.watch) ends the command when a worker reports a failure
and retries the job when a worker is lost. Anyone who could reach its port used to do both: one
line, ``hello 1`` then ``exit 9``, ended a running job, and a peer that said ``hello 1`` and
hung up burned an attempt. On AWS every pool shares one security group that admits all
traffic from itself, so one team's job could end or retry another team's.

The fast tests run the prelude itself under dash, the main node and a worker as two processes
on this machine, with the attacker a socket of the test (127.0.0.1 only); the Docker tests run a
local job whose attacker is a node of the job itself, on the job's own network but without the
token, as a stranger on the cluster's network would be. Between them, the watch's parts
(hello, strangers, the door, the task address, a worker's welcome) are imported and tested one
by one. One file for all of the node watch, so it is longer than most.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from devenv.clusters import cluster_info
from launcher.aws.batch import BatchBackend
from launcher.errors import UsageError
from launcher.job import jobdef
from launcher.job.jobspec import JobSpec, NodeGroup
from launcher.job.node_ranges import as_one_node, with_overrides
from launcher.node import prelude
from tests.support.processes import rendezvous_port
from tests.support.service_model import assert_valid

DASH = shutil.which("dash")
TOKEN = "5e" * 32
STRANGER = "0f" * 32  # a token, but another job's
IGNORED = (
    "launcher: node watch: ignored {} connection(s) without this job's token, "
    "the first from 127.0.0.1"
)


# --- the prelude as processes on this machine -------------------------------------------------


def node(
    tmp_path: Path, rank: int, port: int, command: list[str], **env: str | None
) -> subprocess.Popen:
    """One node's prelude under dash, with a TMPDIR of its own for the prelude's files (the
    machine's /tmp is shared); ``env`` adds to the node's environment, or takes out what it sets
    to None."""
    if DASH is None:
        pytest.fail("dash is not installed (Debian's /bin/sh)")
    (tmp_path / f"node{rank}").mkdir(exist_ok=True)
    where = (
        {"LAUNCHER_MAIN_ADDR": "127.0.0.1"}
        if rank == 0
        else {"AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS": "127.0.0.1"}
    )
    environment = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",  # a python3
        "LAUNCHER_RESTARTS": "on",
        "LAUNCHER_NNODES": "2",
        "AWS_BATCH_JOB_NODE_INDEX": str(rank),
        "LAUNCHER_MAIN_PORT": str(port),
        "LAUNCHER_EFS": str(tmp_path),  # the checkpoint directory goes under it
        "LAUNCHER_START_SECONDS": "60",
        "TMPDIR": str(tmp_path / f"node{rank}"),
        prelude.WATCH_TOKEN_ENV: TOKEN,
        **where,
        **env,
    }
    return subprocess.Popen(
        [DASH, "-c", prelude.SCRIPT, prelude.ARGV0, *command],
        env={k: v for k, v in environment.items() if v is not None},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a lost node's whole group can be killed
    )


def until(flag: Path) -> list[str]:
    """A command that runs until the test creates ``flag``, then says so."""
    return ["sh", "-c", 'while [ ! -e "$1" ]; do sleep 0.1; done; echo trained', "-", str(flag)]


def listening(port: int) -> str | None:
    """The address a TCP socket of this network namespace listens on at ``port`` (from
    /proc/net/tcp: no connection, so none is counted)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, _, hex_port = local.partition(":")
        if int(hex_port, 16) == port and state == "0A":  # TCP_LISTEN
            return socket.inet_ntoa(struct.pack("=I", int(address, 16)))
    return None


def watch_address(port: int, process: subprocess.Popen, timeout: float = 15) -> str:
    end = time.monotonic() + timeout
    while (address := listening(port + 1)) is None:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < end, "the node watch never listened"
        time.sleep(0.05)
    return address


def send(port: int, data: bytes, *, wait: bool = True) -> None:
    """Connect to the watch as a stranger and send ``data``; ``wait``: until the watch hangs up."""
    with socket.create_connection(("127.0.0.1", port + 1), timeout=5) as c:
        c.sendall(data)
        if wait:
            try:
                while c.recv(256):
                    pass
            except OSError:
                pass


@pytest.fixture
def port():
    return rendezvous_port()


@pytest.fixture
def stop():
    """Every node process a test starts, killed with its group at the end."""
    started: list[subprocess.Popen] = []
    yield started.append
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()


def test_a_peer_without_the_token_cannot_end_the_job(tmp_path, port, stop):
    """Guards finding 3's first reproduction: ``hello 1`` then ``exit 9`` from anyone who
    reaches the port ended a running job. Neither that, nor another job's token, nor this job's
    token for a rank that is no worker, nor lines without any hello end it now; they are counted
    in one line when the command ends."""
    main = node(tmp_path, 0, port, until(tmp_path / "go"))
    stop(main)
    watch_address(port, main)
    attacks = [
        b"hello 1\nexit 9\n",
        f"hello {STRANGER} 1\nexit 9\n".encode(),
        f"hello {TOKEN} 0\nexit 9\n".encode(),  # the main node's rank: no worker says it
        f"hello {TOKEN[:-1]} 1\nexit 9\n".encode(),
        b"exit 9\n",
        b"\xff\xfe\n",
    ]
    for data in attacks:
        send(port, data)
    time.sleep(0.5)
    assert main.poll() is None, main.communicate()
    (tmp_path / "go").touch()
    out, err = main.communicate(timeout=20)
    assert (main.returncode, out) == (0, "trained\n"), err
    assert "failed" not in err and "lost" not in err
    assert err.splitlines().count(IGNORED.format(len(attacks))) == 1, err


def test_a_peer_that_says_hello_and_hangs_up_does_not_force_a_retry(tmp_path, port, stop):
    """Guards finding 3's second reproduction: ``hello 1`` and a hang-up counted as a lost
    worker, so the main node ended with the retryable exit code (75) and burned an attempt."""
    main = node(tmp_path, 0, port, until(tmp_path / "go"))
    stop(main)
    watch_address(port, main)
    for data in (b"hello 1\n", f"hello {STRANGER} 1\n".encode(), b"", b"hello"):
        send(port, data, wait=False)
    time.sleep(0.5)
    assert main.poll() is None, main.communicate()
    (tmp_path / "go").touch()
    out, err = main.communicate(timeout=20)
    assert (main.returncode, out) == (0, "trained\n"), err
    assert str(prelude.NODE_LOST_EXIT) not in err
    assert IGNORED.format(4) in err


def test_a_worker_with_the_token_still_stops_the_job_when_it_fails(tmp_path, port, stop):
    """A worker of the job (the token in its environment) is heard as before: its failure
    ends the main node's command with the worker's own code named, and it is no stranger."""
    main = node(tmp_path, 0, port, until(tmp_path / "never"))
    stop(main)
    watch_address(port, main)
    worker = node(tmp_path, 1, port, ["sh", "-c", "exit 3"])
    stop(worker)
    _, err = main.communicate(timeout=30)
    assert "launcher: node 1 failed (exit code 3): the job stops" in err
    assert "node watch: ignored" not in err
    assert main.returncode == 3  # its command stopped by the watch: the worker's code is the job's
    assert worker.wait(timeout=30) == 3


def test_a_lost_worker_with_the_token_still_means_another_attempt(tmp_path, port, stop):
    """A worker of the job that vanishes (its host gone: the whole node killed) is lost, and
    the main node ends with the retryable exit code, as before."""
    main = node(tmp_path, 0, port, until(tmp_path / "never"))
    stop(main)
    watch_address(port, main)
    worker = node(tmp_path, 1, port, until(tmp_path / "never"))
    stop(worker)
    time.sleep(2)  # it connects and says hello
    os.killpg(worker.pid, signal.SIGKILL)
    _, err = main.communicate(timeout=30)
    assert main.returncode == prelude.NODE_LOST_EXIT, err
    assert "launcher: node(s) 1 lost: ending with exit code 75" in err


def hold_the_door(port: int) -> tuple[list[socket.socket], int]:
    """Connections to the main node's watch that say nothing, one more than it lets wait for a
    hello (PENDING_PEERS), in the order they were made, and which of them the watch cut off;
    returned once it has, so that it holds the rest waiting (for HELLO_SECONDS, after which it
    cuts those off too)."""
    peers = [
        socket.create_connection(("127.0.0.1", port + 1), timeout=30)
        for _ in range(prelude.PENDING_PEERS + 1)
    ]
    cut, _, _ = select.select(peers, [], [], 30)
    assert cut, "the watch cut none of the silent connections off"
    assert cut[0].recv(1) == b""
    return peers, peers.index(cut[0])


def test_silent_peers_holding_the_door_do_not_keep_a_worker_out(tmp_path, port, stop):
    """Guards issue 43's third finding: the main node's watch let PENDING_PEERS connections
    wait for a hello and cut off every later one, the worker's too, which never tried again, so
    whoever held that many connections open in the first seconds of an attempt made it end as
    "never started" (75) once the roll call came, attempt after attempt. Now a newcomer cuts
    off the oldest silent connection instead of itself (so a worker need not wait for the
    watch to give up on them after HELLO_SECONDS, nor race peers that reconnect then): the
    worker, arriving while PENDING_PEERS silent connections are held, is heard, and the job
    ends 0 past the roll call (a timer: there is no event to wait for but its time), the
    silent ones counted."""
    roll_call = 8  # the worker is heard within a second even on a loaded machine (0.06 s idle)
    main = node(tmp_path, 0, port, until(tmp_path / "go"), LAUNCHER_START_SECONDS=str(roll_call))
    stop(main)
    watch_address(port, main)
    listened = time.monotonic()
    held, cut = hold_the_door(port)
    worker = node(tmp_path, 1, port, until(tmp_path / "go"), LAUNCHER_START_SECONDS=str(roll_call))
    stop(worker)
    time.sleep(max(0.0, listened + roll_call + 3 - time.monotonic()))
    (tmp_path / "go").touch()
    out, err = main.communicate(timeout=30)
    for peer in held:
        peer.close()
    assert "never started" not in err
    assert (main.returncode, out) == (0, "trained\n"), err
    assert IGNORED.format(prelude.PENDING_PEERS + 1) in err
    assert worker.wait(timeout=30) == 0
    assert cut == 0  # the oldest made room for the newest; the worker's was the one after


class CutFirst:
    """A TCP proxy to the main node's watch that cuts the first connection off once its first
    line (a worker's hello) has arrived, as the watch cuts off its oldest silent connection,
    and passes later ones on both ways; ``again`` is set when a second connection comes."""

    def __init__(self, port: int) -> None:
        self.target = ("127.0.0.1", port + 1)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cut, self.again = threading.Event(), threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            first, _ = self.listener.accept()
            with first, first.makefile("rb") as lines:
                lines.readline()
            self.cut.set()
            while True:
                worker, _ = self.listener.accept()
                self.again.set()
                watch = socket.create_connection(self.target, timeout=30)
                for ends in ((worker, watch), (watch, worker)):
                    threading.Thread(target=self._pass, args=ends, daemon=True).start()

    @staticmethod
    def _pass(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(4096):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.listener.close()


def test_a_worker_whose_first_connection_is_cut_tries_again_and_is_heard(tmp_path, port, stop):
    """Guards issue 43's third finding from the worker's side: a worker whose connection was
    cut off before the main node answered its hello never tried again, and was never heard.
    Now it tries again until the main node welcomes it: here its first connection is cut
    after the hello, the next gets through, and its failure ends the job with its own code."""
    proxy = CutFirst(port)
    try:
        main = node(tmp_path, 0, port, until(tmp_path / "never"))
        stop(main)
        watch_address(port, main)
        fail = [
            "sh",
            "-c",
            'while [ ! -e "$1" ]; do sleep 0.1; done; exit 3',
            "-",
            str(tmp_path / "in"),
        ]
        # The worker's watch port is its LAUNCHER_MAIN_PORT + 1: the proxy's.
        worker = node(tmp_path, 1, port, fail, LAUNCHER_MAIN_PORT=str(proxy.port - 1))
        stop(worker)
        assert proxy.cut.wait(60), "the worker never connected"
        assert proxy.again.wait(60), "the worker never tried again after its cut connection"
        (tmp_path / "in").touch()
        _, err = main.communicate(timeout=60)
    finally:
        proxy.close()
    assert "launcher: node 1 failed (exit code 3): the job stops" in err
    assert "never started" not in err and "lost" not in err
    assert main.returncode == 3  # its command stopped by the watch: the worker's code is the job's
    assert worker.wait(timeout=30) == 3


def test_the_command_does_not_see_the_token(tmp_path, port, stop):
    """The token is the watch's: the user's command (which may print its environment to the
    job log, which other teams can read) runs without it, on the main node and the workers,
    while their watches still know each other."""
    show = f'echo "[${{{prelude.WATCH_TOKEN_ENV}:-}}]"'
    wait = 'while [ ! -e "$1" ]; do sleep 0.1; done; echo trained'
    main = node(tmp_path, 0, port, ["sh", "-c", f"{show}; {wait}", "-", str(tmp_path / "go")])
    stop(main)
    watch_address(port, main)
    worker = node(tmp_path, 1, port, ["sh", "-c", show])
    stop(worker)
    assert worker.communicate(timeout=30)[0] == "[]\n"
    (tmp_path / "go").touch()
    out, err = main.communicate(timeout=20)
    assert (main.returncode, out) == (0, "[]\ntrained\n"), err
    assert "node watch: ignored" not in err


def test_without_a_token_the_watch_stays_off_and_says_so(tmp_path, port, stop):
    """A node whose submit carried no token (a definition submitted by other means) cannot
    vouch for the others: the watch does not listen, one warning says so, the command runs."""
    main = node(
        tmp_path, 0, port, ["sh", "-c", "echo trained; exit 3"], **{prelude.WATCH_TOKEN_ENV: None}
    )
    stop(main)
    out, err = main.communicate(timeout=20)
    assert (main.returncode, out) == (3, "trained\n")
    assert f"restarts WARNING: no {prelude.WATCH_TOKEN_ENV}" in err
    assert listening(port + 1) is None


def test_the_watch_listens_on_the_main_address_it_was_given(tmp_path, port, stop):
    """Off ECS (the local backend gives every node LAUNCHER_MAIN_ADDR=127.0.0.1) the watch
    listens there, not on every interface."""
    main = node(tmp_path, 0, port, until(tmp_path / "go"))
    stop(main)
    assert watch_address(port, main) == "127.0.0.1"
    (tmp_path / "go").touch()
    assert main.wait(timeout=20) == 0


class _Metadata(http.server.BaseHTTPRequestHandler):
    asked: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.asked.append(self.path)
        # The container metadata of an awsvpc task (ECS guide, task-metadata-endpoint-v4).
        body = json.dumps(
            {"Networks": [{"NetworkMode": "awsvpc", "IPv4Addresses": ["127.0.0.1"]}]}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_on_ecs_the_watch_listens_on_the_task_address_from_the_metadata(tmp_path, port, stop):
    """On AWS the main node is not told its own address (Batch gives it to the workers only):
    the watch reads the task's awsvpc address from ECS's task metadata, directly (a proxy in
    the environment is not asked), and listens there, not on every interface nor on the
    address the prelude guessed (here one that is not this machine's)."""
    _Metadata.asked = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Metadata)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        main = node(
            tmp_path,
            0,
            port,
            until(tmp_path / "go"),
            ECS_CONTAINER_METADATA_URI_V4=f"http://127.0.0.1:{server.server_port}/v4/task-1",
            LAUNCHER_MAIN_ADDR="192.0.2.1",  # TEST-NET-1: no address of this machine
            http_proxy="http://127.0.0.1:9",
            HTTP_PROXY="http://127.0.0.1:9",
        )
        stop(main)
        assert watch_address(port, main) == "127.0.0.1"
        assert _Metadata.asked == ["/v4/task-1"]
        (tmp_path / "go").touch()
        assert main.wait(timeout=20) == 0
    finally:
        server.shutdown()
        server.server_close()


# --- the watch's parts, imported --------------------------------------------------------------
# launcher/node/watch/ is the program python3 runs on the node, with its statements under
# ``__main__`` guards, so importing it starts nothing; each part reads the program's globals,
# which the fixtures set as the guarded lines would.


@pytest.fixture
def main_side(tmp_path, monkeypatch):
    """launcher.node.watch.main_node with the globals a main node of 3 nodes has: its token, its
    directory, no one greeted or waiting yet."""
    from launcher.node.watch import main_node

    for name, value in {
        "token": TOKEN.encode(),
        "nodes": 3,
        "d": str(tmp_path),
        "lock": threading.Lock(),
        "pending": {},
        "greeted": set(),
        "strangers": 0,
        "first": "",
    }.items():
        monkeypatch.setattr(main_node, name, value, raising=False)
    return main_node


def test_a_hello_names_a_workers_rank_only_with_this_jobs_token(main_side):
    rank = main_side.rank
    assert [rank(f"hello {TOKEN} {n}".encode()) for n in (1, 2)] == ["1", "2"]
    assert rank(f"hello {TOKEN} 0".encode()) is None  # the main node's own rank
    assert rank(f"hello {TOKEN} 3".encode()) is None  # past the job's nodes
    assert rank(f"hello {TOKEN} -1".encode()) is None
    assert rank(f"hello {TOKEN} 01".encode()) == "1"  # as int() reads it
    assert rank(f"hello {STRANGER} 1".encode()) is None
    assert rank(f"hello {TOKEN} 1 2".encode()) is None
    assert rank(f"hi {TOKEN} 1".encode()) is None
    assert rank(b"hello  1") is None


def test_a_stranger_is_counted_with_the_first_address(main_side, tmp_path):
    main_side.stranger(("192.0.2.7", 4000))
    main_side.stranger(("192.0.2.8", 4001))
    assert (tmp_path / "strangers").read_text() == "2 192.0.2.7\n"
    assert not (tmp_path / ".strangers").exists()  # written aside, then renamed


def test_a_newcomer_past_the_limit_cuts_off_the_oldest_silent_connection(main_side):
    pairs = [socket.socketpair() for _ in range(prelude.PENDING_PEERS + 1)]
    try:
        for ours, _ in pairs:
            main_side.admit(ours)
        assert list(main_side.pending) == [ours for ours, _ in pairs[1:]]
        oldest_peer = pairs[0][1]
        oldest_peer.settimeout(5)
        assert oldest_peer.recv(1) == b""  # shut down: its own thread would count it
    finally:
        for pair in pairs:
            for end in pair:
                end.close()


def test_the_task_address_is_the_awsvpc_one_from_the_metadata(main_side, monkeypatch):
    _Metadata.asked = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Metadata)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        uri = f"http://127.0.0.1:{server.server_port}/v4/task-1"
        monkeypatch.setenv("ECS_CONTAINER_METADATA_URI_V4", uri)
        assert main_side.task_address() == "127.0.0.1"
        assert _Metadata.asked == ["/v4/task-1"]
        nobody = f"http://127.0.0.1:{rendezvous_port()}/v4/task-1"
        monkeypatch.setenv("ECS_CONTAINER_METADATA_URI_V4", nobody)
        assert main_side.task_address() == ""  # no answer: the watch keeps to every interface
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def worker_side(monkeypatch):
    """launcher.node.watch.worker with the globals of node 2, and a main node's port to answer
    it: ``answer`` is what the test's main node says to the first line it reads."""
    from launcher.node.watch import worker

    listener = socket.create_server(("127.0.0.1", 0))
    heard: list[bytes] = []

    def answer(line: bytes | None) -> None:
        def serve() -> None:
            c, _ = listener.accept()
            with c:
                heard.append(c.makefile("rb").readline())
                if line is not None:
                    c.sendall(line)

        threading.Thread(target=serve, daemon=True).start()

    where = {"host": "127.0.0.1", "port": listener.getsockname()[1], "node": "2", "token": TOKEN}
    for name, value in where.items():
        monkeypatch.setattr(worker, name, value, raising=False)
    yield worker, answer, heard
    listener.close()


def test_a_worker_is_welcomed_after_its_hello(worker_side):
    worker, answer, heard = worker_side
    answer(b"welcome\n")
    connection = worker.welcomed()
    assert connection is not None
    connection.close()
    assert heard == [f"hello {TOKEN} 2\n".encode()]


def test_a_worker_not_welcomed_or_refused_has_no_connection(worker_side, monkeypatch):
    worker, answer, _ = worker_side
    answer(None)  # reads the hello and hangs up
    assert worker.welcomed() is None
    answer(b"go away\n")
    assert worker.welcomed() is None
    monkeypatch.setattr(worker, "port", rendezvous_port(), raising=False)  # nobody listens
    assert worker.welcomed() is None


# --- the token in the requests ----------------------------------------------------------------


def _spec(**kwargs) -> JobSpec:
    values = {"name": "train", "command": ("python", "train.py"), "image": "repo@sha256:ab"}
    return JobSpec(**(values | {"nodes": 3, "restarts": True} | kwargs))


def _tokens(submit: dict) -> dict[str, str]:
    """targetNodes -> the token the submit gives that node range."""
    found = {}
    for override in submit["nodeOverrides"]["nodePropertyOverrides"]:
        env = override["containerOverrides"]["environment"]
        (value,) = [e["value"] for e in env if e["name"] == prelude.WATCH_TOKEN_ENV]
        found[override["targetNodes"]] = value
    return found


def test_every_submit_gives_every_node_range_one_new_token_and_the_definition_none():
    """The token is per submit, in the SubmitJob's node overrides (which Batch gives every
    attempt): the definition, named by its content and reused across submits, stays the same
    and never holds one, so each submit gets a token of its own without registering anew."""
    spec = _spec(groups=(NodeGroup(0, 0), NodeGroup(1, 2, image="repo@sha256:cd")))
    first, second = jobdef.build(spec, cluster_info()), jobdef.build(spec, cluster_info())
    assert first.register == second.register
    assert not any(_has_token(r) for _, r in _ranges(first.register))
    tokens = _tokens(first.submit)
    assert list(tokens) == [r["targetNodes"] for _, r in _ranges(first.register)]
    (token,) = set(tokens.values())  # one for the whole job
    assert len(token) == 64 and int(token, 16) >= 0
    assert set(_tokens(second.submit).values()) != {token}
    assert_valid("batch", "SubmitJob", first.submit)
    assert "nodeOverrides" not in jobdef.build(_spec(nodes=1), cluster_info()).submit


def _ranges(register: dict) -> list[tuple[int, dict]]:
    return list(enumerate(register["nodeProperties"]["nodeRangeProperties"]))


def _has_token(node_range: dict) -> bool:
    return any(e["name"] == prelude.WATCH_TOKEN_ENV for e in node_range["container"]["environment"])


def test_the_local_backend_gives_its_nodes_the_submits_overrides():
    """The local backend runs the definition itself: the submit's overrides (the token) are
    put in each node range's environment, as Batch does when the node starts."""
    requests = jobdef.build(_spec(groups=(NodeGroup(0, 0), NodeGroup(1, 2))), cluster_info())
    (token,) = set(_tokens(requests.submit).values())
    definition = with_overrides(as_one_node(requests.register, {}), requests.submit)
    for _, node_range in _ranges(definition):
        env = {e["name"]: e["value"] for e in node_range["container"]["environment"]}
        assert env[prelude.WATCH_TOKEN_ENV] == token
    assert not any(_has_token(r) for _, r in _ranges(requests.register))  # a copy was changed
    odd = {"nodeOverrides": {"nodePropertyOverrides": [{"targetNodes": "0:1"}]}}
    with pytest.raises(UsageError, match="targetNodes 0:1 is none of"):
        with_overrides(requests.register, odd)


class _Aws:
    """Just what ``BatchBackend.resubmit`` calls."""

    def __init__(self, job: dict) -> None:
        self.job = job
        self.submitted: list[dict] = []

    def describe_jobs(self, job_ids: list[str]) -> list[dict]:
        return [self.job]

    def submit_job(self, request: dict) -> str:
        self.submitted.append(request)
        return "11111111-2222-3333-4444-555555555555"


def test_a_resubmission_gets_a_new_token(monkeypatch):
    """``launcher resubmit`` submits the job's definition again: a new job, whose nodes get a
    new token with the checkpoint directory (without one the watch would stay off)."""
    monkeypatch.setattr("launcher.image.build.image_exists", lambda image, aws: True)
    requests = jobdef.build(_spec(), cluster_info())
    job = {
        **{k: v for k, v in requests.register.items() if k != "jobDefinitionName"},
        "jobId": "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
        "jobName": "train",
        "jobQueue": "queue",
        "jobDefinition": "arn:definition",
        "tags": {},
    }
    aws = _Aws(job)
    BatchBackend(aws).resubmit(job["jobId"])
    (request,) = aws.submitted
    assert_valid("batch", "SubmitJob", request)
    (token,) = set(_tokens(request).values())
    assert len(token) == 64 and token not in json.dumps(requests.submit)


# --- a local job: the stranger is a node of the job without the token -------------------------

# Node 1's command: two strangers' tries on the main node's watch over the job's own loopback
# (where the local backend's nodes meet, as a neighbour's would on the cluster's network), then
# a word for node 0 on the EFS stand-in.
ATTACK = """
import os, socket, time
port = int(os.environ["LAUNCHER_MAIN_PORT"]) + 1
print("token in the command's environment:", "LAUNCHER_WATCH_TOKEN" in os.environ, flush=True)
for data, wait in ((b"hello 1\\nexit 9\\n", True), (b"hello 1\\n", False)):
    for _ in range(300):
        try:
            c = socket.create_connection(("127.0.0.1", port), timeout=5)
            break
        except OSError:
            time.sleep(0.1)
    c.sendall(data)
    c.settimeout(5)
    try:
        while wait and c.recv(256):
            pass
    except OSError:
        pass
    c.close()
open(os.path.join(os.environ["LAUNCHER_EFS"], "attacked"), "w").close()
"""


@pytest.fixture
def local_env(docker_engine, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", docker_engine.host)
    monkeypatch.setenv("LAUNCHER_LOCAL_STATE", str(tmp_path / "state"))
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "attack.py").write_text(ATTACK)
    return tmp_path


def test_a_local_job_runs_to_its_end_past_strangers_on_its_network(local_env, busybox_base):
    """The attack of finding 3 from inside a local job's network: node 1's command (which does
    not hold the token) sends ``hello 1``/``exit 9`` and a bare ``hello 1`` to the main node's
    watch. The job still succeeds in one attempt and says it ignored two connections, and the
    worker's own watch, which got the token from the submit's overrides, said hello in time
    (the roll call after LAUNCHER_START_SECONDS would otherwise end the attempt)."""
    from devenv.host_python import host_python_mounts
    from launcher import local
    from launcher.job.jobspec import Mount

    worker = 'if [ "$AWS_BATCH_JOB_NODE_INDEX" = 1 ]; then exec python3 /code/attack.py; fi'
    main = 'while [ ! -e "$LAUNCHER_EFS/attacked" ]; do sleep 0.2; done; sleep 6; echo main done'
    spec = JobSpec(
        name="strangers",
        command=("sh", "-c", f"{worker}; {main}"),
        image=busybox_base,
        nodes=2,
        gpus_per_node=0,
        efa="off",
        attempts=1,
        restarts=True,
        rendezvous_port=rendezvous_port(),
        mounts=(*host_python_mounts(), Mount("bind", "/code", str(local_env / "code"), True)),
        env=(("PATH", f"{sys.prefix}/bin:/usr/bin:/bin"), ("LAUNCHER_START_SECONDS", "5")),
    )
    requests = jobdef.build(spec, cluster_info("c5n.18xlarge", efa=False))
    backend = local.LocalBackend("q", str(local_env / "efs"))
    job_id = backend.schedule(requests)
    job = backend.wait(job_id, timeout=120)
    lines = [(x.node, x.message) for x in backend.log_iter(job_id)]
    assert (job.state, job.attempts) == ("SUCCEEDED", 1), lines
    assert (0, IGNORED.format(2)) in lines
    assert (0, "main done") in lines
    assert (1, "token in the command's environment: False") in lines
