"""`launcher build` against the real registry and the real Docker engine, started by the tests."""

from __future__ import annotations

import base64
import json
import os
import subprocess

import pytest
import requests

from launcher.errors import RemoteError
from launcher.image import manifest, reference
from tests.support import cli


def build(*args: str, env: dict | None = None, docker=None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("LAUNCHER_REGISTRY", None)
    if docker is not None:
        full_env["DOCKER_HOST"] = docker.host
    return cli.launcher("build", *args, env=full_env, timeout=600)


def patch_into(base: str, ws, repo: str, *extra: str, **kwargs) -> subprocess.CompletedProcess:
    return build("--image", base, "--workspace", str(ws), "--repo", repo, *extra, **kwargs)


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()  # the reference alone on stdout
    return line


def workspace(root, content: str = "hello from the workspace"):
    root.mkdir(parents=True, exist_ok=True)
    (root / "hello.txt").write_text(content + "\n")
    (root / "run.sh").write_text('#!/bin/sh\necho "ran $(cat /workspace/hello.txt)"\n')
    (root / "run.sh").chmod(0o755)
    (root / "big.bin").write_bytes(os.urandom(256 * 1024))
    return root


def get_manifest(registry, repo: str, ref: str) -> dict:
    response = requests.get(
        f"http://{registry.host}/v2/{repo}/manifests/{ref}",
        headers={"Accept": manifest.ACCEPT},
        timeout=10,
    )
    response.raise_for_status()
    return response.json()


def docker_run(docker, image: str, *command: str) -> str:
    client = docker.client()
    client.images.pull(image)
    out = client.containers.run(image, list(command), network_mode="host", remove=True)
    return out.decode()


def uploads(requests_) -> list:
    return [r for r in requests_ if r.method in ("POST", "PATCH", "PUT")]


def test_patch_appends_the_workspace_without_pulling_the_base(
    registry, busybox_base, docker_engine, tmp_path
):
    ws = workspace(tmp_path / "ws")
    registry.requests()
    ref = ok(patch_into(busybox_base, ws, f"{registry.host}/ws"))
    assert ref.startswith(f"{registry.host}/ws@sha256:")
    log = registry.requests()
    base = get_manifest(registry, "base", "1")
    # The base's layers were mounted across repositories, never downloaded.
    layer_digests = [d["digest"] for d in base["layers"]]
    assert not any(r.method == "GET" and any(d in r.path for d in layer_digests) for r in log)
    assert any(r.method == "POST" and "mount=" in r.path and r.status == 201 for r in log)

    patched = get_manifest(registry, "ws", ref.split("@")[1])
    assert patched["mediaType"] == base["mediaType"]
    assert patched["layers"][:-1] == base["layers"]  # base layers byte-identical (same digests)
    assert len(patched["layers"]) == len(base["layers"]) + 1

    out = docker_run(
        docker_engine,
        ref,
        "sh",
        "-c",
        "cat /workspace/hello.txt; stat -c %a /workspace/run.sh; "
        "sha256sum /workspace/big.bin | cut -c1-64; pwd; /workspace/run.sh",
    )
    import hashlib

    assert out.splitlines() == [
        "hello from the workspace",
        "755",
        hashlib.sha256((ws / "big.bin").read_bytes()).hexdigest(),
        "/workspace",
        "ran hello from the workspace",
    ]


def test_unchanged_workspace_costs_at_most_three_requests_and_no_upload(
    registry, busybox_base, tmp_path
):
    ws = workspace(tmp_path / "ws")
    args = ("--image", busybox_base, "--workspace", str(ws), "--repo", f"{registry.host}/same")
    first = ok(build(*args))
    registry.requests()
    second = build(*args)
    assert ok(second) == first
    assert "unchanged" in second.stderr
    log = registry.requests()
    assert len(log) <= 3, log
    assert uploads(log) == []


def test_one_changed_file_uploads_one_layer(registry, busybox_base, tmp_path):
    ws = workspace(tmp_path / "ws")
    args = ("--image", busybox_base, "--workspace", str(ws), "--repo", f"{registry.host}/edit")
    first = ok(build(*args))
    (ws / "hello.txt").write_text("edited\n")
    registry.requests()
    second = ok(build(*args))
    assert second != first
    log = registry.requests()
    closed = [r for r in log if r.method == "PUT" and "/blobs/uploads/" in r.path]
    assert len(closed) == 2  # the workspace layer and the config: no base layer moved


def test_basic_auth_from_the_docker_config(auth_registry, registry, busybox_base, tmp_path):
    ws = workspace(tmp_path / "ws")
    config = tmp_path / "docker"
    config.mkdir()
    token = base64.b64encode(b"ci:s3cret").decode()
    (config / "config.json").write_text(
        json.dumps({"auths": {auth_registry.host: {"auth": token}}})
    )
    # The base is in another registry: without --stream-base nothing moves through here.
    auth_registry.requests()  # the log from here on (other tests push to this registry too)
    refused = patch_into(
        busybox_base, ws, f"{auth_registry.host}/private", env={"DOCKER_CONFIG": str(config)}
    )
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert "of its layers are not in" in line and "--stream-base" in line
    assert not [r for r in auth_registry.requests() if r.method in ("POST", "PATCH", "PUT")]
    ref = ok(
        patch_into(
            busybox_base,
            ws,
            f"{auth_registry.host}/private",
            "--stream-base",
            env={"DOCKER_CONFIG": str(config)},
        )
    )
    assert ref.startswith(f"{auth_registry.host}/private@sha256:")
    # Layers crossed registries as a streamed copy; the private registry has them all.
    (config / "config.json").write_text(
        json.dumps(
            {"auths": {auth_registry.host: {"auth": base64.b64encode(b"ci:wrong").decode()}}}
        )
    )
    denied = patch_into(
        busybox_base,
        ws,
        f"{auth_registry.host}/private",
        "--stream-base",
        env={"DOCKER_CONFIG": str(config)},
    )
    assert denied.returncode == 1
    (line,) = denied.stderr.strip().splitlines()
    assert f"registry {auth_registry.host}: no access" in line


def test_multi_arch_base_resolves_to_the_cluster_platform(registry, busybox_base, tmp_path):
    base = get_manifest(registry, "base", "1")
    host = f"http://{registry.host}"
    config = requests.get(f"{host}/v2/base/blobs/{base['config']['digest']}", timeout=10).json()
    arm_config = json.dumps({**config, "architecture": "arm64"}).encode()
    upload = requests.post(f"{host}/v2/base/blobs/uploads/", timeout=10).headers["Location"]
    sep = "&" if "?" in upload else "?"
    requests.put(
        f"{upload}{sep}digest={manifest.digest_of(arm_config)}", data=arm_config, timeout=10
    ).raise_for_status()
    arm = json.dumps(
        {
            **base,
            "config": {
                **base["config"],
                "digest": manifest.digest_of(arm_config),
                "size": len(arm_config),
            },
        }
    ).encode()
    amd_raw = requests.get(
        f"{host}/v2/base/manifests/1", headers={"Accept": base["mediaType"]}, timeout=10
    ).content
    for raw in (arm, amd_raw):
        requests.put(
            f"{host}/v2/base/manifests/{manifest.digest_of(raw)}",
            data=raw,
            headers={"Content-Type": base["mediaType"]},
            timeout=10,
        ).raise_for_status()
    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": manifest.DOCKER_LIST,
            "manifests": [
                {
                    "mediaType": base["mediaType"],
                    "digest": manifest.digest_of(arm),
                    "size": len(arm),
                    "platform": {"os": "linux", "architecture": "arm64"},
                },
                {
                    "mediaType": base["mediaType"],
                    "digest": manifest.digest_of(amd_raw),
                    "size": len(amd_raw),
                    "platform": {"os": "linux", "architecture": "amd64"},
                },
            ],
        }
    ).encode()
    requests.put(
        f"{host}/v2/base/manifests/multi",
        data=index,
        headers={"Content-Type": manifest.DOCKER_LIST},
        timeout=10,
    ).raise_for_status()

    ws = workspace(tmp_path / "ws")
    args = (
        "--image",
        f"{registry.host}/base:multi",
        "--workspace",
        str(ws),
        "--repo",
        f"{registry.host}/multi",
    )
    for platform, arch in (("linux/amd64", "amd64"), ("linux/arm64", "arm64")):
        ref = ok(build(*args, "--platform", platform))
        patched = get_manifest(registry, "multi", ref.split("@")[1])
        cfg = requests.get(
            f"{host}/v2/multi/blobs/{patched['config']['digest']}", timeout=10
        ).json()
        assert cfg["architecture"] == arch
    missing = build(*args, "--platform", "linux/s390x")
    assert missing.returncode == 2
    assert "has no linux/s390x image; it has: linux/amd64, linux/arm64" in missing.stderr


def test_bad_input_is_one_line_exit_2(registry, busybox_base, tmp_path):
    ws = workspace(tmp_path / "ws")
    cases = [
        (("--image", f"{registry.host}/nothing:1", "--workspace", str(ws)), "base image not found"),
        (("--image", busybox_base, "--workspace", str(tmp_path / "absent")), "no such directory"),
        (("--image", "Bad Image", "--workspace", str(ws)), "malformed repository"),
    ]
    for args, fragment in cases:
        result = build(*args, "--repo", f"{registry.host}/bad")
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert fragment in line


def test_failure_midway_leaves_no_tag(registry, busybox_base, tmp_path):
    # A base whose layer blob is gone: the copy fails after the workspace layer went up.
    host = f"http://{registry.host}"
    base = get_manifest(registry, "base", "1")
    raw = requests.get(
        f"{host}/v2/base/manifests/1", headers={"Accept": base["mediaType"]}, timeout=10
    ).content
    requests.put(
        f"{host}/v2/broken/manifests/1",
        data=raw,
        headers={"Content-Type": base["mediaType"]},
        timeout=10,
    )
    # Cross-repo pushes are refused by distribution unless the blobs are there: copy them first.
    for desc in [base["config"], *base["layers"]]:
        blob = requests.get(f"{host}/v2/base/blobs/{desc['digest']}", timeout=10).content
        loc = requests.post(f"{host}/v2/broken/blobs/uploads/", timeout=10).headers["Location"]
        sep = "&" if "?" in loc else "?"
        requests.put(f"{loc}{sep}digest={desc['digest']}", data=blob, timeout=10)
    requests.put(
        f"{host}/v2/broken/manifests/1",
        data=raw,
        headers={"Content-Type": base["mediaType"]},
        timeout=10,
    ).raise_for_status()
    gone = base["layers"][0]["digest"]
    requests.delete(f"{host}/v2/broken/blobs/{gone}", timeout=10).raise_for_status()

    ws = workspace(tmp_path / "ws")
    result = patch_into(
        f"{registry.host}/broken:1",
        ws,
        f"{registry.host}/halfway",
        "--stream-base",  # the gone layer cannot be mounted: stream what is there
    )
    assert result.returncode == 1, result.stderr
    tags = requests.get(f"{host}/v2/halfway/tags/list", timeout=10)
    assert tags.status_code == 404 or not tags.json().get("tags")


def test_docker_builder_for_a_workspace_with_a_dockerfile(
    registry, busybox_base, docker_engine, tmp_path
):
    ws = workspace(tmp_path / "ws")
    (ws / "Dockerfile.launcher").write_text(
        'ARG BASE_IMAGE\nFROM $BASE_IMAGE\nCOPY . /app/\nRUN ["/bin/sh", "-c", '
        '"echo built > /app/marker"]\nWORKDIR /app\n'
    )
    args = ("--image", busybox_base, "--workspace", str(ws), "--repo", f"{registry.host}/dock")
    ref = ok(build(*args, docker=docker_engine))
    out = docker_run(docker_engine, ref, "sh", "-c", "cat /app/marker /app/hello.txt")
    assert out.splitlines() == ["built", "hello from the workspace"]
    again = build(*args, docker=docker_engine)
    assert ok(again) == ref and "unchanged" in again.stderr


def test_docker_builder_copies_from_the_screened_workspace(
    registry, busybox_base, docker_engine, tmp_path
):
    """A workspace's own Dockerfile copies from the context the launcher sends, made from the
    walk that leaves out files that look like secrets (issue 33), not from Docker's reading
    of the directory, where `COPY . /app/` would take `.env` and `id_rsa` along."""
    ws = workspace(tmp_path / "ws")
    (ws / ".env").write_text("AWS_SECRET_ACCESS_KEY=abc\n")
    (ws / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (ws / ".dockerignore").write_text("ignored.txt\n")
    (ws / "ignored.txt").write_text("ignored\n")
    (ws / "Dockerfile.launcher").write_text(
        "ARG BASE_IMAGE\nFROM $BASE_IMAGE\nCOPY . /app/\nWORKDIR /app\n"
    )
    args = ("--image", busybox_base, "--workspace", str(ws), "--repo", f"{registry.host}/dock2")
    done = build(*args, docker=docker_engine)
    ref = ok(done)
    assert "left out 2 files that look like secrets: .env, id_rsa" in done.stderr
    out = docker_run(docker_engine, ref, "sh", "-c", "ls -a /app")
    left_out = (".env", "id_rsa", "ignored.txt")
    shipped = [p.name for p in ws.iterdir() if p.name not in left_out]
    assert sorted(out.split()) == sorted([".", "..", *shipped])


def test_docker_builder_without_a_dockerfile(registry, busybox_base, docker_engine, tmp_path):
    ws = workspace(tmp_path / "ws", "generated dockerfile")
    ref = ok(
        patch_into(
            busybox_base,
            ws,
            f"{registry.host}/gen",
            "--builder",
            "docker",
            docker=docker_engine,
        )
    )
    out = docker_run(docker_engine, ref, "/workspace/run.sh")
    assert out.strip() == "ran generated dockerfile"


def test_no_docker_daemon_is_one_line(registry, busybox_base, tmp_path):
    ws = workspace(tmp_path / "ws")
    result = patch_into(
        busybox_base,
        ws,
        f"{registry.host}/nodock",
        "--builder",
        "docker",
        env={"DOCKER_HOST": f"unix://{tmp_path}/none.sock"},
    )
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert "no Docker daemon at unix://" in line and "start one" in line


def copy_base_into(auth_registry, registry, repository: str = "base") -> str:
    """REGISTRY/base:1 copied into the registry that wants a login; its pinned reference."""
    from launcher.image.registry import Registry
    from launcher.image.transfer import copy_image

    source = Registry(registry.host, lambda: None)
    digest = source.head_manifest("base", "1", manifest.ACCEPT)
    return copy_image(
        reference.parse(f"{registry.host}/base@{digest}"),
        reference.parse(f"{auth_registry.host}/{repository}"),
        source,
        Registry(auth_registry.host, lambda: ("ci", "s3cret")),
    ).reference


def test_docker_builder_with_credentials_on_the_registry(
    auth_registry, registry, busybox_base, docker_engine, tmp_path
):
    """The issue's sixth finding: `--builder docker` crashed with a TypeError whenever the
    target registry had credentials, since docker 7's ``APIClient.build`` takes no
    ``auth_config`` (the SDK sends the Docker config's logins with a build as
    X-Registry-Config; ``pull`` and ``push`` take ``auth_config`` for their one registry). The
    base and the target are both in the registry that wants the login: the engine pulls the
    one and pushes the other with it."""
    base = copy_base_into(auth_registry, registry)
    config = tmp_path / "docker"
    config.mkdir()
    login = base64.b64encode(b"ci:s3cret").decode()
    auths = {"auths": {auth_registry.host: {"auth": login}}}
    (config / "config.json").write_text(json.dumps(auths))
    ws = workspace(tmp_path / "ws", "built with a login")
    ref = ok(
        patch_into(
            base,
            ws,
            f"{auth_registry.host}/dockauth",
            "--builder",
            "docker",
            env={"DOCKER_CONFIG": str(config)},
            docker=docker_engine,
        )
    )
    assert ref.startswith(f"{auth_registry.host}/dockauth@sha256:")
    client = docker_engine.client()
    client.images.pull(ref, auth_config={"username": "ci", "password": "s3cret"})
    out = client.containers.run(ref, ["/workspace/run.sh"], network_mode="host", remove=True)
    assert out.decode().strip() == "ran built with a login"


def test_a_base_the_engine_may_not_pull_is_one_line(
    auth_registry, registry, busybox_base, docker_engine
):
    """The engine refuses a pull it has no access for with an HTTP error before any stream
    (the SDK's APIError: "500 Server Error for http+docker://..."), which is one line here."""
    from launcher.image.docker_build import _pull
    from launcher.image.registry import Registry
    from launcher.progress import Transfer

    base = copy_base_into(auth_registry, registry, "never-pulled")  # nothing in the engine
    wrong = Registry(auth_registry.host, lambda: ("ci", "wrong"))
    with pytest.raises(RemoteError) as refused:
        _pull(docker_engine.client(), base, "linux/amd64", wrong, Transfer("pull", None))
    (line,) = str(refused.value).splitlines()
    assert line == f"docker pull of the base {base} failed: unauthorized: authentication required"
