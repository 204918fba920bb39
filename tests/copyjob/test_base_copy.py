"""Bases from other registries are copied next to the registries, never through the launcher.

Two real registries (Debian's docker-registry on 127.0.0.1): a "remote" one holding the base,
as AWS's Deep Learning Containers registry or GHCR would, and the "cluster" one the workspace
images go to. The local backend on the real Docker engine stands in for AWS: it runs the copy
job as a container, the launcher's own copy program in it (this machine's Python, mounted
read-only into a busybox container: there is no Python image offline).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import requests

from devenv.clusters import cluster_info
from devenv.host_python import host_python_mounts
from devenv.images import push_random_base
from devenv.local_run import launcher_run
from launcher import local
from launcher.copyjob import plan as copy_plan
from launcher.copyjob import program
from launcher.errors import UsageError
from launcher.image import manifest, transfer
from launcher.image.reference import Reference, parse
from launcher.image.registry import Registry
from tests.support import cli
from tests.support.service_model import assert_valid

LAYERS_MIB = [48, 48, 48]  # plus busybox: big enough to interrupt a copy between two layers


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    from tests.conftest import _registry

    server = _registry(tmp_path_factory)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def remote_base(remote, tmp_path_factory) -> str:
    push_random_base(remote.host, "dlc/pytorch", "1", LAYERS_MIB, tmp_path_factory.mktemp("b"))
    return f"{remote.host}/dlc/pytorch:1"


def pinned(base: str) -> Reference:
    ref = parse(base)
    digest = Registry(ref.registry, lambda: None).head_manifest(
        ref.repository, ref.ref, manifest.ACCEPT
    )
    return ref.with_digest(digest)


def blobs_of(base: Reference) -> list[dict]:
    raw, _, _ = Registry(base.registry, lambda: None).get_manifest(
        base.repository, base.digest, manifest.ACCEPT
    )
    document = json.loads(raw)
    return [document["config"], *document["layers"]]


def uploads(server) -> list[str]:
    """Digests of blob uploads the registry completed since the last look (PUT ?digest=)."""
    return [
        r.path.split("digest=", 1)[1].replace("%3A", ":")
        for r in server.requests()
        if r.method == "PUT" and "/blobs/uploads/" in r.path and r.status == 201
    ]


def has_blob(server, repo: str, digest: str) -> bool:
    url = f"http://{server.host}/v2/{repo}/blobs/{digest}"
    return requests.head(url, timeout=10).status_code == 200


# --- the copy program -------------------------------------------------------------------------


def test_an_interrupted_copy_resumes_without_sending_finished_layers(
    remote, remote_base, registry, tmp_path
):
    source = pinned(remote_base)
    repo = f"{registry.host}/resume-{os.getpid()}"
    blobs = blobs_of(source)
    command = [sys.executable, "-m", "launcher.copyjob.program", str(source), repo]
    registry.requests()
    first = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    target = repo.split("/", 1)[1]
    deadline = time.monotonic() + 60
    # Three blobs move at once (config, busybox, a big layer first): once busybox is in, the
    # big layers are still on their way.
    while not has_blob(registry, target, blobs[1]["digest"]):
        assert first.poll() is None and time.monotonic() < deadline, "copy ended too early"
        time.sleep(0.01)
    first.send_signal(signal.SIGKILL)  # the job's host is gone mid-copy
    first.wait()
    registry.settle()  # the registry may still finish an upload the killed copy had sent
    finished = [b["digest"] for b in blobs if has_blob(registry, target, b["digest"])]
    # busybox is in, a big layer is not; the config may be either (a loaded machine's copy
    # can be killed while the config's upload is still on its way: CI, 2026-11-29).
    assert blobs[1]["digest"] in finished and len(finished) < len(blobs)
    registry.requests()

    second = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    assert second.returncode == 0, second.stderr
    resent = uploads(registry)
    assert resent and not set(resent) & set(finished)  # only what was missing went up
    assert sorted(resent) == sorted(set(b["digest"] for b in blobs) - set(finished))
    assert f"copy: done {repo}@{source.digest}" in second.stdout
    tag = transfer.copied_tag(source.digest)
    assert pinned(f"{repo}:{tag}").digest == source.digest  # byte-identical manifest

    third = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    assert "(already there)" in third.stdout and not uploads(registry)


class ImmutableTags(Registry):
    """The cluster registry as ECR with immutable tags sees a race: another copy of the same
    base puts the tag first, then ours is refused (ImageTagAlreadyExistsException)."""

    def __init__(self, host: str, other_digest: str | None = None) -> None:
        super().__init__(host, lambda: None)
        self.other_digest = other_digest

    def put_manifest(self, repo: str, ref: str, raw: bytes, media_type: str) -> str:
        if self.other_digest is None:
            super().put_manifest(repo, ref, raw, media_type)  # the other copy, just before
        from launcher.errors import RemoteError

        raise RemoteError(f"registry {self.host}: PUT manifest {ref}: tag already exists")

    def head_manifest(self, repo: str, ref: str, accept: str) -> str | None:
        if self.other_digest is not None:
            return self.other_digest
        return super().head_manifest(repo, ref, accept)


def test_two_copies_of_one_base_racing_for_its_tag_both_succeed(remote_base, registry):
    source = pinned(remote_base)
    target = parse(f"{registry.host}/race-{os.getpid()}")
    remote_client = Registry(source.registry, lambda: None)
    copied = transfer.copy_image(source, target, remote_client, ImmutableTags(registry.host))
    assert copied.reference == f"{target.name}@{source.digest}" and not copied.already
    # A tag naming other bytes is no race won by an equal copy: the refusal stands.
    other = ImmutableTags(registry.host, other_digest="sha256:" + "0" * 64)
    from launcher.errors import RemoteError

    with pytest.raises(RemoteError, match="tag already exists"):
        transfer.copy_image(
            source, parse(f"{registry.host}/race2-{os.getpid()}"), remote_client, other
        )


def test_a_copy_of_an_index_or_an_unpinned_base_is_refused(remote_base, registry):
    code = program.main([remote_base, f"{registry.host}/x"])
    assert code == 2


# --- copy jobs: requests ----------------------------------------------------------------------


def test_the_copy_job_is_a_valid_fargate_job_reading_secrets_by_arn_only():
    """Fargate: platformCapabilities FARGATE, VCPU 1 with 2-8 GiB, an execution role, no
    public IP (ECR, S3 and Logs through the VPC's endpoints), Secrets Manager JSON keys
    (``ARN:json-key::``) resolved by ECS at start; the source and target are parameters."""
    secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ngc-AbCdEf"
    cluster = cluster_info(internet_egress="nat", registry_secrets={"nvcr.io": secret})
    source = Reference("nvcr.io", "nvidia/pytorch", None, "sha256:" + "a" * 64)
    target = Reference("123456789012.dkr.ecr.us-east-1.amazonaws.com", "workspace")
    requests_ = copy_plan.requests(
        source, target, cluster, copy_plan.CopierImage(cluster.copy_image)
    )
    assert_valid("batch", "RegisterJobDefinition", requests_.register)
    assert_valid("batch", "SubmitJob", requests_.submit)
    container = requests_.register["containerProperties"]
    assert requests_.register["platformCapabilities"] == ["FARGATE"]
    assert container["networkConfiguration"] == {"assignPublicIp": "DISABLED"}
    assert container["command"][-2:] == ["Ref::source", "Ref::target"]
    assert requests_.submit["parameters"] == {"source": str(source), "target": target.name}
    assert requests_.submit["jobQueue"] == cluster.copy_queue_arn
    assert {s["valueFrom"] for s in container["secrets"]} == {
        f"{secret}:username::",
        f"{secret}:accessToken::",
    }
    assert secret not in json.dumps(container["environment"])
    other = copy_plan.requests(
        dataclasses.replace(source, digest="sha256:" + "b" * 64),
        target,
        cluster,
        copy_plan.CopierImage(cluster.copy_image),
    )
    assert other.register == requests_.register  # one definition for every copy


def test_the_copy_job_reads_a_base_where_the_vpc_can_reach_it():
    """ECR user guide, vpc-endpoints.html: "When an image is pulled using a pull through cache
    rule for the first time, if you've configured Amazon ECR to use an interface VPC endpoint
    ..., then you need to create a public subnet in the same VPC, with a NAT gateway ...
    Subsequent image pulls don't require this." So without NAT a rule serves only what it
    already holds, and a same-region ECR base is read directly, never through a rule."""
    public = "public.ecr.aws"
    digest = "sha256:" + "c" * 64
    base = Reference(public, "org/pytorch", None, digest)
    cached_name = "123456789012.dkr.ecr.us-east-1.amazonaws.com/ecr-public/org/pytorch"
    no_nat = cluster_info(internet_egress="none", pull_through_cache={"ecr-public": public})
    assert copy_plan.route(base, no_nat, cached=True).name == cached_name
    with pytest.raises(UsageError) as info:
        copy_plan.route(base, no_nat, cached=False)
    assert "needs a NAT gateway" in str(info.value) and "--stream-base" in str(info.value)
    with_nat = cluster_info(internet_egress="nat", pull_through_cache={"ecr-public": public})
    assert copy_plan.route(base, with_nat).name == cached_name  # ECR keeps it for everyone

    same_region = Reference("210987654321.dkr.ecr.us-east-1.amazonaws.com", "base", None, digest)
    with_rule = cluster_info(pull_through_cache={"dlc": same_region.registry})
    assert copy_plan.route(same_region, with_rule) == same_region  # by the ECR endpoints

    ghcr = Reference("ghcr.io", "org/base", None, digest)
    with pytest.raises(UsageError) as info:
        copy_plan.route(ghcr, cluster_info(internet_egress="none"))
    assert "no route to ghcr.io" in str(info.value) and "--stream-base" in str(info.value)
    assert copy_plan.route(ghcr, cluster_info(internet_egress="nat")) == ghcr
    assert copy_plan.route(ghcr, cluster_info(internet_egress="imported")) == ghcr


# --- a run on a base in another registry, the local backend standing in for AWS ---------------


@pytest.fixture
def env(docker_engine, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", docker_engine.host)
    monkeypatch.setenv("LAUNCHER_LOCAL_STATE", str(tmp_path / "state"))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hello.txt").write_text("hello from the workspace\n")
    (ws / "data.bin").write_bytes(os.urandom(512 * 1024))
    return tmp_path


def copy_jobs() -> list:
    jobs = local.LocalBackend().list(include_finished=True)
    return [j for j in jobs if j.name.startswith("copy-")]


def test_a_base_in_another_registry_is_copied_by_a_job_not_through_the_launcher(
    env, remote_base, registry, busybox_base
):
    info = dataclasses.replace(cluster_info(), repository_uri=f"{registry.host}/ws-{os.getpid()}")
    base_bytes = sum(int(b["size"]) for b in blobs_of(pinned(remote_base)))
    workspace_bytes = sum(p.stat().st_size for p in (env / "ws").iterdir())

    lines, moved, _ = launcher_run(env, remote_base, env / "ws", info, busybox_base)
    assert "JOB SUCCEEDED" in lines
    plan = next(x for x in lines if "of base layers" in x)
    assert "copying 0.15 GB of base layers in a local copy job (Docker engine)" in plan
    assert any(x.startswith("PROGRESS uploaded") and "of workspace" in x for x in lines)
    (job,) = copy_jobs()
    assert job.state.value == "SUCCEEDED"
    # The launcher's processes moved the workspace and metadata over TCP, not the base.
    assert moved < workspace_bytes + 2**20 < base_bytes / 10
    tag = transfer.copied_tag(pinned(remote_base).digest)
    assert pinned(f"{info.repository_uri}:{tag}").digest == pinned(remote_base).digest

    (env / "ws" / "hello.txt").write_text("hello again\n")  # a new workspace, the same base
    lines, moved, _ = launcher_run(env, remote_base, env / "ws", info, busybox_base)
    assert "JOB SUCCEEDED" in lines
    assert "PROGRESS base: all 4 layers already in the repository" in lines
    assert len(copy_jobs()) == 1  # the second run copied nothing
    assert moved < workspace_bytes + 2**20


def test_mirror_copies_a_base_once_and_a_dry_run_moves_nothing(
    env, remote_base, registry, busybox_base
):
    """`launcher mirror` (Cluster.mirror) for platform teams that pre-seed bases: the copy job
    alone; the base's own digest comes back; a second mirror finds it and starts no job."""
    from launcher.api import Cluster
    from launcher.copyjob.plan import CopierImage

    info = dataclasses.replace(cluster_info(), repository_uri=f"{registry.host}/m-{os.getpid()}")
    program = (sys.executable, "-m", "launcher.copyjob.program")  # this machine's, mounted
    cluster = Cluster(info, copier=CopierImage(busybox_base, program, host_python_mounts()))
    digest = pinned(remote_base).digest
    registry.requests()
    said: list = []
    dry = cluster.local().mirror(remote_base, dryrun=True, progress=said.append)
    assert dry == f"{info.repository_uri}@{digest}"
    assert any(e.text.startswith("copying 0.15 GB of base layers in a local") for e in said)
    assert not copy_jobs()
    assert not [r for r in registry.requests() if r.method in ("POST", "PATCH", "PUT")]

    assert cluster.local().mirror(remote_base) == f"{info.repository_uri}@{digest}"
    (job,) = copy_jobs()
    assert job.state.value == "SUCCEEDED"
    assert pinned(f"{info.repository_uri}:{transfer.copied_tag(digest)}").digest == digest
    said.clear()
    cluster.local().mirror(remote_base, progress=said.append)
    assert [e.text for e in said] == [f"base: already copied to {info.repository_uri}"]
    assert len(copy_jobs()) == 1


def test_two_runs_on_a_new_base_share_one_copy_job(env, remote_base, registry, busybox_base):
    """A second run (another user, another terminal) while a copy of the same base into the
    same repository is under way waits for that copy instead of starting another."""
    from launcher.api import Cluster
    from launcher.copyjob.plan import CopierImage

    info = dataclasses.replace(cluster_info(), repository_uri=f"{registry.host}/s-{os.getpid()}")
    program = (sys.executable, "-m", "launcher.copyjob.program")
    cluster = Cluster(info, copier=CopierImage(busybox_base, program, host_python_mounts()))
    base, target = pinned(remote_base), parse(info.repository_uri)
    said: list = []
    first_copy, second_copy = (
        cluster.local().copy_jobs(),
        cluster.local().copy_jobs(progress=said.append),
    )
    first = first_copy.start(base, target)
    second = second_copy.start(base, target)
    assert second == first and len(copy_jobs()) == 1
    assert [e.text for e in said] == [
        f"copy job {first} is copying this base already; waiting for it"
    ]
    second_copy.wait(second, poll=0.2)
    assert pinned(f"{info.repository_uri}:{transfer.copied_tag(base.digest)}").digest == base.digest
    other = parse(f"{registry.host}/other-{os.getpid()}")  # another repository: its own copy
    assert (
        first_copy.requests(base, other).submit["jobName"]
        != (first_copy.requests(base, target).submit["jobName"])
    )


def test_a_refused_mount_becomes_a_copy_and_its_upload_session_is_closed(
    env, registry, busybox_base, tmp_path
):
    """A mount the registry refuses is answered 202 with a fresh upload session (OCI
    distribution spec); ECR refuses so when blob mounting is off, the encryption differs, or no
    manifest of the source repository references the blob (ECR user guide,
    blob-mounting.html; aws/containers-roadmap issue 2860). Here the source repository of the
    cluster's own registry stops linking one layer, so the reference registry refuses that
    mount: the layer is planned as a copy (never streamed), and the abandoned session is
    closed (DELETE) rather than left open."""
    from launcher.api import Cluster
    from launcher.image.patch import BaseHandling, plan_base

    source_repo = f"shared-{os.getpid()}"
    push_random_base(registry.host, source_repo, "1", [1, 1], tmp_path)
    base = pinned(f"{registry.host}/{source_repo}:1")
    layers = blobs_of(base)[1:]
    storage = registry.root / "data" / "docker" / "registry" / "v2" / "repositories"
    hexdigest = layers[-1]["digest"].removeprefix("sha256:")
    (storage / source_repo / "_layers" / "sha256" / hexdigest / "link").unlink()
    info = dataclasses.replace(cluster_info(), repository_uri=f"{registry.host}/ws-{os.getpid()}")
    client = Registry(registry.host, lambda: None)
    registry.requests()
    plan = plan_base(
        client,
        client,
        base,
        parse(info.repository_uri),
        layers,
        copy_jobs=Cluster(info).local().copy_jobs(),
        stream_base=False,
        dryrun=False,
    )
    assert (plan.how, plan.layers, plan.missing) == (BaseHandling.COPY_JOB, len(layers), 1)
    assert plan.bytes == int(layers[-1]["size"])
    seen = registry.requests()
    mounts = [r for r in seen if r.method == "POST" and "mount=" in r.path]
    assert [r.status for r in mounts].count(202) == 1 and len(mounts) == len(layers)
    closed = [r for r in seen if r.method == "DELETE" and "/blobs/uploads/" in r.path]
    assert len(closed) == 1 and closed[0].status in (202, 204)
    assert not [r for r in seen if r.method in ("PATCH", "PUT")]  # nothing sent from here


def test_streaming_the_base_through_this_machine_is_what_the_copy_job_saves(
    env, remote_base, registry, busybox_base
):
    """The baseline: --stream-base moves every base byte through the launcher, twice (in
    from the remote registry, out to the cluster's)."""
    info = dataclasses.replace(cluster_info(), repository_uri=f"{registry.host}/st-{os.getpid()}")
    base_bytes = sum(int(b["size"]) for b in blobs_of(pinned(remote_base)))
    lines, moved, _ = launcher_run(env, remote_base, env / "ws", info, busybox_base, stream=True)
    assert "JOB SUCCEEDED" in lines and not copy_jobs()
    assert any("streaming 0.15 GB of base layers through this machine" in x for x in lines)
    assert moved > 2 * base_bytes


def test_a_base_for_another_platform_or_an_unreachable_registry_moves_nothing(
    env, remote_base, registry, busybox_base
):
    info = dataclasses.replace(
        cluster_info("hpc7g.16xlarge", efa=False), repository_uri=f"{registry.host}/arm"
    )
    from launcher.api import Cluster
    from launcher.copyjob.plan import CopierImage

    cluster = Cluster(info, copier=CopierImage(busybox_base, mounts=host_python_mounts()))
    registry.requests()
    with pytest.raises(UsageError) as wrong:
        cluster.local().build(remote_base, env / "ws")
    assert "linux/arm64" in str(wrong.value)
    from devenv.processes import free_port
    from launcher.errors import RemoteError

    with pytest.raises(RemoteError) as unreachable:
        cluster.local().build(f"127.0.0.1:{free_port()}/gone:1", env / "ws")
    assert "unreachable" in str(unreachable.value)
    assert not copy_jobs()
    assert not [r for r in registry.requests() if r.method in ("POST", "PATCH", "PUT")]


# --- the AWS path: the stack in moto, the cluster's registry a real local one -----------------


@pytest.fixture(scope="module")
def stack(moto_server, synth_default):
    moto_server.reset()
    return moto_server.deploy(synth_default.outdir, synth_default.stack_names)["EfaBatch"]


@pytest.fixture
def aws(moto_server, monkeypatch):
    """A launcher ``Aws`` talking to the moto server over HTTP."""
    from launcher.aws.client import Aws

    for key, value in moto_server.env.items():
        monkeypatch.setenv(key, value)
    return Aws()


def launcher(moto_server, registry, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **moto_server.env, "LAUNCHER_REGISTRY": registry.host}
    return cli.launcher(*args, env=env)


def test_a_base_the_vpc_cannot_reach_is_refused_before_anything_moves(
    moto_server, stack, remote_base, registry, env
):
    """The default stack has no NAT (InternetEgress none): a copy job could not read a
    registry outside AWS, so `launcher run` and `launcher mirror` say so in one line, exit 2,
    and neither upload nor submit."""
    assert stack["InternetEgress"] == "none"
    registry.requests()
    run = launcher(
        moto_server, registry, "run", "--image", remote_base, "--workspace", str(env / "ws"),
        "--nodes", "2", "--", "true",
    )  # fmt: skip
    mirror = launcher(moto_server, registry, "mirror", remote_base)
    for result in (run, mirror):
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert f"no route to {parse(remote_base).registry}" in line and "--stream-base" in line
    assert not [r for r in registry.requests() if r.method in ("POST", "PATCH", "PUT")]
    batch = moto_server.client("batch")
    assert batch.describe_job_definitions(status="ACTIVE")["jobDefinitions"] == []
    assert not batch.list_jobs(jobQueue=stack["JobQueueArn"])["jobSummaryList"]


def test_the_dry_run_names_the_copy_job_and_what_it_moves(
    moto_server, stack, remote_base, registry, env, aws
):
    """With a route out (NAT), `--dryrun` prints the copy job's requests (valid for the
    botocore model) and the bytes it would copy in AWS; the workspace digest is computed from
    reads alone."""
    from launcher.api import Cluster
    from launcher.stack.cluster import from_stack

    info = dataclasses.replace(
        from_stack(aws.describe_stack("EfaBatch")),
        internet_egress="nat",
        repository_uri=f"{registry.host}/{stack['RepositoryUri'].split('/', 1)[1]}",
    )
    registry.requests()
    messages: list = []
    document = Cluster(info, aws).dryrun(
        ["true"], nodes=2, image=remote_base, workspace=env / "ws", progress=messages.append
    )
    (copy_base,) = document["copyBase"]
    layers = blobs_of(pinned(remote_base))[1:]
    assert copy_base["bytes"] == sum(int(b["size"]) for b in layers)
    assert_valid("batch", "RegisterJobDefinition", copy_base["registerJobDefinition"])
    assert_valid("batch", "SubmitJob", copy_base["submitJob"])
    assert copy_base["submitJob"]["jobQueue"] == stack["CopyQueueArn"]
    assert copy_base["submitJob"]["parameters"]["source"] == str(pinned(remote_base))
    assert any("copying 0.15 GB of base layers in AWS (copy job on" in m.text for m in messages)
    assert not [r for r in registry.requests() if r.method in ("POST", "PATCH", "PUT")]


def test_without_nat_a_cache_rule_serves_only_what_ecr_already_holds(moto_server, stack, aws):
    """ECR user guide, vpc-endpoints.html: the first pull through a pull-through cache rule
    from a VPC with ECR interface endpoints needs a NAT gateway. The launcher asks ECR
    (DescribeImages, which never pulls through) whether the cache holds the base."""
    from launcher.api import Cluster
    from launcher.stack.cluster import from_stack

    digest = "sha256:" + "d" * 64
    base = Reference("public.ecr.aws", "org/pytorch", None, digest)
    info = from_stack(aws.describe_stack("EfaBatch"))
    assert info.pull_through_cache == {"ecr-public": "public.ecr.aws"}
    copier = Cluster(info, aws).copy_jobs()
    with pytest.raises(UsageError) as refused:
        copier.check(base)
    assert "not yet in the pull-through cache ecr-public/org/pytorch" in str(refused.value)
    ecr = moto_server.client("ecr")
    ecr.create_repository(repositoryName="ecr-public/org/pytorch")
    manifest_ = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": "sha256:" + "e" * 64,
                "size": 2,
            },
            "layers": [],
        }
    )
    pushed = ecr.put_image(
        repositoryName="ecr-public/org/pytorch", imageManifest=manifest_, imageTag="1"
    )["image"]["imageId"]["imageDigest"]
    cached = dataclasses.replace(base, digest=pushed)
    registry = info.repository_uri.split("/", 1)[0]
    assert copier.source(cached).name == f"{registry}/ecr-public/org/pytorch"


class Fargate:
    """Plays Fargate's part for the moto stack's copy queue: each copy job the launcher submits
    runs as this machine's copy program (the copier image's command, `python3` being this
    interpreter), its output going to the job's CloudWatch Logs stream."""

    def __init__(self, queue_arn: str, program=None) -> None:
        import threading

        self.queue_arn, self.ran = queue_arn, []
        self.program = program or self.copy_program
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)

    @staticmethod
    def copy_program(command: list[str]) -> tuple[int, list[str]]:
        argv = [sys.executable if word == "python3" else word for word in command]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
        return done.returncode, (done.stdout + done.stderr).splitlines()

    def serve(self) -> None:
        from devenv import moto_gaps
        from devenv.emulator import ACCOUNT, REGION

        while not self.stop.is_set():
            for job_id in moto_gaps.held_jobs(ACCOUNT, REGION, self.queue_arn):
                self.ran.append(job_id)
                moto_gaps.run_container_job(ACCOUNT, REGION, job_id, self.program)
            time.sleep(0.1)

    def __enter__(self) -> Fargate:
        self.thread.start()
        return self

    def __exit__(self, *_) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


def nat_cluster(aws, stack, registry, repo: str):
    """The moto stack as one with a NAT gateway, its workspace repository in the real local
    registry (LAUNCHER_REGISTRY's role: moto's ECR host does not exist)."""
    from launcher.api import Cluster
    from launcher.stack.cluster import from_stack

    info = dataclasses.replace(
        from_stack(aws.describe_stack("EfaBatch")),
        internet_egress="nat",
        repository_uri=f"{registry.host}/{repo}",
    )
    return Cluster(info, aws)


def test_on_aws_the_run_waits_for_the_copy_job_then_submits_on_the_copied_base(
    moto_server, stack, remote_base, registry, env, aws
):
    """The AWS path end to end: the copy job goes to the Fargate copy queue with the base as a
    parameter, the launcher follows its lines in CloudWatch Logs as progress, and only once it
    succeeded submits the training job on the workspace image over the copied base."""
    cluster = nat_cluster(aws, stack, registry, f"aws-{os.getpid()}")
    said: list = []
    with Fargate(stack["CopyQueueArn"]) as fargate:
        job = cluster.run(
            ["true"], nodes=2, image=remote_base, workspace=env / "ws", progress=said.append
        )
    texts = [e.text for e in said]
    assert "copying 0.15 GB of base layers in AWS (copy job on EfaBatch-copy)" in texts
    (copy_id,) = fargate.ran
    assert f"copy job {copy_id} started" in texts
    done = [t for t in texts if t.startswith("copy: done ")]
    assert done and pinned(remote_base).digest in done[0]  # a line read from CloudWatch Logs
    submitted = next(i for i, t in enumerate(texts) if t.startswith("submitted true to"))
    assert texts.index(done[0]) < submitted  # the job only once its base is in place
    (copy_job,) = moto_server.client("batch").describe_jobs(jobs=[copy_id])["jobs"]
    assert copy_job["parameters"]["source"] == str(pinned(remote_base))
    digest = pinned(remote_base).digest
    assert pinned(f"{cluster.info.repository_uri}:{transfer.copied_tag(digest)}").digest == digest
    (training,) = moto_server.client("batch").describe_jobs(jobs=[job.job_id])["jobs"]
    image = training["nodeProperties"]["nodeRangeProperties"][0]["container"]["image"]
    assert image.startswith(f"{cluster.info.repository_uri}@sha256:")
    workspace_image = parse(image)
    raw, _, _ = Registry(workspace_image.registry, lambda: None).get_manifest(
        workspace_image.repository, workspace_image.digest, manifest.ACCEPT
    )
    for layer in json.loads(raw)["layers"]:  # every layer of the job's image is in place
        assert has_blob(registry, workspace_image.repository, layer["digest"])


def test_on_aws_a_failed_copy_job_says_why_and_submits_nothing(
    moto_server, stack, remote_base, registry, env, aws
):
    cluster = nat_cluster(aws, stack, registry, f"aws-fail-{os.getpid()}")
    refused = "copy: error: registry nvcr.io: GET /v2/nvidia/pytorch/manifests: 401 unauthorized"
    before = {
        j["jobId"]
        for j in moto_server.client("batch").list_jobs(
            jobQueue=stack["JobQueueArn"], filters=[{"name": "JOB_NAME", "values": ["*"]}]
        )["jobSummaryList"]
    }
    from launcher.errors import RemoteError

    fargate = Fargate(stack["CopyQueueArn"], lambda command: (1, [refused]))
    with fargate, pytest.raises(RemoteError) as failed:
        cluster.run(["true"], nodes=2, image=remote_base, workspace=env / "ws")
    (copy_id,) = fargate.ran
    assert str(failed.value) == (
        f"copy job {copy_id} FAILED: registry nvcr.io: GET /v2/nvidia/pytorch/manifests: "
        f"401 unauthorized (launcher logs {copy_id})"
    )
    after = {
        j["jobId"]
        for j in moto_server.client("batch").list_jobs(
            jobQueue=stack["JobQueueArn"], filters=[{"name": "JOB_NAME", "values": ["*"]}]
        )["jobSummaryList"]
    }
    assert after == before  # no training job
