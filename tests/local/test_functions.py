"""Python functions on the local engine (``Cluster.remote``): the values of two nodes, a remote
exception raised here with its traceback, and what a call leaves behind.

The function and its arguments travel as a payload in the EFS stand-in; each node's runner
(launcher.node.function) writes its result there. The image is the demo's base (busybox plus
this machine's Debian python3), whose Python is the caller's.
"""

from __future__ import annotations

import os
import stat
import traceback

import pytest

from devenv.clusters import cluster_info
from launcher import Cluster, FunctionError
from launcher.job.function import RemoteTraceback
from launcher.local.payloads import CALLS
from launcher.local.supervisor import CONCURRENCY_ENV
from tests.support.processes import rendezvous_port


@pytest.fixture
def cluster(docker_engine, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", docker_engine.host)
    monkeypatch.setenv("LAUNCHER_LOCAL_STATE", str(tmp_path / "state"))
    monkeypatch.setenv(CONCURRENCY_ENV, "2")
    return Cluster(cluster_info(efa=False)).local(efs_dir=tmp_path / "efs")


def where_am_i(greeting: str, *, scale: int = 1) -> dict[str, object]:
    import os
    import socket

    rank = int(os.environ["LAUNCHER_NODE_RANK"])
    return {"greeting": greeting, "rank": rank * scale, "of": os.environ["LAUNCHER_NNODES"],
            "host": socket.gethostname()}  # fmt: skip


def test_two_nodes_return_both_ranks_values(cluster, python_base, tmp_path):
    remote = cluster.remote(
        where_am_i, nodes=2, image=python_base, ranks="all", rendezvous_port=rendezvous_port()
    )
    values = remote("hi", scale=10)
    assert [v["rank"] for v in values] == [0, 10]
    assert {v["greeting"] for v in values} == {"hi"} and {v["of"] for v in values} == {"2"}
    # The call's directory is gone once read; what is left of it is the user's alone.
    calls = tmp_path / "efs" / CALLS
    assert list(calls.iterdir()) == []
    assert stat.S_IMODE(calls.stat().st_mode) == 0o700


def test_the_main_nodes_value_by_default_and_a_lambda_travels(cluster, python_base):
    offset = 5
    call = cluster.remote(lambda x: x * 2 + offset, nodes=1, image=python_base).submit(20)
    assert call.result(timeout=120, poll=0.5) == 45
    assert call.result() == 45  # read once; asked again, the same value


def fails(path: str) -> None:
    with open(path) as f:  # no such file on the node
        f.read()


def test_a_remote_exception_is_raised_here_with_the_remote_traceback(cluster, python_base):
    call = cluster.remote(fails, nodes=1, image=python_base).submit("/no/such/file")
    with pytest.raises(FileNotFoundError) as raised:
        call.result(timeout=120, poll=0.5)
    cause = raised.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    # The function's own frame, in this file, with its line (cloudpickle sends no file name),
    # and none of the runner's.
    assert f'File "{__file__}", line' in cause.text and "in fails" in cause.text, cause.text
    assert "    with open(path) as f:  # no such file on the node\n" in cause.text, cause.text
    assert "<string>" not in cause.text and "<dynamic-code>" not in cause.text
    # Printed the way concurrent.futures prints a worker's: the remote part, then this side.
    printed = "".join(traceback.format_exception(raised.value))
    assert printed.index("in fails") < printed.index("The above exception was the direct cause")
    assert call.job.status().state.value == "FAILED"
    # What the node printed is the job's log, as any command's.
    assert any("FileNotFoundError" in line.message for line in call.job.logs())


class Unwelcome(Exception):
    """Defined here, a module the node has no copy of: the class travels with the call."""


def raises_unwelcome() -> None:
    raise Unwelcome("from the node")


def test_an_exception_of_the_callers_own_class_comes_back_as_that_class(cluster, python_base):
    with pytest.raises(Unwelcome, match="from the node"):
        cluster.remote(raises_unwelcome, image=python_base)()


def raises_its_own_class() -> None:
    class Local(Exception):
        def __reduce__(self):  # a class the caller cannot rebuild
            raise TypeError("not picklable")

    raise Local("made up on the node")


def test_an_exception_that_cannot_travel_is_said_in_words(cluster, python_base):
    with pytest.raises(FunctionError) as raised:
        cluster.remote(raises_its_own_class, image=python_base)()
    assert "node 0 raised" in str(raised.value) and "made up on the node" in str(raised.value)
    assert "raises_its_own_class" in raised.value.traceback


def test_what_cannot_be_sent_is_refused_before_anything_runs(cluster, python_base, tmp_path):
    from launcher.errors import UsageError

    with open(tmp_path / "f", "w") as handle, pytest.raises(UsageError) as raised:
        cluster.remote(len, image=python_base).submit(handle)
    assert "cannot be sent" in str(raised.value)
    assert not (tmp_path / "efs" / CALLS).exists()  # nothing written
    assert cluster.list(all=True) == []  # nothing started
    with pytest.raises(UsageError, match="ranks: 'some'; allowed: main, all"):
        cluster.remote(len, image=python_base, ranks="some")
    with pytest.raises(UsageError, match=r"array: not for a function's job"):
        cluster.remote(len, image=python_base, array=4)
    assert os.listdir(tmp_path / "efs") == [] if (tmp_path / "efs").exists() else True


@pytest.fixture(scope="module")
def python_312(docker_engine, python_base):
    """The demo's base saying it runs Python 3.12.7 (``PYTHON_VERSION``, as the Docker official
    python images say theirs): an image this caller's functions cannot run on."""
    import io

    dockerfile = f"FROM {python_base}\nENV PYTHON_VERSION=3.12.7\n".encode()
    image, _ = docker_engine.client().images.build(fileobj=io.BytesIO(dockerfile), tag="py312:1")
    return "py312:1"


def test_an_image_of_another_python_is_refused_in_one_line_before_anything_is_sent(
    cluster, python_312, tmp_path
):
    from launcher.errors import UsageError
    from launcher.job.function import caller_versions

    with pytest.raises(UsageError) as raised:
        cluster.remote(where_am_i, image=python_312)("hi")
    mine = caller_versions().python
    assert str(raised.value) == (
        f"image py312:1 runs Python 3.12.7, this caller Python {mine}: a function travels only "
        f"between one Python version; use an image with Python {mine.rsplit('.', 1)[0]}, or "
        "call from Python 3.12"
    )
    assert not (tmp_path / "efs" / CALLS).exists()  # no payload written
    assert cluster.list(all=True) == []  # no job started


def test_a_function_imports_the_workspace_it_is_sent_with(
    cluster, python_base, registry, tmp_path, monkeypatch
):
    """The workspace is patched into the image as its working directory, where the node's
    Python looks first: a module of the caller's other files is imported there."""
    monkeypatch.setenv("LAUNCHER_REGISTRY", registry.host)  # where workspace images go
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "shapes.py").write_text("def area(w, h):\n    return w * h\n")

    def area_on_the_node(w: int, h: int) -> int:
        import shapes  # not on this machine's path: only in the workspace

        return shapes.area(w, h)

    remote = cluster.remote(area_on_the_node, image=python_base, workspace=workspace)
    planned = remote.dryrun(6, 7)  # the workspace image's digest computed; nothing pushed
    assert planned["registerJobDefinition"]["containerProperties"]["image"] != python_base
    assert remote(6, 7) == 42
