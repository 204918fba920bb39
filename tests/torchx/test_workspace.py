"""efa_batch's workspaces through the real ``torchx`` CLI and ``Runner``, in both TorchX venvs.

A workspace with a Dockerfile (``Dockerfile.launcher``, or TorchX's ``Dockerfile.torchx``) is
built by Docker, whose digest is known only after the push: an edited one must still run on
the first try, locally and on AWS (moto), an unedited one must reuse its image, and two
roles' own workspaces (TorchX main) must each get their own image. The
``image_repo`` option is a registry host, passed to each build on its own (never left behind
for the next run of the process); aws_batch's full repository path is refused in one line.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.torchx import test_scheduler as base
from tests.torchx.test_scheduler import _env, on_one_line, python, run

# test_scheduler's fixtures: both TorchX lines, the moto stack.
venv, stack = base.venv, base.stack

pytestmark = pytest.mark.torchx

UPLOADS = ("POST", "PUT", "PATCH")
LAUNCHER_DOCKERFILE = (
    'ARG BASE_IMAGE\nFROM $BASE_IMAGE\nCOPY . /app/\nRUN ["/bin/sh", "-c", '
    '"cat /app/hello.txt > /app/marker"]\n'
)
# TorchX's own form (torchx/workspace/docker_workspace.py, 0.7.0): IMAGE and WORKSPACE.
TORCHX_DOCKERFILE = (
    'ARG IMAGE\nFROM $IMAGE\nARG WORKSPACE\nCOPY . /app/\nRUN ["/bin/sh", "-c", '
    '"echo made by Dockerfile.torchx from $WORKSPACE > /app/made"]\n'
)


@pytest.fixture
def local_env(moto_server, registry, docker_engine, tmp_path):
    return {
        **_env(moto_server, registry),
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_LOCAL_STATE": str(tmp_path / "state"),
        "LAUNCHER_LOCAL_EFS": str(tmp_path / "efs"),
    }


def _workspace(root, dockerfile: str, text: str, name: str = "Dockerfile.launcher"):
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(dockerfile)
    (root / "hello.txt").write_text(text + "\n")
    return root


def _local_run(venv, env, ws, image, *command: str):
    from devenv.processes import free_port

    cfg = f"local=True,efa=off,port={free_port()}"
    return run(
        venv,
        "torchx",
        "run",
        "-s",
        "efa_batch",
        "-cfg",
        cfg,
        "--wait",
        "--log",
        "utils.sh",
        "--image",
        image,
        *command,
        env=env,
        cwd=ws,
        timeout=300,
    )


def _ok(result) -> str:
    assert result.returncode == 0, result.stderr[-3000:]
    assert "changed since the dry run" not in result.stderr
    assert "SUCCEEDED" in result.stdout + result.stderr, result.stderr[-3000:]
    return result.stdout + result.stderr


def test_an_edited_dockerfile_workspace_runs_locally_on_the_first_try(
    venv, stack, local_env, registry, busybox_base, tmp_path
):
    ws = _workspace(tmp_path / f"ws-{venv.name}", LAUNCHER_DOCKERFILE, "first")
    assert "first" in _ok(_local_run(venv, local_env, ws, busybox_base, "cat", "/app/marker"))

    (ws / "hello.txt").write_text("edited\n")
    out = _ok(_local_run(venv, local_env, ws, busybox_base, "cat", "/app/marker"))
    assert "edited" in out  # the job saw the image built from the edit, on the first try

    registry.requests()
    out = _ok(_local_run(venv, local_env, ws, busybox_base, "cat", "/app/marker"))
    assert "edited" in out
    assert not [r for r in registry.requests() if r.method in UPLOADS]  # unedited: reused


def _submit(venv, env, ws, image):
    return run(
        venv,
        "torchx",
        "run",
        "-s",
        "efa_batch",
        "utils.sh",
        "--image",
        image,
        "cat",
        "/app/marker",
        env=env,
        cwd=ws,
        timeout=300,
    )


def _image_of(moto_server, job_id: str) -> str:
    batch = moto_server.client("batch")
    job = batch.describe_jobs(jobs=[job_id])["jobs"][0]
    definition = batch.describe_job_definitions(jobDefinitions=[job["jobDefinition"]])
    return definition["jobDefinitions"][0]["containerProperties"]["image"]


@on_one_line
def test_an_edited_dockerfile_workspace_is_submitted_on_the_first_try(
    venv, stack, moto_server, registry, docker_engine, busybox_base, tmp_path
):
    env = {**_env(moto_server, registry), "DOCKER_HOST": docker_engine.host}
    ws = _workspace(tmp_path / f"aws-{venv.name}", LAUNCHER_DOCKERFILE, "first")
    first = _submit(venv, env, ws, busybox_base)
    assert first.returncode == 0, first.stderr[-3000:]
    (ws / "hello.txt").write_text("edited\n")
    edited = _submit(venv, env, ws, busybox_base)
    assert edited.returncode == 0, edited.stderr[-3000:]
    handle = re.search(r"efa_batch://\S+/([0-9a-f-]{36})", edited.stdout + edited.stderr)
    image = _image_of(moto_server, handle.group(1))
    repo = stack["RepositoryUri"].split("/", 1)[1]
    pinned = rf"{re.escape(registry.host)}/{re.escape(repo)}@sha256:[0-9a-f]{{64}}"
    assert re.fullmatch(pinned, image), image
    out = docker_engine.client().containers.run(
        image, ["cat", "/app/marker"], network_mode="host", remove=True
    )
    assert out.decode().strip() == "edited"  # the definition names the image of the edit

    registry.requests()
    again = _submit(venv, env, ws, busybox_base)
    assert again.returncode == 0, again.stderr[-3000:]
    assert not [r for r in registry.requests() if r.method in UPLOADS]
    handle = re.search(r"efa_batch://\S+/([0-9a-f-]{36})", again.stdout + again.stderr)
    assert _image_of(moto_server, handle.group(1)) == image


@on_one_line
def test_a_dockerfile_torchx_workspace_is_built_with_it(
    venv, stack, local_env, busybox_base, tmp_path
):
    ws = _workspace(tmp_path / f"tx-{venv.name}", TORCHX_DOCKERFILE, "hi", "Dockerfile.torchx")
    out = _ok(_local_run(venv, local_env, ws, busybox_base, "cat", "/app/made"))
    assert f"made by Dockerfile.torchx from {ws}" in out


@on_one_line
def test_dockerfile_launcher_wins_over_dockerfile_torchx(
    venv, stack, local_env, busybox_base, tmp_path
):
    ws = _workspace(tmp_path / f"both-{venv.name}", TORCHX_DOCKERFILE, "hi", "Dockerfile.torchx")
    (ws / "Dockerfile.launcher").write_text(LAUNCHER_DOCKERFILE)
    out = _ok(_local_run(venv, local_env, ws, busybox_base, "ls", "/app"))
    listed = {line.split()[-1] for line in out.splitlines() if line.startswith("sh/0 ")}
    assert "marker" in listed and "made" not in listed, out


TWO_DRYRUNS = """
import json
from torchx.runner import get_runner
from torchx.specs import AppDef, Role
with get_runner() as runner:
    images = []
    for cfg in ({"image_repo": "%(other)s", "stream_base": True}, {"stream_base": True}):
        # a new AppDef each time: 0.7.0's dryrun writes the built image into the one it gets
        app = AppDef("two", roles=[Role("r", image="%(image)s", entrypoint="echo", args=["x"])])
        info = runner.dryrun(app, "efa_batch", cfg=cfg, workspace="%(ws)s")
        images.append(info.request.requests.register["containerProperties"]["image"])
    print(json.dumps(images))
"""


@pytest.fixture(scope="module")
def other_registry(tmp_path_factory):
    from tests.conftest import _registry

    server = _registry(tmp_path_factory)
    yield server
    server.stop()


@on_one_line
def test_image_repo_does_not_leak_into_the_next_run_of_the_process(
    venv, stack, moto_server, registry, other_registry, busybox_base, tmp_path
):
    """Two dry runs of one Runner: the first with image_repo, the second without it goes
    to $LAUNCHER_REGISTRY (here the test's registry, as the stack's ECR would be)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "train.py").write_text("print('hi')\n")
    code = TWO_DRYRUNS % {"image": busybox_base, "ws": ws, "other": other_registry.host}
    images = json.loads(python(venv, code, _env(moto_server, registry)).strip().splitlines()[-1])
    repo = stack["RepositoryUri"].split("/", 1)[1]
    assert images[0].startswith(f"{other_registry.host}/{repo}@sha256:"), images
    assert images[1].startswith(f"{registry.host}/{repo}@sha256:"), images


@on_one_line
def test_aws_batchs_repository_path_form_is_refused_in_one_line(
    venv, stack, moto_server, registry, busybox_base, workdir_ws
):
    registry.requests()
    result = run(
        venv,
        "torchx",
        "run",
        "-s",
        "efa_batch",
        "-cfg",
        f"image_repo={registry.host}/your/container",
        "utils.sh",
        "--image",
        busybox_base,
        "true",
        env=_env(moto_server, registry),
        cwd=workdir_ws,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "image_repo" in x]
    assert f"image_repo {registry.host}/your/container" in line
    repo = stack["RepositoryUri"].split("/", 1)[1]
    assert "takes a registry HOST[:PORT], not aws_batch's repository path" in line
    assert f"go to the stack's repository {registry.host}/{repo}," in line  # where they do go
    assert not [r for r in registry.requests() if r.method in UPLOADS]


@pytest.fixture
def workdir_ws(tmp_path):
    (tmp_path / "train.py").write_text("print('training')\n")
    return tmp_path


TWO_WORKSPACES = """
import json
from torchx.runner import get_runner
from torchx.specs import AppDef, Role, Workspace
def role(name, ws):
    return Role(name, image="%(image)s", entrypoint="cat", args=["/app/marker"],
                workspace=Workspace.from_str(ws))
app = AppDef("two", roles=[role("a", "%(a)s"), role("b", "%(b)s")])
cfg = {"local": True, "efa": "off", "port": %(port)d}
with get_runner() as runner:
    handle = runner.run(app, "efa_batch", cfg=cfg)
    final = runner.wait(handle, wait_interval=0.5)
    lines = {r: list(runner.log_lines(handle, r, 0)) for r in ("a", "b")}
    print(json.dumps({"state": final.state.name, "lines": lines}))
"""


def test_each_roles_own_dockerfile_workspace_is_in_its_image(
    stack, local_env, busybox_base, tmp_path
):
    """TorchX main gives each role a workspace of its own (Role.workspace): two Docker builds
    in one dry run, each image in its own role's node range."""
    from devenv.processes import free_port
    from tests.support import tiers
    from tests.support.processes import required_or_skip

    tiers.require("torchx")
    nightly = base.VENVS["torchx-nightly"]  # 0.7.0 has no Role.workspace
    if not (nightly / "bin" / "torchx").exists():
        required_or_skip("torchx-nightly is not installed (make deps)")
    a = _workspace(tmp_path / "a", LAUNCHER_DOCKERFILE, "from a")
    b = _workspace(tmp_path / "b", LAUNCHER_DOCKERFILE, "from b")
    code = TWO_WORKSPACES % {"image": busybox_base, "a": a, "b": b, "port": free_port()}
    out = json.loads(python(nightly, code, local_env).strip().splitlines()[-1])
    assert out["state"] == "SUCCEEDED", out
    assert [x.strip() for x in out["lines"]["a"]] == ["from a"], out
    assert [x.strip() for x in out["lines"]["b"]] == ["from b"], out
