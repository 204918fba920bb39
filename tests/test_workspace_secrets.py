"""Files that look like secrets stay out of workspace images unless .dockerignore says otherwise.

Issue 33, finding 4: a workspace holding ``.env``, ``.aws/credentials`` and ``id_rsa`` was
pushed whole, and everyone who may pull from the shared workspace repository could read
them. The default list (``workspace.SECRET_PATTERNS``) comes from the file-name rules of
secret scanners: gitleaks v8.30.1 ``config/gitleaks.toml`` (rule ``pkcs12-file``), Talisman
v1.37.0 ``detector/filename/filename_detector.go`` and shhgit's ``config.yaml`` (bac0c7d);
``.pypirc`` from PyPA's ".pypirc file" specification. It composes with ``.dockerignore`` as
Docker's rules say (Docker reference, "dockerignore file": the last line to match decides,
``!`` makes exceptions), as if it headed the file.
"""

from __future__ import annotations

import gzip
import io
import json
import marshal
import tarfile

import pytest
import requests

from launcher.image import index, scan_ahead, workspace
from launcher.image.build import left_out_line, what_ships, workspace_image
from tests.test_image_build import build, get_manifest, ok, uploads
from tests.test_workspace_scan import _fresh_process, linux_only

SECRETS = [
    ".aws/config",
    ".aws/credentials",
    ".env",
    ".env.local",
    ".pypirc",
    ".ssh/id_ed25519",
    "certs/server.pem",
    "client.p12",
    "gcp/application_default_credentials.json",
    "id_rsa",
    "id_rsa.pub",
    "keys/deploy_ed25519",
    "src/.netrc",
]
# What a training workspace holds that a looser list would catch (credentials*, *env*, key*).
SHIPPED = [
    "config.yaml",
    "docs/credentials.md",
    "environment.yml",
    "model.safetensors",
    "src/credentials.py",
    "src/credentials/__init__.py",
    "src/credentials_test.py",
    "src/keys.py",
    "src/pem_utils.py",
    "tokenizer.json",
    "tokenizer.model",
    "train.py",
    "vocab.txt",
]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _workspace(root, secrets=SECRETS, shipped=SHIPPED):
    for rel in [*secrets, *shipped]:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"aws_secret_access_key={rel}\n" if rel in secrets else f"# {rel}\n")
    return root


def _files(scanned: workspace.Workspace) -> set[str]:
    return {e.path for e in scanned.entries if e.kind != workspace.DIRECTORY}


def test_what_looks_like_a_secret_is_left_out_and_named_and_the_rest_ships(tmp_path):
    scanned = workspace.scan(_workspace(tmp_path / "ws"))
    assert _files(scanned) == set(SHIPPED)
    assert list(scanned.left_out) == sorted(SECRETS, key=workspace.sort_key)  # walk order
    assert scanned.brought_back == ()
    assert not any(e.path.startswith((".aws", ".ssh")) for e in scanned.entries)


def test_an_exception_ships_what_it_names_and_no_more(tmp_path):
    """``!.aws/config`` brings back one file of a directory left out as a secret; Docker's
    own matcher would let ``.aws/credentials`` through too once the walk goes in (``**/.aws``
    does not match the paths under it), the secret screen does not."""
    root = _workspace(tmp_path / "ws")
    (root / ".dockerignore").write_text("!.env\n!.aws/config\nid_rsa.pub\n")
    scanned = workspace.scan(root)
    assert _files(scanned) == {*SHIPPED, ".dockerignore", ".env", ".aws/config"}
    assert ".aws/credentials" in scanned.left_out
    assert ".env" not in scanned.left_out
    assert "id_rsa.pub" not in scanned.left_out  # left out by the user's own line: not named
    assert scanned.brought_back == (".aws/config", ".env")


def test_a_directory_brought_back_ships_whole(tmp_path):
    root = _workspace(tmp_path / "ws")
    (root / ".dockerignore").write_text("!.aws\n")
    scanned = workspace.scan(root)
    assert {".aws/config", ".aws/credentials"} <= _files(scanned)
    assert scanned.brought_back == (".aws/",)


def test_a_virtual_environment_named_env_is_skipped_without_a_word(tmp_path):
    root = _workspace(tmp_path / "ws", secrets=[], shipped=["train.py"])
    (root / ".env" / "lib").mkdir(parents=True)
    (root / ".env" / "pyvenv.cfg").write_text("home = /usr\n")
    (root / ".env" / "lib" / "site.py").write_text("")
    scanned = workspace.scan(root)
    assert (_files(scanned), scanned.left_out) == ({"train.py"}, ())


def test_the_users_lines_come_later_and_win(tmp_path):
    """An allow-list .dockerignore: ``*`` leaves out the secrets at the top (not named: the
    user's own line leaves them out), ``!src`` brings back all of src as Docker's rules say,
    ``src/.netrc`` too, which ships and is named as brought back."""
    root = _workspace(tmp_path / "ws")
    (root / ".dockerignore").write_text("*\n!src\n!train.py\n")
    scanned = workspace.scan(root)
    in_src = {p for p in [*SHIPPED, *SECRETS] if p.startswith("src/")}
    assert _files(scanned) == in_src | {"train.py", ".dockerignore"}
    assert (scanned.left_out, scanned.brought_back) == ((), ("src/.netrc",))


@linux_only
def test_a_walk_started_ahead_leaves_out_and_names_the_same(tmp_path):
    root = _workspace(tmp_path / "ws")
    (root / ".dockerignore").write_text("!.env\n")
    said = _fresh_process(
        """
        before = workspace.scan(ROOT)
        assert scan_ahead.start(ROOT) is not None
        walked = scan_ahead.scanned(ROOT)
        assert walked.entries == before.entries
        assert walked.stamps == before.stamps
        assert (walked.left_out, walked.brought_back) == (before.left_out, before.brought_back)
        print(len(walked.left_out), " ".join(walked.brought_back))
        """,
        root,
    )
    assert said.split() == [str(len(SECRETS) - 1), ".env"]


def test_held_hands_one_walk_to_the_build(tmp_path):
    root = _workspace(tmp_path / "ws")
    with scan_ahead.held(root) as walked:
        assert scan_ahead.scanned(root) is walked
        assert scan_ahead.scanned(root) is not walked  # once: a later build walks again
    with scan_ahead.held(root) as walked:
        pass
    assert scan_ahead.scanned(root) is not walked  # not taken in the block: dropped


def test_the_one_line():
    assert left_out_line(()) is None
    assert left_out_line([".env"]) == (
        "launcher: left out 1 file that looks like a secret: .env "
        "(add !.env to .dockerignore to ship it)"
    )
    assert left_out_line([".env", ".aws/credentials", "id_rsa"]) == (
        "launcher: left out 3 files that look like secrets: .env, .aws/credentials, id_rsa "
        "(add !PATTERN to .dockerignore to ship one)"
    )
    many = [f"k{i}.pem" for i in range(12)]
    assert left_out_line(many).endswith(
        "k9.pem and 2 more (a dry run names them all; add !PATTERN to .dockerignore to ship one)"
    )
    assert "k11.pem" in left_out_line(many, every=True)


def test_a_dry_run_lists_each_path_with_its_size(tmp_path):
    root = _workspace(tmp_path / "ws", secrets=[".env"], shipped=["train.py", "src/a.py"])
    (root / "latest").symlink_to("train.py")
    scanned = workspace.scan(root)
    lines = list(what_ships(scanned, dryrun=True))
    assert lines == [
        "would ship 2 files, 1 link and 1 directory: 22 bytes (0.0 MB)",
        "             -  latest -> train.py",
        "             -  src/",
        "            11  src/a.py",
        "            11  train.py",
        "launcher: left out 1 file that looks like a secret: .env "
        "(add !.env to .dockerignore to ship it)",
    ]
    quiet = what_ships(scanned, dryrun=False)
    assert list(quiet) == lines[-1:]


# --- against the real registry -------------------------------------------------------------


def _layers(registry, repo: str, ref: str, base: str) -> list[dict[str, bytes]]:
    """Each workspace layer of the image (those past the base's), as path -> content; a
    whiteout is a path too."""
    base_count = len(get_manifest(registry, "base", base.rsplit(":", 1)[1])["layers"])
    found = []
    for desc in get_manifest(registry, repo, ref.split("@")[1])["layers"][base_count:]:
        url = f"http://{registry.host}/v2/{repo}/blobs/{desc['digest']}"
        blob = requests.get(url, timeout=30).content
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob))) as tar:
            found.append(
                {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
            )
    return found


def _args(base: str, ws, repo: str) -> tuple[str, ...]:
    return ("--image", base, "--workspace", str(ws), "--repo", repo, "--compression", "gzip")


def test_the_pushed_layer_lacks_the_secrets_and_one_line_names_them(
    registry, busybox_base, tmp_path
):
    """The issue's workspace: pushed, pulled back, read."""
    secrets = [".env", ".aws/credentials", "id_rsa"]
    shipped = ["tokenizer.json", "src/credentials_test.py"]
    ws = _workspace(tmp_path / "ws", secrets, shipped)
    result = build(*_args(busybox_base, ws, f"{registry.host}/secrets"))
    (layer,) = _layers(registry, "secrets", ok(result), busybox_base)
    assert set(layer) == {f"workspace/{p}" for p in shipped}
    assert not any(b"aws_secret_access_key" in content for content in layer.values())
    assert [line for line in result.stderr.splitlines() if "secret" in line] == [
        "launcher: left out 3 files that look like secrets: .aws/credentials, .env, id_rsa "
        "(add !PATTERN to .dockerignore to ship one)"
    ]


def test_every_default_pattern_stays_out_of_the_pushed_layer(registry, busybox_base, tmp_path):
    ws = _workspace(tmp_path / "ws")
    (layer,) = _layers(
        registry, "all", ok(build(*_args(busybox_base, ws, f"{registry.host}/all"))), busybox_base
    )
    assert set(layer) == {f"workspace/{p}" for p in SHIPPED}


def test_an_exception_ships_the_file_it_names(registry, busybox_base, tmp_path):
    ws = _workspace(tmp_path / "ws")
    (ws / ".dockerignore").write_text("!.env\n")
    result = build(*_args(busybox_base, ws, f"{registry.host}/brought"))
    (layer,) = _layers(registry, "brought", ok(result), busybox_base)
    assert layer["workspace/.env"] == b"aws_secret_access_key=.env\n"
    assert "workspace/.aws/credentials" not in layer
    assert (
        "launcher: shipping 1 path that looks like a secret, as .dockerignore brings it back: "
        ".env" in result.stderr.splitlines()
    )


def test_dryrun_lists_what_ships_and_what_is_left_out_and_uploads_nothing(
    registry, busybox_base, tmp_path
):
    ws = _workspace(tmp_path / "ws")
    registry.requests()
    result = build(*_args(busybox_base, ws, f"{registry.host}/dry"), "--dryrun")
    assert ok(result).startswith(f"{registry.host}/dry@sha256:")  # stdout: the reference
    assert uploads(registry.requests()) == []
    said = result.stderr.splitlines()
    scanned = workspace.scan(ws)
    size = sum((ws / p).stat().st_size for p in SHIPPED)
    header = f"would ship {len(SHIPPED)} files and 6 directories: {size:,} bytes (0.0 MB)"
    start = said.index(header)
    listed = said[start + 1 : start + 1 + len(scanned.entries)]
    assert [line.split()[-1].rstrip("/") for line in listed] == [e.path for e in scanned.entries]
    assert f"{(ws / 'train.py').stat().st_size:>14,}  train.py" in listed
    every = ", ".join(sorted(SECRETS, key=workspace.sort_key))  # all of them, not ten
    assert said[start + 1 + len(listed)] == (
        f"launcher: left out {len(SECRETS)} files that look like secrets: {every} "
        "(add !PATTERN to .dockerignore to ship one)"
    )


def test_a_layer_that_shipped_a_secret_is_no_delta_base(registry, busybox_base, tmp_path):
    """Shipped once through ``!.env``, then the line goes: a delta over that layer would only
    hide ``.env`` with a whiteout, and the image would still hold it below."""
    ws = _workspace(tmp_path / "ws")
    (ws / ".dockerignore").write_text("!.env\n")
    args = _args(busybox_base, ws, f"{registry.host}/unlisted")
    first = _layers(registry, "unlisted", ok(build(*args)), busybox_base)
    assert "workspace/.env" in first[0]
    (ws / ".dockerignore").write_text("")
    (ws / "train.py").write_text("# edited\n")
    again = _layers(registry, "unlisted", ok(build(*args)), busybox_base)
    assert [sorted(p for p in layer if ".env" in p) for layer in again] == [[]]


def test_an_index_from_before_the_screen_is_no_delta_base(
    registry, busybox_base, tmp_path, monkeypatch
):
    """A launcher without the screen shipped ``.env`` and kept that layer's state as the
    base of later deltas: the first build after the upgrade is a full layer, not a delta
    that hides ``.env`` while the image keeps it."""
    ws = _workspace(tmp_path / "ws")
    repo = f"{registry.host}/upgraded"
    with monkeypatch.context() as old:  # the walk as it was: nothing screened
        old.setattr(scan_ahead, "scan", lambda root: workspace.scan(root, secrets=()))
        before = workspace_image(busybox_base, ws, repo, compression="gzip")
    assert "workspace/.env" in _layers(registry, "upgraded", before.reference, busybox_base)[0]
    path = index.path_for(str(ws))
    written = marshal.loads(path.read_bytes())
    path.write_bytes(marshal.dumps({**written, "version": 7}))  # as that launcher wrote it
    summary = path.with_suffix(".summary")
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "version": 7}))
    (ws / "train.py").write_text("# edited\n")
    after = ok(build(*_args(busybox_base, ws, repo)))
    layers = _layers(registry, "upgraded", after, busybox_base)
    assert [sorted(p for p in layer if ".env" in p or ".aws" in p) for layer in layers] == [[]]
