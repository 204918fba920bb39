"""`make demo` end to end (python -m demo, what it runs), then a newcomer's first hour: the
README's commands in a fresh shell that knows only the demo's handover line, every example of
the docs against the same emulated stack, and `make demo-stop` leaving nothing behind.

The demo runs once for the module; the tests run in file order, the stop last."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support import examples, tiers
from tests.support.processes import required_or_skip

TORCHX_BIN = ROOT / ".venv-torchx" / "bin"
# The docs pages with an example to run (examples.blocks says which blocks run).
DOCS_WITH_EXAMPLES = [
    page
    for page in sorted((ROOT / "docs").glob("*.md"))
    if any(b.lang in examples.RUN and b.not_run is None for b in examples.blocks(page))
]


@dataclass(frozen=True)
class Demo:
    workdir: Path
    output: str  # stdout, then stderr
    handover: str  # stdout's last line
    env: dict[str, str]  # what the demo's own processes had


def demo_env(docker_engine) -> dict[str, str]:
    return {
        **os.environ,
        "DOCKER_HOST": docker_engine.host,
        "PATH": f"{ROOT / '.venv' / 'bin'}:{ROOT / 'node_modules' / '.bin'}:{os.environ['PATH']}",
    }


@pytest.fixture(scope="module")
def demo(tmp_path_factory, docker_engine):
    workdir = tmp_path_factory.mktemp("demo") / "demo"
    env = demo_env(docker_engine)
    result = subprocess.run(
        [sys.executable, "-m", "demo", "--workdir", str(workdir)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    try:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        last = result.stdout.rstrip().splitlines()[-1]
        yield Demo(workdir, result.stdout + result.stderr, last, env)
    finally:
        stop(workdir, env)  # a no-op when the last test stopped it


def stop(workdir: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "demo", "stop", "--workdir", str(workdir)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def run_page(
    demo: Demo, tmp_path: Path, page: Path, extra_path: list[Path] = ()
) -> subprocess.CompletedProcess:
    """A page's examples in a fresh shell: nothing of this process's environment, a home of
    its own, and a directory where ``demo/`` is the checkout's and ``.demo/`` the demo's; only
    what the page itself sources (README) or, for docs pages, the demo's env file."""
    # A copy, as a checkout holds it: a job file may name only a workspace under its own
    # directory, and a link to the checkout's would lead out (launcher.job.jobfile).
    shutil.copytree(ROOT / "demo", tmp_path / "demo", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / ".demo").symlink_to(demo.workdir)
    # What a page run from the checkout reaches: cdk.json and the emulator (docs/teams.md).
    for name in ("cdk.json", "devenv"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / "home").mkdir()
    body = examples.script(examples.blocks(page), "python")
    if page.name != "README.md":
        body = "source .demo/env\n" + body
    try:
        return subprocess.run(
            ["bash", "-c", body],
            cwd=tmp_path,
            env={
                "HOME": str(tmp_path / "home"),
                "PATH": ":".join(["/usr/local/bin", "/usr/bin", "/bin", *map(str, extra_path)]),
                "LANG": "C.UTF-8",
            },
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    finally:  # an emulator the page started and did not stop (it failed first)
        emulator = tmp_path / ".emulator"
        if (emulator / "server.json").exists():
            stop_emulator = [sys.executable, "-m", "devenv.emulator", "stop", "--workdir"]
            subprocess.run([*stop_emulator, str(emulator)], cwd=ROOT, check=False, timeout=60)


@pytest.mark.cdk  # `cdk synth` with the CLI
@pytest.mark.emulator  # the demo starts its own moto server
def test_demo_runs_the_main_job_and_a_two_pool_pipeline_and_hands_over(demo):
    out = demo.output
    (demo.workdir.parent / "demo-output.txt").write_text(out)  # to read after a failure
    # Quiet: no CDK notices, and TCP on a machine without EFA is expected, not a warning.
    assert "feature flags are not configured" not in out and "NOTICES" not in out
    assert "EFA WARNING" not in out
    # The rendezvous worker's tries while the main node starts are not shown (rendezvous.sh).
    assert "Connection refused" not in out and "can't connect" not in out
    assert "NCCL uses TCP sockets here, as expected" in out
    # launcher outputs: three lines and the pools table, the rest behind --all.
    assert re.search(r"^stack +EfaBatch \(us-east-1\)$", out, re.M)
    assert re.search(r"^cpu +EfaBatch-cpu +c7i\.4xlarge", out, re.M)
    assert "every value (ARNs, ids): launcher outputs --all" in out
    outputs = out[out.index("$ launcher outputs") : out.index("==> 5.")]
    assert "arn:aws:" not in outputs and len(outputs.splitlines()) < 12
    assert " rendezvous RUNNABLE" in out  # submitted through the emulated Batch API
    assert "[node 0] rank 0 of 2: main at 127.0.0.1:29500" in out
    assert "[node 1] rank 1 of 2: main at 127.0.0.1:29500" in out
    assert "[node 0] rank 0 received: hello from rank 1" in out
    assert "rendezvous SUCCEEDED" in out
    assert "children: 2 SUCCEEDED (of 2)" in out
    assert "[node 0] rank 0 reads 2 shards from /mnt/efs/shards" in out
    # launcher list --local --all --all-pools: the table, piped, so plain and aligned.
    assert re.search(r"^ID +NAME +POOL +STATE +NODES +AGE +DURATION$", out, re.M)
    assert re.search(r"^local-\S+ +prepare +cpu +SUCCEEDED +\d+ +\d+[smhd] +\d+[smhd]$", out, re.M)
    # The handover: one line, last, naming a private env file that holds every port.
    assert (
        demo.handover
        == f"Your turn, in a new shell: source {demo.workdir / 'env'}   then: launcher list"
    )
    env_file = demo.workdir / "env"
    assert env_file.stat().st_mode & 0o777 == 0o600
    text = env_file.read_text()
    for name in ("AWS_ENDPOINT_URL", "DOCKER_HOST", "LAUNCHER_REGISTRY", "LAUNCHER_IMAGE"):
        assert re.search(rf"^export {name}=\S+$", text, re.M), name


@pytest.mark.cdk
@pytest.mark.emulator
def test_a_newcomer_follows_the_readme_in_a_fresh_shell(demo, tmp_path):
    """The README's commands, in order, as written, in a shell that has only the handover:
    a 2-node job locally (followed), one on the emulated stack (status, list, cancel), and a
    local job's logs."""
    result = run_page(demo, tmp_path, ROOT / "README.md")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert "[node 0] rank 0 received: hello from rank 1" in out
    assert re.search(r"^\S+ +rendezvous +RUNNABLE", out, re.M)  # launcher status $JOB
    assert re.search(r"^\[node 0\] hello from \S+$", out, re.M)  # launcher logs $LOCAL


@pytest.mark.cdk
@pytest.mark.emulator
@pytest.mark.parametrize(
    "page",
    [
        # torchx.md's reader installed TorchX (pip install ".[torchx]"): make test's venv of
        # TorchX 0.7.0 with the launcher in it stands in, after what .demo/env puts first.
        pytest.param(p, marks=pytest.mark.torchx) if p.name == "torchx.md" else p
        for p in DOCS_WITH_EXAMPLES
    ],
    ids=lambda p: p.name,
)
def test_every_docs_example_runs_against_the_emulated_stack(demo, tmp_path, page):
    extra = []
    if page.name == "torchx.md":
        tiers.require("torchx")
        extra = [TORCHX_BIN]
        if not (TORCHX_BIN / "torchx").exists():
            required_or_skip("TorchX is not installed (make deps)")
    result = run_page(demo, tmp_path, page, extra_path=extra)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    if page.name == "teams.md":  # its refusals and its dry run's JSON, word for word
        run = [b for b in examples.blocks(page) if b.lang == "console" and b.not_run is None]
        lines = [x for b in run for x in b.text.splitlines()]
        shown = [x for x in lines if x.startswith("launcher: error:")]
        assert len(shown) >= 3 and all(line in result.stderr for line in shown), result.stderr
        data = [x for x in lines if x.startswith("{")]
        assert data and all(line in result.stdout for line in data), result.stdout


@pytest.mark.cdk
@pytest.mark.emulator
def test_demo_stop_leaves_nothing_behind(demo, docker_engine):
    result = stop(demo.workdir, demo.env)
    assert "stopped moto" in result.stdout and "stopped registry" in result.stdout
    client = docker_engine.client()
    assert client.containers.list(all=True, filters={"label": "efa-batch.job"}) == []
