"""Uploads the registry does not need (issue 34): a build looks before it uploads whenever
hashing the files it does not know costs less than the upload would, and a workspace made
again at its path is found without an upload on the build after a change. Registry writes are
counted server-side, from the registry's access log."""

from __future__ import annotations

import json
import os
import random
import shutil
import time

import pytest

from devenv.images import push_random_base
from launcher.errors import UsageError
from launcher.image import costs, index, layer, patch, reference, workspace
from launcher.image.build import workspace_image
from launcher.image.registry import RegistryError
from tests.support.cli import launcher
from tests.support.proxy import ThrottledProxy

RACY_SECONDS = index.RACY_NS / 1e9
WRITES = ("POST", "PUT", "PATCH")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """A cache of the test's own: no measurement kept by another test decides here."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(costs.UPLOAD_RATE_ENV, raising=False)


def _new_cache(tmp_path, monkeypatch, name: str) -> None:
    """Another machine's cache, empty: a CI runner, a colleague's clone."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / name))


@pytest.fixture(scope="module")
def base(registry, tmp_path_factory) -> str:
    """A busybox base written straight into the registry (no engine needed)."""
    push_random_base(registry.host, "decision-base", "1", [], tmp_path_factory.mktemp("base"))
    return f"{registry.host}/decision-base:1"


def _files(root, count: int, size: int, seed: int):
    """``count`` files of ``size`` bytes, half random and half text: a layer of about half."""
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    for i in range(count):
        (root / f"f{i:03d}.bin").write_bytes(rng.randbytes(size // 2) + b"x" * (size - size // 2))
    return root


def _writes(registry) -> list:
    return [(r.method, r.path) for r in registry.requests() if r.method in WRITES]


def _older_than_the_racy_window() -> None:
    time.sleep(RACY_SECONDS + 0.5)


# --- (b): a fresh checkout of a workspace whose image is there ------------------------------


@pytest.mark.parametrize("files", ["older than the racy window", "just written"])
def test_a_fresh_checkout_finds_its_image_with_reads_only(
    registry, base, tmp_path, monkeypatch, files
):
    """The CI case: an empty local index, the image pushed from elsewhere. 300 files, 7 MB:
    the rule before (hash first only under 4 MiB or a quarter of the workspace) uploaded the
    layer, mounted the base and only then found the image (3 writes)."""
    ws = _files(tmp_path / "ws", 300, 24 << 10, seed=1)
    repo = f"{registry.host}/ci-{len(files)}"
    pushed = workspace_image(base, ws, repo)  # by a colleague, or the last CI run
    _new_cache(tmp_path, monkeypatch, "runner")
    if files == "just written":  # a checkout that wrote the files right before the build
        for path in sorted(ws.iterdir()):
            path.write_bytes(path.read_bytes())
    else:
        _older_than_the_racy_window()
    registry.requests()
    found = workspace_image(base, ws, repo)
    log = registry.requests()
    assert (found.reference, found.reused) == (pushed.reference, True)
    assert {r.method for r in log} <= {"HEAD", "GET"}, log
    assert len(log) == 2  # the base's tag, the workspace's tag


@pytest.mark.parametrize(("setting", "looks_first"), [("1MB/s", True), ("100G", False)])
def test_the_configured_upload_rate_decides_whether_to_look_first(
    registry, base, tmp_path, monkeypatch, setting, looks_first
):
    """``LAUNCHER_UPLOAD_RATE`` overrides what was measured: on a link faster than hashing,
    a fresh checkout builds and uploads before it looks (the image is found at the end)."""
    ws = _files(tmp_path / "ws", 300, 24 << 10, seed=2)
    repo = f"{registry.host}/configured-{str(looks_first).lower()}"
    pushed = workspace_image(base, ws, repo)
    _new_cache(tmp_path, monkeypatch, "runner")
    monkeypatch.setenv(costs.UPLOAD_RATE_ENV, setting)
    registry.requests()
    found = workspace_image(base, ws, repo)
    assert (found.reference, found.reused) == (pushed.reference, True)
    assert (_writes(registry) == []) is looks_first


def test_the_upload_rate_is_measured_per_registry_and_a_slow_link_looks_first(
    registry, base, tmp_path, monkeypatch
):
    """The upload through a link of 8 MB/s is measured as about that (the requests' time,
    not the layer's making) and kept for that registry host alone; the next first build
    through it of a workspace whose image is there makes no write."""
    link = ThrottledProxy.throttled(registry.host, 8e6)
    try:
        slow_base = base.replace(registry.host, link.host)
        ws = tmp_path / "ws"
        ws.mkdir()
        (ws / "weights.bin").write_bytes(os.urandom(6 << 20))  # 6 MB up, whatever compresses
        workspace_image(slow_base, ws, f"{link.host}/measured")
        kept = json.loads(costs.Measured.path().read_text())["uploads"]
        assert set(kept) == {link.host}
        rate = costs.Measured.load().rates(link.host).upload
        assert 4e6 < rate < 8.8e6, rate
        assert costs.Measured.load().rates(registry.host).upload == costs.DEFAULT_UPLOAD

        other = _files(tmp_path / "other", 300, 24 << 10, seed=3)
        pushed = workspace_image(base, other, f"{registry.host}/through")  # from elsewhere
        measured = costs.Measured.path().read_bytes()
        _new_cache(tmp_path, monkeypatch, "this machine")  # its link known, no index
        costs.Measured.path().parent.mkdir(parents=True)
        costs.Measured.path().write_bytes(measured)
        registry.requests()
        found = workspace_image(slow_base, other, f"{link.host}/through")
        assert found.reused
        assert found.reference.split("@")[1] == pushed.reference.split("@")[1]
        assert _writes(registry) == []
    finally:
        link.stop()


def test_a_bad_upload_rate_is_refused_before_anything_moves(tmp_path, monkeypatch):
    ws = _files(tmp_path / "ws", 1, 10, seed=0)
    monkeypatch.setenv(costs.UPLOAD_RATE_ENV, "fast")
    with pytest.raises(UsageError, match="LAUNCHER_UPLOAD_RATE='fast': not an upload rate"):
        workspace_image("127.0.0.1:9/base:1", ws, "127.0.0.1:9/never")  # nothing listens
    result = launcher(
        "build", "--image", "127.0.0.1:9/base:1", "--workspace", str(ws), "--repo", "127.0.0.1:9/x"
    )
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "LAUNCHER_UPLOAD_RATE='fast'" in line


def test_a_first_build_into_a_new_repository_builds_at_once(registry, base, tmp_path, monkeypatch):
    """Where hashing first would take a while (30 MB here: 0.06 s at the default rate), one
    GET of the repository's tag list comes first: a repository that holds no image cannot
    hold this one, and the build reads each file once, as before (a cold build's time)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(3):
        (ws / f"shard{i}.bin").write_bytes(os.urandom(10 << 20))

    def no_hashing_first(*args, **kwargs):
        raise AssertionError("hashed before building into a new repository")

    monkeypatch.setattr(layer, "file_digests", no_hashing_first)
    registry.requests()
    built = workspace_image(base, ws, f"{registry.host}/brand-new")
    assert not built.reused
    listed = [r for r in registry.requests() if "/tags/list" in r.path]
    assert [(r.method, r.status) for r in listed] == [("GET", 404)]


def test_a_fresh_checkout_of_a_large_workspace_finds_its_image_in_a_repository_in_use(
    registry, base, tmp_path, monkeypatch
):
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(3):
        (ws / f"shard{i}.bin").write_bytes(os.urandom(10 << 20))
    repo = f"{registry.host}/in-use"
    pushed = workspace_image(base, ws, repo)
    _new_cache(tmp_path, monkeypatch, "runner")
    registry.requests()
    found = workspace_image(base, ws, repo)
    assert (found.reference, found.reused) == (pushed.reference, True)
    log = registry.requests()
    assert [r.method for r in log] == ["GET", "HEAD", "HEAD"], log  # tag list, base, tag


class _Answer:
    def __init__(self, status: int, body: object) -> None:
        self.status_code, self.body = status, body

    def json(self) -> object:
        if isinstance(self.body, Exception):
            raise self.body
        return self.body


class _Client:
    def __init__(self, answer: _Answer | Exception) -> None:
        self.answer = answer

    def request(self, method, path, **kwargs):
        assert (method, path) == ("GET", "/v2/team/ws/tags/list?n=1")
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    ("answer", "holds"),
    [
        (_Answer(200, {"name": "team/ws", "tags": ["ws-1"]}), True),
        (_Answer(200, {"name": "team/ws", "tags": []}), False),
        (_Answer(200, {"name": "team/ws", "tags": None}), False),
        (_Answer(404, {"errors": [{"code": "NAME_UNKNOWN", "message": "no such"}]}), False),
        (_Answer(404, {"errors": [{"code": "NOT_FOUND"}]}), True),  # not the list: may hide it
        (_Answer(200, ValueError("not JSON")), True),
        (_Answer(200, ["ws-1"]), True),
        (RegistryError("registry r: 403 DENIED (ecr:ListImages)", 403), True),  # listing refused
    ],
)
def test_a_repository_holds_no_image_only_when_the_registry_says_so(answer, holds):
    repo = reference.parse("r.example/team/ws", "--repo")
    assert patch.holds_tags(_Client(answer), repo) is holds


# --- (a): a workspace made again at its path ------------------------------------------------


@pytest.mark.parametrize("link", ["measured", "fast"])
def test_a_workspace_made_again_at_its_path_is_found_after_a_change_without_a_write(
    registry, base, tmp_path, monkeypatch, link
):
    """Issue 34 (a), exactly: an index left by the workspace that was at this path before
    (a fresh clone into the same directory), then build, change a file, build, build. The
    index kept the old workspace's file list (fewer than 256 files read again left it as it
    was), so every later build found every file unknown and uploaded before it looked: 3-5
    writes on the last build, none with a cache that never saw the path. ``fast``: a link on
    which uploading the whole layer costs less than hashing it, not less than hashing one
    file; there only the index's own fix keeps the last build from writing."""
    if link == "fast":
        monkeypatch.setenv(costs.UPLOAD_RATE_ENV, "8G")
    ws = tmp_path / "ws"
    repo = f"{registry.host}/again-{link}"
    _files(ws, 100, 80 << 10, seed=10)  # 8 MB in 100 files
    workspace_image(base, ws, repo)  # the workspace that was here before
    shutil.rmtree(ws)
    _files(ws, 100, 80 << 10, seed=11)  # a fresh clone into the same directory
    _older_than_the_racy_window()  # as a clone is by the time one builds
    workspace_image(base, ws, repo)
    (ws / "f000.bin").write_bytes(b"changed\n")
    workspace_image(base, ws, repo)
    registry.requests()
    last = workspace_image(base, ws, repo)
    assert last.reused
    assert _writes(registry) == []


# --- the rule and its rates, pure ----------------------------------------------------------

MB = 1_000_000


DEFAULTS = costs.Rates(costs.DEFAULT_UPLOAD, costs.DEFAULT_HASHING)
LOOPBACK = costs.Rates(2000 * MB, 500 * MB)  # a registry on this machine, measured


def _never() -> float:
    raise AssertionError("the ratio was sampled where the choice did not hang on it")


@pytest.mark.parametrize(
    ("unknown", "tar", "rates", "ratio", "first"),
    [
        # a fresh checkout, 7 MB in 300 files, the default link: 0.02 s of hashing, 0.3 s up
        ((300, 7 * MB), 7 * MB, DEFAULTS, lambda: 0.5, True),
        # the same to a registry on this machine: uploading it is cheaper than hashing it
        ((300, 7 * MB), 7 * MB, LOOPBACK, _never, False),
        # one file unknown: hashing it costs less than finding out what the upload would
        ((1, 24 << 10), 7 * MB, costs.Rates(1e15, 1e3), _never, True),
        ((0, 0), 7 * MB, costs.Rates(1e15, 1.0), _never, True),
        # 50,000 tiny files to a registry at 300 MB/s: the files cost more than their bytes
        ((50_000, 200 * MB), 226 * MB, costs.Rates(300 * MB, 600 * MB), lambda: 0.25, False),
        # ... and through a 10 MB/s link, hashing them first is cheaper
        ((50_000, 200 * MB), 226 * MB, costs.Rates(10 * MB, 600 * MB), lambda: 0.25, True),
        # a layer that does not shrink: hashing first; one that does: uploading first
        ((10, 100 * MB), 100 * MB, costs.Rates(400 * MB, 600 * MB), lambda: 1.0, True),
        ((10, 100 * MB), 100 * MB, costs.Rates(400 * MB, 600 * MB), lambda: 0.3, False),
    ],
)
def test_hash_first_when_hashing_costs_less_than_the_upload(unknown, tar, rates, ratio, first):
    assert costs.hash_first(*unknown, lambda: tar, rates, ratio) is first


def test_the_ratio_is_sampled_from_the_largest_files_weighted_by_size(tmp_path):
    (tmp_path / "noise.bin").write_bytes(os.urandom(3 << 20))
    (tmp_path / "text.csv").write_bytes(b"1,0.5,train\n" * ((1 << 20) // 12))
    for i in range(40):  # 14 of them sampled too, each weighing its 100 bytes
        (tmp_path / f"small{i}.py").write_bytes(os.urandom(100))
    files = workspace.scan(tmp_path).entries
    ratio = costs.sampled_ratio(str(tmp_path), files)
    assert 0.7 < ratio < 0.8  # 3 MiB that stay, 1 MiB that shrinks to almost nothing
    assert costs.sampled_ratio(str(tmp_path / "gone"), files) == 1.0


@pytest.mark.parametrize(
    ("unknown", "asked"),
    [((300, 7 * MB), False), ((3, 30 * MB), True), ((50_000, 200 * MB), True)],
)
def test_the_registry_is_asked_whether_it_holds_any_image_only_where_hashing_takes_a_while(
    unknown, asked
):
    """7 MB: 0.02 s of hashing at the default rate, no question; 30 MB: 0.06 s; 50,000
    files: 1.2 s. An empty repository then means building at once, before sampling."""
    questions = []

    def holds_none() -> bool:
        questions.append(True)
        return False

    first = costs.hash_first(*unknown, lambda: 2 * unknown[1], DEFAULTS, lambda: 0.5, holds_none)
    assert (questions == [True], first) == (asked, not asked)


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("12500000", 12.5e6),
        ("12.5M", 12.5e6),
        ("12.5MB/s", 12.5e6),
        ("12.5 mb/s", 12.5e6 / 8),  # b alone is bits, whatever the case of the prefix
        ("100Mbit/s", 12.5e6),
        ("100Mbps", 12.5e6),
        ("1G", 1e9),
        ("", None),
    ],
)
def test_the_upload_rate_setting_is_bytes_or_bits_a_second(text, rate):
    assert costs.upload_rate_setting({costs.UPLOAD_RATE_ENV: text}) == rate


@pytest.mark.parametrize("text", ["fast", "0", "-1", "10 MB/h", "1e9", "inf"])
def test_anything_else_is_refused_as_an_upload_rate(text):
    with pytest.raises(UsageError, match="not an upload rate"):
        costs.upload_rate_setting({costs.UPLOAD_RATE_ENV: text})


def test_measurements_are_kept_per_registry_and_defaults_stand_for_the_rest():
    assert costs.Measured.load().rates("r.example") == DEFAULTS
    for _ in range(costs.KEEP + 2):  # the oldest go
        costs.record_upload("r.example", costs.Sent(4 * MB, 0.5))
    costs.record_upload("r.example", costs.Sent(100, 1.0))  # too small to tell the link
    costs.record_hashing(1000, 40 * MB, 0.1)
    costs.record_hashing(1, 10, 1.0)  # too little work to time
    measured = costs.Measured.load()
    assert len(measured.uploads["r.example"]) == costs.KEEP
    hashing = (40 * MB + 1000 * costs.FILE_COST) / 0.1
    assert measured.rates("r.example") == costs.Rates(8 * MB, hashing)
    assert measured.rates("other.example") == costs.Rates(costs.DEFAULT_UPLOAD, hashing)
    assert measured.rates("r.example", upload=1.0).upload == 1.0  # the user's setting wins


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b'{"version": 99, "uploads": {"r.example": [[1e9, 1]]}}',
        b'{"version": 1, "uploads": {"r.example": [[1e9, 0]]}, "hashing": "x"}',
        b'{"version": 1, "uploads": [], "hashing": [[true, 1]]}',
        b"[]",
    ],
)
def test_a_damaged_measurement_file_costs_the_defaults(content):
    costs.Measured.path().parent.mkdir(parents=True)
    costs.Measured.path().write_bytes(content)
    assert costs.Measured.load().rates("r.example") == DEFAULTS
