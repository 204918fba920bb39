"""A job file (``launcher run -f job.yaml``): every key, each fault named by its key path,
flags laid over the file, and the same requests as the equivalent flags."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import textwrap
from pathlib import Path

import pytest

from devenv.clusters import cluster_info
from launcher.api import make_spec
from launcher.cli import main as cli
from launcher.errors import UsageError
from launcher.job import jobdef, jobfile
from launcher.job.jobspec import EfaMode, JobSpec, Mount, MountKind, NodeGroup, Tmpfs, Ulimit
from launcher.job.shapes import Dependency
from tests.support import cli as cli_support
from tests.support.processes import rendezvous_port

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/base@sha256:" + "a" * 64

FULL = f"""\
# every key a job file takes
name: train-llm
command: [python, train.py, --epochs, 3]
image: {IMAGE}
workspace: ws
nodes: 2
gpus_per_node: 8
pool: default
env:
  NCCL_DEBUG: INFO
  EPOCHS: 3
secrets:
  HF_TOKEN: team/hf-token
mounts:
  - type: efs
    dst: /data
  - type: bind
    src: /opt/cache
    dst: /cache
    readonly: true
  - type=fsx,dst=/scratch
ulimits:
  nproc: 65536
  core: "0:1024"
shm_size: 64g
tmpfs:
  /tmp/fast: 8g
efa: require
timeout: 90m
retries: 2
restarts: true
torchrun: true
port: 29600
after: [abc-123]
share_id: teamA
priority: 10
tags:
  project: llm
  cost-center: 42
privileged: false
"""

# The same job as flags of launcher run.
FLAGS = [
    "--name", "train-llm",
    "--image", IMAGE,
    "--nodes", "2",
    "--gpus-per-node", "8",
    "--pool", "default",
    "--env", "NCCL_DEBUG=INFO",
    "--env", "EPOCHS=3",
    "--secret", "HF_TOKEN=team/hf-token",
    "--mount", "type=efs,dst=/data",
    "--mount", "type=bind,src=/opt/cache,dst=/cache,readonly",
    "--mount", "type=fsx,dst=/scratch",
    "--ulimit", "nproc=65536",
    "--ulimit", "core=0:1024",
    "--shm-size", "64g",
    "--tmpfs", "/tmp/fast:8g",
    "--efa", "require",
    "--timeout", "90m",
    "--retries", "2",
    "--restarts",
    "--torchrun",
    "--port", "29600",
    "--after", "abc-123",
    "--share-id", "teamA",
    "--priority", "10",
    "--tag", "project=llm",
    "--tag", "cost-center=42",
]  # fmt: skip
COMMAND = ["python", "train.py", "--epochs", "3"]


def parse(text: str) -> jobfile.JobFile:
    return jobfile.parse(textwrap.dedent(text), "job.yaml")


def error(text: str) -> str:
    with pytest.raises(UsageError) as info:
        parse(text)
    assert info.value.exit_code == 2
    message = str(info.value)
    assert "\n" not in message
    return message


def untokened(requests: dict) -> str:
    """The requests with the node watch's token, new on every submit, left out."""
    return re.sub(r'(LAUNCHER_WATCH_TOKEN", "value": )"[0-9a-f]+"', r"\1-", json.dumps(requests))


def flags_spec(*argv: str) -> JobSpec:
    """The spec ``launcher run ARGV`` makes, without a cluster (Run.run's first half)."""
    args = cli.parser().parse_args(["run", *argv])
    options = cli.Run.options(args)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.file:
        loaded = jobfile.load(args.file)
        options = jobfile.merge(loaded.options, options)
        command = command or list(loaded.command or ())
    return make_spec(command, **options)


def test_a_file_with_every_key_reads_as_the_flags_do():
    loaded = jobfile.parse(FULL, "jobs/job.yaml")
    assert loaded.command == tuple(COMMAND)
    assert loaded.workspace == os.path.join("jobs", "ws")  # from the file's directory
    spec = loaded.spec()
    assert spec.name == "train-llm" and spec.image == IMAGE
    assert (spec.nodes, spec.gpus_per_node, spec.pool) == (2, 8, "default")
    assert spec.env == (("NCCL_DEBUG", "INFO"), ("EPOCHS", "3"))
    assert [s.env for s in spec.secrets] == ["HF_TOKEN"]
    assert spec.mounts == (
        Mount(MountKind.EFS, "/data"),
        Mount(MountKind.BIND, "/cache", "/opt/cache", readonly=True),
        Mount(MountKind.FSX, "/scratch"),
    )
    assert spec.ulimits == (Ulimit("nproc", 65536, 65536), Ulimit("core", 0, 1024))
    assert (spec.shm_mib, spec.tmpfs) == (65536, (Tmpfs("/tmp/fast", 8192),))
    assert (spec.efa, spec.timeout_seconds, spec.attempts) == (EfaMode.REQUIRE, 5400, 2)
    assert (spec.restarts, spec.torchrun, spec.rendezvous_port) == (True, True, 29600)
    assert spec.after == (Dependency("abc-123"),)
    assert (spec.share_id, spec.priority, spec.privileged) == ("teamA", 10, False)
    assert spec.tags == (("project", "llm"), ("cost-center", "42"))
    assert spec == flags_spec(*FLAGS, "--", *COMMAND)


def test_every_key_of_the_file_is_documented_and_read():
    page = (Path(__file__).parents[2] / "docs" / "jobs.md").read_text()
    section = page.split("## A job file", 1)[1].split("\n## ", 1)[0]
    for key in jobfile.KEYS:
        assert f"`{key}`" in section or f"\n{key}:" in section or f"  {key}:" in section, key


def test_the_docs_complete_file_is_a_valid_job_file():
    from tests.support import examples

    page = Path(__file__).parents[2] / "docs" / "jobs.md"
    (block,) = [b for b in examples.blocks(page) if b.lang == "yaml" and "groups:" in b.text]
    spec = jobfile.parse(block.text, "job.yaml").spec()
    assert (spec.name, spec.nodes, spec.groups[0].name) == ("train-llm", 2, "trainer")
    assert spec.array_size is None and spec.after == ()  # null and [] as if left out


def test_a_string_command_runs_in_a_shell_and_an_array_and_groups_are_read():
    loaded = parse(
        f"""
        image: {IMAGE}
        command: echo "$AWS_BATCH_JOB_ARRAY_INDEX" > /tmp/out
        array: 4
        efa: off
        """
    )
    spec = loaded.spec()
    assert spec.command == ("sh", "-c", 'echo "$AWS_BATCH_JOB_ARRAY_INDEX" > /tmp/out')
    assert (spec.array_size, spec.efa) == (4, EfaMode.OFF)  # YAML's off is false
    grouped = parse(
        f"""
        image: {IMAGE}
        command: [python, serve.py]
        groups:
          - name: trainer
            nodes: 3
            gpus_per_node: 8
          - name: server
            nodes: 1
            image: other:1
            command: [python, ps.py]
            env: {{ROLE: ps}}
        """
    ).spec()
    assert grouped.nodes == 4  # the groups' sum when nodes is not given
    assert grouped.groups == (
        NodeGroup(0, 2, gpus_per_node=8, name="trainer"),
        NodeGroup(3, 3, "other:1", ("python", "ps.py"), env=(("ROLE", "ps"),), name="server"),
    )


def test_workspace_false_runs_the_image_as_it_is():
    assert parse("workspace: false").no_workspace
    assert parse("{}").workspace is None and not parse("").no_workspace


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("env:\n  FOO: [a, b]", "job.yaml: env.FOO: expected a string, got a list"),
        ("nodez: 2", "job.yaml: nodez: not a key; did you mean nodes?"),
        (
            "mounts:\n  - {type: efs, dst: /a}\n  - {type: bind, src: /b}",
            "job.yaml: mounts[1].dst: required for a mount of type bind",
        ),
        (
            "mounts:\n  - {dst: /a}",
            "job.yaml: mounts[0].type: required; allowed: efs, fsx, bind, device",
        ),
        (
            "mounts:\n  - {type: nfs, dst: /a}",
            "job.yaml: mounts[0].type: 'nfs'; allowed: efs, fsx, bind, device",
        ),
        (
            "mounts:\n  - {type: efs, dst: /a, src: /b}",
            "job.yaml: mounts[0].src: not a key; allowed: type, dst, readonly",
        ),
        ("mounts:\n  - {type: efs, dst: a}", "job.yaml: mounts[0]: dst= must be an absolute path"),
        (
            "mounts:\n  - {type: efs, dst: /a, readonly: yes please}",
            "job.yaml: mounts[0].readonly: expected true or false, got a string",
        ),
        ("mounts: type=efs,dst=/a", "job.yaml: mounts: expected a list of mounts, got a string"),
        ("nodes: two", "job.yaml: nodes: expected an integer, got a string"),
        ("nodes: 0", "job.yaml: nodes 0: a job needs at least 1 node"),
        ("retries: 11", "job.yaml: retries 11: allowed 1-10 (AWS Batch attempts)"),
        ("port: 80", "job.yaml: port 80: allowed 1024-65534"),
        ("priority: true", "job.yaml: priority: expected an integer, got a boolean"),
        ("torchrun: yes please", "job.yaml: torchrun: expected true or false, got a string"),
        ("image: [a]", "job.yaml: image: expected a string, got a list"),
        ("env: [A=1]", "job.yaml: env: expected a mapping (KEY: VALUE lines), got a list"),
        ("env:\n  1A: x", "job.yaml: env.1A: expected NAME=VALUE with NAME like"),
        ("env:\n  AWS_BATCH_X: x", "job.yaml: env.AWS_BATCH_X: names starting with AWS_BATCH are"),
        ("env:\n  DEBUG: yes", "job.yaml: env.DEBUG: expected a string, got a boolean (quote it"),
        ("tags:\n  aws:x: y", "job.yaml: tags.aws:x: expected KEY=VALUE (key 1-128 chars, not aws"),
        ("secrets:\n  TOKEN: arn:aws:s3:::bucket", "job.yaml: secrets.TOKEN: "),
        (
            "ulimits:\n  files: 10",
            "job.yaml: ulimits.files: expected NAME=SOFT[:HARD] with NAME one",
        ),
        ("ulimits:\n  nproc: lots", "job.yaml: ulimits.nproc: limits are integers"),
        ("tmpfs:\n  /scratch: huge", "job.yaml: tmpfs./scratch: expected a size like 512m"),
        ("shm_size: big", "job.yaml: shm_size: expected a size like 512m, 64g or 1024 (MiB)"),
        ("timeout: 10", "job.yaml: timeout: AWS Batch needs at least 60 seconds"),
        ("timeout: soon", "job.yaml: timeout: expected a duration like 90m, 2h"),
        ("efa: maybe", "job.yaml: efa: allowed auto, require, off"),
        ("after: {job: x}", "job.yaml: after: expected a list of job ids, got a mapping"),
        ("command: []", "job.yaml: command: empty; give the program and its arguments"),
        ("command: [python, [a]]", "job.yaml: command[1]: expected a string, got a list"),
        ("command: {python: x}", "job.yaml: command: expected a list of strings or one string"),
        ("workspace: 3", "job.yaml: workspace: expected a directory, or false for none"),
        (
            "groups:\n  - nodes: 1\n    gpu_per_node: 2",
            "job.yaml: groups[0].gpu_per_node: not a key; did you mean gpus_per_node?",
        ),
        ("groups:\n  - name: a", "job.yaml: groups[0].nodes: required: how many nodes"),
        ("groups:\n  - nodes: 0", "job.yaml: groups[0].nodes: 0; a group has at least 1 node"),
        ("groups: []", "job.yaml: groups: expected a list of node groups, got a list"),
        ("nodes: 3\ngroups:\n  - nodes: 1", "job.yaml: node groups [(0, 0)]: must cover nodes 0-2"),
        ("secrets:\n  A: x\nenv:\n  A: y", "job.yaml: secrets A: the variable is given twice"),
        ("- nodes: 2", "job.yaml: expected a mapping of keys (name, command, ...), got a list"),
        ("nodes: 2\nnodes: 3", "job.yaml:2:1: not valid YAML: nodes: given twice; give each"),
        ("env: {A: 1", "job.yaml:1:11: not valid YAML: expected ',' or '}', but got"),
        ("image: !!python/object:os.system x", "job.yaml:1:8: not valid YAML: could not determine"),
    ],
)  # fmt: skip
def test_each_fault_is_one_line_naming_the_key_path(text, line):
    assert error(text).startswith(line)


def test_an_unknown_key_far_from_every_key_lists_them():
    assert error("zzzzzz: 1") == "job.yaml: zzzzzz: not a key; allowed: " + ", ".join(jobfile.KEYS)


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(UsageError, match=r"nope.yaml: no such job file$"):
        jobfile.load(tmp_path / "nope.yaml")


def test_flags_override_the_file_and_lists_and_mappings_merge_by_key(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(FULL)
    spec = flags_spec(
        "-f", str(path),
        "--nodes", "4",
        "--env", "NCCL_DEBUG=WARN",
        "--env", "EXTRA=1",
        "--tag", "owner=me",
        "--mount", "type=efs,dst=/data,readonly",
        "--ulimit", "nproc=1024",
        "--efa", "auto",
        "--retries", "3",
        "--no-restarts",
    )  # fmt: skip
    assert spec.nodes == 4 and spec.command == tuple(COMMAND)
    assert spec.env == (("NCCL_DEBUG", "WARN"), ("EPOCHS", "3"), ("EXTRA", "1"))
    assert spec.tags == (("project", "llm"), ("cost-center", "42"), ("owner", "me"))
    assert spec.mounts[0] == Mount(MountKind.EFS, "/data", readonly=True)
    assert len(spec.mounts) == 3
    assert spec.ulimits[0] == Ulimit("nproc", 1024, 1024)
    assert (spec.efa, spec.attempts, spec.restarts) == (EfaMode.AUTO, 3, False)
    assert spec.torchrun and spec.rendezvous_port == 29600  # not given: the file's


def test_the_command_after_the_separator_overrides_the_files(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(FULL)
    spec = flags_spec("-f", str(path), "--", "python", "eval.py")
    assert spec.command == ("python", "eval.py")
    assert spec.name == "train-llm"  # the file's name stays


def test_without_a_file_the_flags_left_out_take_jobspecs_defaults():
    spec = flags_spec("--image", IMAGE, "--", "true")
    assert spec == JobSpec(name="true", command=("true",), image=IMAGE)


def test_the_python_api_takes_the_file_and_keyword_overrides(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(FULL)
    loaded = jobfile.load(path)
    assert loaded.workspace == str(tmp_path / "ws")
    spec = loaded.spec(["python", "eval.py"], nodes=1, env={"EPOCHS": "9"}, efa="off")
    assert (spec.nodes, spec.command, spec.efa) == (1, ("python", "eval.py"), EfaMode.OFF)
    assert dict(spec.env) == {"NCCL_DEBUG": "INFO", "EPOCHS": "9"}


def test_importing_the_module_leaves_yaml_unloaded():
    import subprocess
    import sys

    code = "import sys, launcher.job.jobfile, launcher.cli.main; print('yaml' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- the real CLI -----------------------------------------------------------------------------


def test_a_file_and_its_flags_make_the_same_requests_on_the_emulated_stack(
    moto_server, synth_default, tmp_path
):
    moto_server.reset()
    moto_server.deploy(synth_default.outdir, synth_default.stack_names)
    (tmp_path / "ws").mkdir()
    job = tmp_path / "job.yaml"
    # What the default stack takes: no pool, fair share, secrets or FSx, and no bind mount,
    # since it runs no privileged jobs (tests/test_host_mounts.py).
    job.write_text(
        FULL.replace("pool: default\n", "").replace("after: [abc-123]\n", "")
        .replace("workspace: ws\n", "workspace: false\n")
        .replace("share_id: teamA\n", "").replace("priority: 10\n", "")
        .replace("secrets:\n  HF_TOKEN: team/hf-token\n", "")
        .replace("  - type=fsx,dst=/scratch\n", "")
        .replace("  - type: bind\n    src: /opt/cache\n    dst: /cache\n    readonly: true\n", "")
    )  # fmt: skip
    env = {**os.environ, **moto_server.env}
    env.pop("LAUNCHER_STACK", None)
    from_file = cli_support.launcher("run", "-f", str(job), "--dryrun", env=env)
    assert from_file.returncode == 0, from_file.stderr
    flags = [
        "--no-workspace", *FLAGS[:FLAGS.index("--pool")], *FLAGS[FLAGS.index("--env"):],
    ]  # fmt: skip
    for flag, value in (
        ("--after", "abc-123"), ("--share-id", "teamA"), ("--priority", "10"),
        ("--secret", "HF_TOKEN=team/hf-token"), ("--mount", "type=fsx,dst=/scratch"),
        ("--mount", "type=bind,src=/opt/cache,dst=/cache,readonly"), ("--efa", "require"),
    ):  # fmt: skip
        i = flags.index(value)
        assert flags[i - 1] == flag
        del flags[i - 1 : i + 1]
    from_flags = cli_support.launcher("run", *flags, "--dryrun", "--", *COMMAND, env=env)
    assert from_flags.returncode == 0, from_flags.stderr
    assert untokened(json.loads(from_file.stdout)) == untokened(json.loads(from_flags.stdout))


def _no_aws(**extra: str) -> dict[str, str]:
    """This process's environment with an AWS endpoint where nothing answers: a run that asked
    AWS anything would fail with exit 1, not the refusal's 2."""
    return {
        **os.environ,
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": "us-east-1",
        **extra,
    }


def test_a_bad_file_is_one_line_and_exit_2_before_any_call(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("nodes: 2\nenv:\n  FOO: [a]\ncommand: [true]\n")
    result = cli_support.launcher("run", "-f", str(job), "--image", IMAGE, env=_no_aws())
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"launcher: error: {job}: env.FOO: expected a string, got a list"
    ]


def test_a_two_node_job_file_runs_on_the_local_engine(
    moto_server, synth_default, docker_engine, registry, busybox_base, tmp_path
):
    moto_server.reset()
    moto_server.deploy(synth_default.outdir, synth_default.stack_names)
    ws = tmp_path / "ws"
    ws.mkdir()
    rendezvous = Path(__file__).parents[2] / "demo" / "workspace" / "rendezvous.sh"
    (ws / "rendezvous.sh").write_text(rendezvous.read_text())
    job = tmp_path / "job.yaml"
    job.write_text(
        textwrap.dedent(
            f"""\
            name: rendezvous
            image: {busybox_base}
            workspace: ws
            nodes: 2
            port: {rendezvous_port()}
            env:
              GREETING: hello
            command: sh /workspace/rendezvous.sh && echo "$GREETING from the file"
            """
        )
    )
    env = {
        **os.environ,
        **moto_server.env,
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_REGISTRY": registry.host,
        "LAUNCHER_LOCAL_STATE": str(tmp_path / "state"),
        "LAUNCHER_LOCAL_EFS": str(tmp_path / "efs"),
    }
    env.pop("LAUNCHER_STACK", None)
    result = cli_support.launcher(
        "run", "--local", "-f", str(job), "--follow", env=env, timeout=180, cwd="/"
    )
    assert result.returncode == 0, result.stderr
    err = result.stderr
    assert "[node 0] rank 0 received: hello from rank 1" in err
    assert "[node 1] hello from the file" in err
    assert (tmp_path / "efs" / "rendezvous").read_text() == "rendezvous complete\n"
    assert result.stdout.strip().splitlines()[-1].startswith("local-")


def test_requests_from_the_file_are_what_jobdef_builds_from_the_flags():
    """The file's spec and the flags' spec build the same requests (the fast tier's twin of
    the emulated test below, on a cluster without fair share)."""

    def plain(spec: JobSpec) -> JobSpec:  # no fair share, no FSx there
        return dataclasses.replace(spec, share_id=None, priority=None, mounts=spec.mounts[:2])

    from_file = plain(jobfile.parse(FULL, "job.yaml").spec())
    from_flags = plain(flags_spec(*FLAGS, "--", *COMMAND))
    info = cluster_info()
    built = [jobdef.build(spec, info).as_dict() for spec in (from_file, from_flags)]
    assert untokened(built[0]) == untokened(built[1])


# --- the workspace a job file may name (issue 43, item 5) --------------------------------------


def _home_with_repo(tmp_path, monkeypatch, workspace: str) -> tuple[Path, Path]:
    """A home directory holding a Docker login and a cloned repository whose job file names
    ``workspace``; HOME points at it. Returns (home, job file)."""
    home = tmp_path / "home"
    (home / ".docker").mkdir(parents=True)
    (home / ".docker" / "config.json").write_text('{"auths": {"ghcr.io": {"auth": "dTpw"}}}')
    repo = home / "repo"
    (repo / "ws" / "sub").mkdir(parents=True)
    (repo / "train.py").write_text("print('training')\n")
    (repo / "up").symlink_to(home)  # a link the repository brought, leading out of it
    monkeypatch.setenv("HOME", str(home))
    job = repo / "job.yaml"
    job.write_text(f"workspace: {workspace}\ncommand: [python, train.py]\n")
    return home, job


@pytest.mark.parametrize("named", ["~/", "..", "../..", "/", "up", "up/repo/.."])
def test_a_job_file_may_not_name_a_workspace_outside_its_directory(tmp_path, monkeypatch, named):
    """``workspace: ~/`` in a cloned repository's job file shipped the user's home, its
    logins with it, to everyone who may pull the image (issue 43)."""
    _, job = _home_with_repo(tmp_path, monkeypatch, named)
    loaded = jobfile.load(job)
    with pytest.raises(UsageError, match=r"is outside the job file's directory .*--workspace "):
        _ = loaded.workspace


@pytest.mark.parametrize("named", [".", "ws", "ws/sub", "./ws/../ws"])
def test_a_job_file_names_its_own_directory_or_one_under_it(tmp_path, monkeypatch, named):
    _, job = _home_with_repo(tmp_path, monkeypatch, named)
    assert jobfile.load(job).workspace == os.path.normpath(job.parent / named)


def test_the_refusal_is_one_line_and_exit_2_before_anything_is_walked(tmp_path, monkeypatch):
    home, job = _home_with_repo(tmp_path, monkeypatch, "~/")
    cache = tmp_path / "cache"
    env = _no_aws(
        HOME=str(home),
        XDG_CACHE_HOME=str(cache),  # a walk of the workspace would keep its verdicts here
    )
    result = cli_support.launcher("run", "-f", str(job), "--image", IMAGE, env=env)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"launcher: error: {job}: workspace: {home} is outside the job file's directory "
        f"{job.parent}; a job file ships only that directory or one under it (give "
        f"--workspace {home} on the command line to ship it)"
    ]
    assert not cache.exists()


def test_the_command_line_may_ship_what_the_file_may_not(
    moto_server, synth_default, docker_engine, registry, busybox_base, tmp_path, monkeypatch
):
    """``--workspace`` given on the command line replaces the file's, so the user who means
    it ships the directory (its logins still left out, and said); ``--no-workspace`` ships
    none, so the file's choice is never read."""
    moto_server.reset()
    moto_server.deploy(synth_default.outdir, synth_default.stack_names)
    home, job = _home_with_repo(tmp_path, monkeypatch, "~/")
    env = {
        **os.environ,
        **moto_server.env,
        "HOME": str(home),
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_REGISTRY": registry.host,
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    env.pop("LAUNCHER_STACK", None)
    run = ("run", "-f", str(job), "--image", busybox_base, "--dryrun")
    given = cli_support.launcher(*run, "--workspace", str(home), env=env)
    assert given.returncode == 0, given.stderr
    assert "launcher: left out 1 file that looks like a secret: .docker/config.json " in (
        given.stderr
    )
    assert json.loads(given.stdout)["submitJob"]["jobName"] == "train"  # from the file's command
    none = cli_support.launcher(*run, "--no-workspace", env=env)
    assert none.returncode == 0, none.stderr
    assert "secret" not in none.stderr
