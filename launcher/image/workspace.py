"""What a workspace ships: its files, directories and symlinks, with what ``lstat`` said.

One walk with ``os.scandir`` gives every entry its stat (one ``lstat`` each, the only cost an
unchanged workspace pays); ``.dockerignore`` is matched as the Docker SDK matches it
(``launcher.image.dockerignore``); virtual environments (a directory holding ``pyvenv.cfg``)
are skipped whatever their name. Entries are sorted by path components, the order the layer
is written in.

Files that look like secrets (``SECRET_PATTERNS``: private keys, ``.env`` files, the AWS
CLI's and SSH's directories, tool credentials) are left out too, and named
(``Workspace.left_out``), unless ``.dockerignore`` brings them back: the patterns are read as
if they headed the user's ``.dockerignore``, so a later ``!.env`` line ships ``.env`` as
Docker's rules say (the last line to match decides). A directory left out as a secret is
left out whole, even where Docker's own rules would let a path in it through (``**/.aws``
does not match ``.aws/credentials`` in the SDK when ``!.aws/config`` makes the walk go in):
inside it, only a path a ``!`` line matches ships.

A file whose first bytes are a private key's armour line (``launcher.image.private_keys``)
is left out and named the same way, whatever its name, and a ``!`` line that matches it
ships it the same way; the verdicts are kept in the user's cache, so an unchanged file is
not read again.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import marshal
import operator
import os
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from launcher import cache
from launcher.errors import UsageError
from launcher.image import dockerignore, private_keys
from launcher.image.dockerignore import Match

# Skipped even without a .dockerignore: VCS data, caches and virtual environments.
DEFAULT_IGNORES = (
    ".git",
    "**/.git",
    "**/__pycache__",
    "**/*.pyc",
    ".venv",
    "**/.venv",
    "venv",
    "**/node_modules",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
)
# Files that look like secrets, left out unless a ``!`` line of .dockerignore brings them
# back. Taken from the file-name rules of secret scanners (detect-secrets, TruffleHog and
# GitHub secret scanning match file contents only, and have no such rules):
#   gitleaks v8.30.1, config/gitleaks.toml (rule pkcs12-file: its one rule on paths alone);
#   Talisman v1.37.0, detector/filename/filename_detector.go (filenamePatterns);
#   shhgit (eth0izzle/shhgit, bac0c7d, 2025-02), config.yaml (filename/extension/path rules).
# Left out of their lists on purpose, as too often not secret in a training workspace:
# *.asc (mostly public keys and signatures), *.log, *.sql, *.sqlite, settings.py,
# database.yml, shell rc and profile files, and names holding "password", "backup", "dump".
# Bare "credentials" (a directory of source code as often as the AWS CLI's file, whose
# directory is below) and credentials*.py/.md (code and docs about credentials) ship.
SECRET_PATTERNS = (
    "**/.env*",  # shhgit "^\.?env$"; Talisman "\.?env"; * for .env.local, direnv's .envrc
    "**/.aws",  # shhgit "\.?aws/credentials$": the AWS CLI's credentials, config, caches
    "**/.ssh",  # shhgit "\.?ssh/config$", and the keys below
    "**/id_rsa*",  # OpenSSH's key names (ssh-keygen(1) FILES); * for .pub and _sk
    "**/id_dsa*",
    "**/id_ecdsa*",
    "**/id_ed25519*",
    "**/*_rsa",  # shhgit "^.*_rsa$"; Talisman "^.+_rsa$" (and _dsa, _ecdsa, _ed25519)
    "**/*_dsa",
    "**/*_ecdsa",
    "**/*_ed25519",
    "**/*.pem",  # shhgit extension .pem; Talisman "^.+\.pem$"
    "**/*.key",  # Talisman "^.+\.key(pair)?$"; shhgit extension "^key(pair)?$"
    "**/*.keypair",
    "**/*.p12",  # gitleaks pkcs12-file "\.p(?:12|fx)$"; shhgit; Talisman
    "**/*.pfx",
    "**/*.pkcs12",  # shhgit; Talisman
    "**/*.ppk",  # PuTTY keys: shhgit; Talisman
    "**/*.jks",  # Java keystores: shhgit .jks; Talisman "^.*\.key(store|ring)$"
    "**/*.keystore",
    "**/*.kdbx",  # KeePass: shhgit "^kdbx?$"; Talisman "^.*\.kdb$"
    "**/*.kdb",
    "**/*.ovpn",  # OpenVPN, keys inline: shhgit; Talisman
    "**/.netrc",  # shhgit "^(\.|_)?netrc$"; Talisman "^\.?netrc$" (wandb, HF logins)
    "**/_netrc",
    "**/.git-credentials",  # shhgit "^\.?git-credentials$"
    "**/.pgpass",  # shhgit "^\.?pgpass$"
    "**/.s3cfg",  # shhgit; Talisman "^\.?s3cfg$"
    "**/.dockercfg",  # shhgit "^\.?dockercfg$"
    "**/.htpasswd",  # shhgit; Talisman "^\.?htpasswd$"
    "**/.npmrc",  # shhgit "^\.?npmrc$"
    "**/.pypirc",  # none of the three; PyPA's .pypirc specification: passwords in plain text
    "**/credentials.xml",  # shhgit; Talisman "^credentials\.xml$" (Jenkins)
    "**/*credentials.json",  # none of the three: Google's credentials.json (API quickstarts)
    # and application_default_credentials.json (gcloud auth application-default login)
    "**/.*_history",  # Talisman "^\.\w+_history$"; shhgit's shell and client histories
    # Where tools keep their logins, each from the tool's own documentation (issue 43: a
    # workspace that is a home directory, or holds a copy of one, shipped them all):
    "**/*.env",  # prod.env, staging.env: dotenv files named for their environment
    "**/.docker/config.json",  # docker login "stores credentials in $HOME/.docker/config.json"
    # (docker/cli, docs/reference/commandline/login.md)
    "**/.kube",  # kubectl's kubeconfig, tokens and client keys: "$HOME/.kube/config"
    # (kubernetes.io, "Organizing Cluster Access Using kubeconfig Files")
    "**/*huggingface/token",  # huggingface_hub's login: HF_TOKEN_PATH = $HF_HOME/token, HF_HOME
    # ~/.cache/huggingface (huggingface_hub constants.py); ~/.huggingface/token before 0.14
    "**/*huggingface/stored_tokens",  # HF_STORED_TOKENS_PATH, beside it (constants.py)
    "**/.gnupg",  # GnuPG's home: private-keys-v1.d/, secring.gpg (gpg(1), --homedir, FILES)
    "**/*.tfstate",  # Terraform: local state "is stored in plain-text JSON files" and holds
    "**/*.tfstate.backup",  # initial passwords and keys (language/state/sensitive-data)
    "**/*.tfvars",  # github/gitignore Terraform.gitignore: .tfvars files "are likely to
    "**/*.tfvars.json",  # contain sensitive data, such as password, private keys"
    "**/credentials.tfrc.json",  # terraform login saves its API token "in plain text" in
    # credentials.tfrc.json (cli/commands/login)
    "**/.vault-token",  # Vault's CLI caches its token in ~/.vault-token (commands/token-helper)
    "**/.config/gcloud",  # gcloud writes credentials under $CLOUDSDK_CONFIG only, default
    # ~/.config/gcloud: credentials.db, access_tokens.db, legacy_credentials/ (google-auth,
    # _cloud_sdk.py: "the ~/.config subdirectory containing gcloud credentials")
    "**/.azure",  # Azure CLI: "The MSAL token cache and service principal entries are saved
    # as ... plaintext files on Linux and macOS" in ~/.azure (learn.microsoft.com,
    # msal-based-azure-cli)
    "**/.kaggle/kaggle.json",  # Kaggle's API token (Kaggle/kaggle-api README, API credentials)
    "**/.databrickscfg",  # Databricks CLI profiles, access tokens in them (docs.databricks.com,
    # dev-tools/auth/config-profiles)
)
IGNORE_FILE = ".dockerignore"
VENV_MARKER = "pyvenv.cfg"
# A stat that lies within this of the scan that recorded it is not trusted next time (git's
# "racily clean" rule; 2 s, FAT's granularity, the coarsest): launcher.image.index says why.
RACY_NS = 2_000_000_000

FILE, SYMLINK, DIRECTORY = b"0", b"2", b"5"  # tar type flags


class Entry(NamedTuple):
    """One path to ship. The first five fields are what the layer ships, the last five what
    the local index compares (``Workspace.file_stamps``): slices of a tuple cost nothing."""

    path: str  # relative to the workspace, /-separated
    kind: bytes  # FILE, SYMLINK or DIRECTORY
    mode: int  # permission bits
    link: str  # symlinks only, else ""
    size: int  # files only, else 0
    mtime_ns: int
    ctime_ns: int
    ino: int
    dev: int


@dataclass(frozen=True)
class Workspace:
    root: str
    entries: tuple[Entry, ...]
    scanned_ns: int  # wall clock when the walk started: the index's racy-entry rule
    # What looks like a secret and does not ship (files and links; a directory with a /
    # when it could not be read), in walk order; and what looks like one and ships, as a
    # ``!`` line of .dockerignore says (a directory with a /). Not in ``listing``: for a
    # layer the same, the same listing.
    left_out: tuple[str, ...] = ()
    brought_back: tuple[str, ...] = ()

    @property
    def bytes(self) -> int:
        return sum(e.size for e in self.entries)

    @functools.cached_property
    def file_stamps(self) -> dict[str, tuple[int, int, int, int, int]]:
        """path -> (size, mtime, ctime, inode, device) of every file: what the local index
        compares, as a whole."""
        return {e[0]: e[4:9] for e in self.entries if e[1] == FILE}

    @functools.cached_property
    def stamps(self) -> str:
        """A digest of every entry as scanned, stat included: equal only if nothing moved
        (another Python's marshal can only make it differ, never equal by mistake)."""
        return hashlib.sha256(self.listing()).hexdigest()

    def listing(self) -> builtins.bytes:  # the class's ``bytes`` is its size
        """Every entry, stat included, as marshal data (plain tuples: marshal takes no
        NamedTuple): what ``stamps`` hashes and ``from_listing`` reads back."""
        return marshal.dumps([e[:] for e in self.entries], cache.MARSHAL_VERSION)

    @classmethod
    def from_listing(
        cls,
        root: str,
        listing: builtins.bytes | memoryview,
        scanned_ns: int,
        left_out: tuple[str, ...] = (),
        brought_back: tuple[str, ...] = (),
    ) -> Workspace:
        """The workspace a ``listing`` holds, its ``stamps`` taken from those very bytes."""
        entries = tuple([_NEW(Entry, e) for e in marshal.loads(listing)])
        found = cls(root, entries, scanned_ns, left_out, brought_back)
        found.__dict__["stamps"] = hashlib.sha256(listing).hexdigest()  # cached_property's slot
        return found


def cache_file(root: str, suffix: str) -> Path:
    """This workspace's file in the user's cache (``launcher.cache``), named for its real
    path."""
    key = hashlib.sha256(os.path.realpath(root).encode(errors="surrogateescape")).hexdigest()
    return cache.directory() / "workspaces" / f"{key[:32]}.{suffix}"


def sort_key(path: str) -> str:
    """Component-wise order ("a/b" before "a-c"): NUL sorts below every name character."""
    return path.replace("/", "\0")


def ignore_patterns(root: str, extra: Sequence[str] = ()) -> list[str]:
    patterns = [*DEFAULT_IGNORES, *extra]
    path = os.path.join(root, IGNORE_FILE)
    if os.path.isfile(path):
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            patterns += dockerignore.parse(f.read())
    return patterns


def scan(
    root: str | os.PathLike[str],
    extra_ignores: Sequence[str] = (),
    secrets: Sequence[str] = SECRET_PATTERNS,
    keys: bool = True,
) -> Workspace:
    """Every entry to ship, sorted, with its stat; UsageError for what cannot be shipped.
    What ``secrets`` alone leaves out, and with ``keys`` a file holding a private key, is
    named in ``left_out``; what they match and a ``!`` line ships in ``brought_back``."""
    base = os.fspath(root)
    if not os.path.isdir(base):
        raise UsageError(f"--workspace {base!r}: not a directory")
    matcher = dockerignore.Matcher(ignore_patterns(base, extra_ignores), secrets)
    started = time.time_ns()
    verdicts = private_keys.Verdicts(cache_file(base, "keys"), started - RACY_NS) if keys else None
    entries: list[Entry] = []
    left_out: list[str] = []
    brought_back: list[str] = []

    def visit(directory: str, rel_dir: str, unmatched: Match | None = None) -> bool:
        """Add what ``directory`` holds, in order; False (nothing added) for a virtual env.
        ``unmatched``: what a name no pattern matches gets (SECRET inside a directory left
        out as a secret, which the walk enters only for ``!`` lines).

        Names sorted within each directory, each directory right before its contents: the
        component-wise order of the whole tree, without sorting it."""
        with os.scandir(directory) as listing:
            found = sorted(listing, key=_NAME)
        if rel_dir and any(d.name == VENV_MARKER and d.is_file() for d in found):
            return False
        said = matcher.matches(rel_dir, [d.name for d in found]).get
        prefix = f"{rel_dir}/" if rel_dir else ""
        for d in found:
            rel = prefix + d.name
            verdict = said(d.name, unmatched)
            if verdict is Match.KEPT and unmatched is not None:
                verdict = Match.KEPT_SECRET  # brought back from a secret directory
            if d.is_dir(follow_symlinks=False):
                ships = verdict is None or verdict is Match.KEPT or verdict is Match.KEPT_SECRET
                if not ships and not matcher.may_reinclude(rel):
                    if verdict is Match.SECRET:
                        name_all(d.path, rel)
                    continue
                marks = len(entries), len(left_out), len(brought_back)
                if ships:
                    entries.append(_entry(d, rel))
                if verdict is Match.KEPT_SECRET:
                    brought_back.append(rel + "/")
                # what a shipped directory holds ships as its patterns say
                inner = None if ships else Match.SECRET if verdict is Match.SECRET else unmatched
                if not visit(d.path, rel, inner):
                    del entries[marks[0] :], left_out[marks[1] :], brought_back[marks[2] :]
            elif verdict is None or verdict is Match.KEPT:
                entry = _entry(d, rel)
                if (
                    entry[1] == FILE
                    and verdicts is not None
                    and private_keys.stamp(entry[4:9]) not in verdicts.clean
                    and verdicts.holds_key(d.path, rel, entry[4:9])
                ):
                    if verdict is None:
                        left_out.append(rel)
                        continue
                    brought_back.append(rel)
                entries.append(entry)
            elif verdict is Match.SECRET:
                left_out.append(rel)
            elif verdict is Match.KEPT_SECRET:
                entries.append(_entry(d, rel))
                brought_back.append(rel)
        return True

    def name_all(directory: str, rel_dir: str) -> None:
        """A directory left out as a secret, not walked for ``!`` lines: nothing in it ships;
        what is in it is named, but for what .dockerignore or the defaults leave out anyway
        (a virtual environment is not named either: it never ships)."""
        try:
            with os.scandir(directory) as listing:
                found = sorted(listing, key=_NAME)
        except OSError:  # never read before it was named: no reason to fail the build now
            left_out.append(rel_dir + "/")
            return
        if any(d.name == VENV_MARKER and d.is_file() for d in found):
            return
        said = matcher.matches(rel_dir, [d.name for d in found]).get
        for d in found:
            if said(d.name) is Match.IGNORED:
                continue
            rel = f"{rel_dir}/{d.name}"
            if d.is_dir(follow_symlinks=False):
                name_all(d.path, rel)
            else:
                left_out.append(rel)

    visit(base, "")
    if verdicts is not None:
        verdicts.save((e[0], e[4:9]) for e in entries if e[1] == FILE)
    return Workspace(base, tuple(entries), started, tuple(left_out), tuple(brought_back))


_NAME = operator.attrgetter("name")
_NEW = tuple.__new__  # a third of the cost of a NamedTuple's generated __new__


def _entry(d: os.DirEntry[str], rel: str) -> Entry:
    st = d.stat(follow_symlinks=False)
    mode = st.st_mode
    if stat.S_ISREG(mode):
        kind, size, link = FILE, st.st_size, ""
    elif stat.S_ISDIR(mode):
        kind, size, link = DIRECTORY, 0, ""
    elif stat.S_ISLNK(mode):
        kind, size, link = SYMLINK, 0, os.readlink(d.path)
    else:
        raise UsageError(f"--workspace: {d.path} is not a file, directory or symlink")
    # One tuple, built once: 50,000 entries pay for every intermediate one.
    fields = (
        rel,
        kind,
        mode & 0o7777,
        link,
        size,
        st.st_mtime_ns,
        st.st_ctime_ns,
        st.st_ino,
        st.st_dev,
    )
    return _NEW(Entry, fields)
