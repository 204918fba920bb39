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

from launcher.image import index, private_keys, scan_ahead, workspace
from launcher.image.build import left_out_line, what_ships, workspace_image
from tests.image.test_build import build, get_manifest, ok, uploads
from tests.image.test_workspace import _fresh_process, linux_only

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
    "docker/config.json",  # a project's Docker files, not the Docker CLI's login
    "docs/credentials.md",
    "environment.yml",
    "infra/main.tf",
    "model.safetensors",
    "src/credentials.py",
    "src/credentials/__init__.py",
    "src/credentials_test.py",
    "src/keys.py",
    "src/env.py",
    "src/pem_utils.py",
    "token",  # a file named token, not in a Hugging Face home
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
    (root / "deploy_key").write_bytes(_key("OPENSSH"))  # known by its text, in the child too
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
    assert said.split() == [str(len(SECRETS)), ".env"]  # the key in, .env out


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


# --- issue 43: the tools' logins, and private keys under any name -----------------------------

# Where tools keep their logins (issue 43, item 5: a workspace that was a home directory
# shipped each of these); each pattern's source, the tool's own documentation, is cited by
# ``workspace.SECRET_PATTERNS``.
LOGINS = [
    ".docker/config.json",  # docker login
    ".kube/config",  # kubectl
    ".cache/huggingface/token",  # huggingface-cli login
    ".cache/huggingface/stored_tokens",
    ".huggingface/token",  # huggingface_hub before 0.14
    ".gnupg/secring.gpg",  # GnuPG's home, all of it
    "infra/terraform.tfstate",
    "infra/terraform.tfstate.backup",
    "infra/prod.tfvars",
    "infra/secrets.auto.tfvars.json",
    ".terraform.d/credentials.tfrc.json",  # terraform login
    "prod.env",
    ".vault-token",
    ".config/gcloud/credentials.db",
    ".config/gcloud/legacy_credentials/me@example.com/adc.json",
    ".azure/msal_token_cache.json",
    ".kaggle/kaggle.json",
    ".databrickscfg",
]


@pytest.mark.parametrize("login", LOGINS)
def test_a_tools_login_file_is_left_out_and_named(tmp_path, login):
    root = _workspace(tmp_path / "ws", secrets=[login], shipped=["train.py"])
    scanned = workspace.scan(root)
    assert _files(scanned) == {"train.py"}
    assert scanned.left_out == (login,)


def _key(kind: str) -> bytes:
    """A real private key in ``kind``'s text form (cryptography's serializers: OpenSSL's
    traditional PEM, PKCS #8 plain and encrypted, OpenSSH's own), or OpenPGP's armour
    (RFC 4880, 6.2) over a body cut short: the first line is what is read."""
    from cryptography.hazmat.primitives import serialization as ser
    from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed25519, rsa

    if kind == "PGP":
        return b"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlFgEZ0Vx9RYJKwYBBAHaRw8BAQdA\n"
    traditional = ser.PrivateFormat.TraditionalOpenSSL
    made = {
        "RSA": (rsa.generate_private_key(65537, 1024), traditional),
        "EC": (ec.generate_private_key(ec.SECP256R1()), traditional),
        "DSA": (dsa.generate_private_key(1024), traditional),
        "PKCS8": (ed25519.Ed25519PrivateKey.generate(), ser.PrivateFormat.PKCS8),
        "ENCRYPTED": (ed25519.Ed25519PrivateKey.generate(), ser.PrivateFormat.PKCS8),
        "OPENSSH": (ed25519.Ed25519PrivateKey.generate(), ser.PrivateFormat.OpenSSH),
    }
    key, form = made[kind]
    sealed = ser.BestAvailableEncryption(b"pass") if kind == "ENCRYPTED" else ser.NoEncryption()
    return key.private_bytes(ser.Encoding.PEM, form, sealed)  # type: ignore[union-attr]


KEY_KINDS = ["OPENSSH", "RSA", "EC", "DSA", "ENCRYPTED", "PKCS8", "PGP"]


@pytest.mark.parametrize("kind", KEY_KINDS)
def test_a_private_key_is_left_out_whatever_its_name(tmp_path, kind):
    """Named by the user, so no name rule knows it: its first line says what it is."""
    root = _workspace(tmp_path / "ws", secrets=[], shipped=["train.py"])
    (root / "deploy").mkdir()
    (root / "deploy" / "deploy_key").write_bytes(_key(kind))
    scanned = workspace.scan(root)
    assert _files(scanned) == {"train.py"}
    assert scanned.left_out == ("deploy/deploy_key",)


def test_a_key_after_blank_space_or_a_byte_order_mark_is_still_a_key(tmp_path):
    root = _workspace(tmp_path / "ws", secrets=[], shipped=["train.py"])
    (root / "prod").write_bytes(b"\xef\xbb\xbf\n\r\n  " + _key("OPENSSH"))
    assert workspace.scan(root).left_out == ("prod",)


def test_a_text_that_only_quotes_a_key_line_ships(tmp_path):
    """A README, a test fixture's docs, a public key and a certificate mention the armour
    or look like it; none opens with a private key's line, so all ship."""
    root = _workspace(tmp_path / "ws", secrets=[], shipped=["train.py"])
    line = "-----BEGIN OPENSSH PRIVATE KEY-----"
    texts = {
        "README.md": f"Keys start with {line} and must never be committed.\n",
        "docs/keys.txt": f"An example:\n{line}\nb3BlbnNzaC1rZXktdjEAAAAA\n",
        "deploy_key.pub.txt": "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n",
        "server.crt": "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n",
    }
    for rel, text in texts.items():
        (root / rel).parent.mkdir(exist_ok=True)
        (root / rel).write_text(text)
    scanned = workspace.scan(root)
    assert _files(scanned) == {"train.py", *texts}
    assert scanned.left_out == ()


def test_a_bang_line_ships_a_key_and_the_build_says_so(tmp_path):
    root = _workspace(tmp_path / "ws", secrets=[], shipped=["train.py"])
    (root / "deploy_key").write_bytes(_key("OPENSSH"))
    (root / ".dockerignore").write_text("!deploy_key\n")
    scanned = workspace.scan(root)
    assert "deploy_key" in _files(scanned)
    assert (scanned.left_out, scanned.brought_back) == ((), ("deploy_key",))
    assert list(what_ships(scanned, dryrun=False)) == [
        "launcher: shipping 1 path that looks like a secret, as .dockerignore brings it back: "
        "deploy_key"
    ]


def test_an_unchanged_file_is_not_read_again_and_a_changed_one_is(tmp_path, monkeypatch):
    """The verdicts kept in the cache spare an unchanged workspace its reads (the speed
    target of an unchanged rebuild, docs/benchmarks.md), and never hide a key written
    later: the file's stamps move, so it is read again."""
    monkeypatch.setattr(workspace, "RACY_NS", -1)  # as if every file were long written
    root = _workspace(tmp_path / "ws", secrets=[], shipped=["train.py", "notes"])
    reads = []
    real = private_keys.holds_key
    monkeypatch.setattr(private_keys, "holds_key", lambda p, n: reads.append(p) or real(p, n))
    assert _files(workspace.scan(root)) == {"train.py", "notes"}
    assert len(reads) == 2
    reads.clear()
    assert _files(workspace.scan(root)) == {"train.py", "notes"}
    assert reads == []
    (root / "notes").write_bytes(_key("EC"))
    scanned = workspace.scan(root)
    assert (_files(scanned), scanned.left_out) == ({"train.py"}, ("notes",))
    assert reads == [str(root / "notes")]


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
    header = f"would ship {len(SHIPPED)} files and 8 directories: {size:,} bytes (0.0 MB)"
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


@pytest.mark.parametrize(
    ("version", "first_list", "secret"),
    [(7, False, ".env"), (8, True, "deploy_key")],  # before any screen; names, not text
)
def test_an_index_from_before_the_screen_is_no_delta_base(
    registry, busybox_base, tmp_path, monkeypatch, version, first_list, secret
):
    """A launcher without the screen (7), or with its first list and no key check (8),
    shipped ``secret`` and kept that layer's state as the base of later deltas: the first
    build after the upgrade is a full layer, not a delta that hides it while the image
    keeps it."""
    ws = _workspace(tmp_path / "ws")
    (ws / "deploy_key").write_bytes(_key("OPENSSH"))
    repo = f"{registry.host}/upgraded"
    listed = workspace.SECRET_PATTERNS
    secrets = listed[: listed.index("**/*.env")] if first_list else ()
    with monkeypatch.context() as old:  # the walk as it was
        old.setattr(
            scan_ahead, "scan", lambda root: workspace.scan(root, secrets=secrets, keys=False)
        )
        before = workspace_image(busybox_base, ws, repo, compression="gzip")
    first = _layers(registry, "upgraded", before.reference, busybox_base)[0]
    assert f"workspace/{secret}" in first
    path = index.path_for(str(ws))
    written = marshal.loads(path.read_bytes())
    path.write_bytes(marshal.dumps({**written, "version": version}))  # as it wrote it
    summary = path.with_suffix(".summary")
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "version": version}))
    (ws / "train.py").write_text("# edited\n")
    after = ok(build(*_args(busybox_base, ws, repo)))
    layers = _layers(registry, "upgraded", after, busybox_base)
    assert [sorted(p for p in layer if secret in p) for layer in layers] == [[]]


def test_the_cli_leaves_out_a_docker_login_and_a_deploy_key(registry, busybox_base, tmp_path):
    """Issue 43's workspace through ``launcher build``: pushed, pulled back, read; one line
    names what stayed out."""
    ws = _workspace(tmp_path / "ws", secrets=[".docker/config.json"], shipped=["train.py"])
    key = _key("OPENSSH")
    (ws / "deploy_key").write_bytes(key)
    result = build(*_args(busybox_base, ws, f"{registry.host}/logins"))
    (layer,) = _layers(registry, "logins", ok(result), busybox_base)
    assert set(layer) == {"workspace/train.py"}
    assert not any(key in content or b"aws_secret" in content for content in layer.values())
    assert [line for line in result.stderr.splitlines() if "secret" in line] == [
        "launcher: left out 2 files that look like secrets: .docker/config.json, deploy_key "
        "(add !PATTERN to .dockerignore to ship one)"
    ]
