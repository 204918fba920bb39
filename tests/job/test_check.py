"""`launcher check`: parsers on the tools' real output, the verdict, and a real local run."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time

import pytest

from devenv.clusters import cluster_info
from devenv.processes import free_port
from launcher.job import check
from launcher.node import check_script
from launcher.stack.outputs import Egress
from tests.conftest import ROOT
from tests.support import cli
from tests.support.processes import rendezvous_port

FIXTURES = ROOT / "tests" / "fixtures" / "check"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_all_reduce_perf_over_efa_is_parsed():
    found = check.parse_all_reduce(fixture("all_reduce_perf_efa.txt").splitlines())
    # 256 MiB, 512 MiB and 1 GiB rows; not the footer's 1.15327, which counts 0 B to 1 GiB
    assert found == {"busbw": 3.13, "peak_busbw": 3.15, "wrong": 0, "network": "AWS Libfabric"}
    assert check.uses_efa(found["network"])


def test_published_two_node_runs_are_read_from_their_large_sizes():
    """AWS's published 2-node figures, both launchers' rank labels."""
    p5 = check.parse_all_reduce(fixture("all_reduce_perf_p5_2node.txt").splitlines())
    assert (p5["busbw"], p5["peak_busbw"]) == (299.31, 437.79)  # the footer says 52.9753
    p4de = check.parse_all_reduce(fixture("all_reduce_perf_p4de_2node.txt").splitlines())
    assert (p4de["busbw"], p4de["peak_busbw"]) == (74.82, 78.33)


def test_socket_fallback_is_recognised():
    found = check.parse_all_reduce(fixture("all_reduce_perf_socket.txt").splitlines())
    assert found["network"] == "Socket" and not check.uses_efa(found["network"])


def node_lines(node: int, **facts: str) -> list[str]:
    base = {
        "efa_devices": "4",
        "efa_provider": "4",
        "gpus": "8",
        "efs_write": "ok",
        "efs_shared": "2",
        "rendezvous": "1/1" if node == 0 else "ok",
        "job_role": "ok",
        "imds": "blocked",
    }
    return [f"LAUNCHER_CHECK node={node} {k}={v}" for k, v in (base | facts).items()]


def nccl_lines(*names: str) -> list[str]:
    """The check's NCCL output: fixtures in order (NCCL's init lines, then the test's table)."""
    text = "\n".join((ROOT / "tests" / "fixtures" / name).read_text() for name in names)
    return ["LAUNCHER_CHECK node=0 nccl=ran"] + [
        f"LAUNCHER_CHECK_NCCL {x}" for x in text.splitlines()
    ]


EFA_P4DE = ("nccl/efa_init.log", "check/all_reduce_perf_p4de_2node.txt")


def statuses(report: check.Report) -> dict[str, str]:
    found = {f"{n}:{r.check}": r.status for n, rs in report.nodes.items() for r in rs}
    found.update({f"all:{r.check}": r.status for r in report.cluster})
    return found


P4D = cluster_info("p4d.24xlarge", internet_egress="nat")  # floor: 400 Gbps / 8 / 2 = 25 GB/s


def test_a_healthy_cluster_passes():
    lines = node_lines(0) + node_lines(1) + nccl_lines(*EFA_P4DE)
    report = check.evaluate(lines, 2, P4D)
    assert report.passed, report.table()
    assert set(statuses(report).values()) == {"pass"}
    assert "74.82 GB/s bus bandwidth over Libfabric (floor 25)" in report.table()


def test_published_p5_figures_clear_the_p5_floor():
    p5 = cluster_info("p5.48xlarge")  # floor: 3200 Gbps / 8 / 2 = 200 GB/s
    facts = {"efa_devices": "32", "efa_provider": "32"}
    lines = node_lines(0, **facts) + node_lines(1, **facts)
    lines += nccl_lines("nccl/efa_init.log", "check/all_reduce_perf_p5_2node.txt")
    report = check.evaluate(lines, 2, p5)
    assert report.passed, report.table()
    assert "299.31 GB/s bus bandwidth over Libfabric (floor 200)" in report.table()


def test_a_slow_all_reduce_fails_against_the_floor():
    lines = node_lines(0) + node_lines(1) + nccl_lines("check/all_reduce_perf_efa.txt")
    report = check.evaluate(lines, 2, P4D)  # one GPU per node: 3.13 GB/s
    assert not report.passed
    assert statuses(report)["all:nccl all_reduce"] == "FAIL"
    assert "below the 25 GB/s floor" in report.table()


def test_nccl_on_sockets_fails_even_when_fast_enough():
    socket = ("nccl/socket_init.log", "check/all_reduce_perf_p4de_2node.txt")
    lines = node_lines(0) + node_lines(1) + nccl_lines(*socket)
    report = check.evaluate(lines, 2, P4D)
    assert statuses(report)["all:nccl all_reduce"] == "FAIL"
    assert "74.82 GB/s bus bandwidth over Socket: NCCL did not use EFA" in report.table()


def test_missing_efa_devices_and_a_silent_node_fail():
    lines = node_lines(0, efa_devices="0", efa_provider="0") + nccl_lines(*EFA_P4DE)
    report = check.evaluate(lines, 2, P4D)
    found = statuses(report)
    assert found["0:efa devices"] == found["0:efa provider"] == "FAIL"
    assert found["1:report"] == "FAIL"
    assert "the node never reported" in report.table()
    assert json.loads(json.dumps(report.as_dict()))["verdict"] == "fail"


def test_a_container_that_reaches_imds_or_lacks_its_role_fails():
    """The instance role must be out of reach of jobs (ECS_AWSVPC_BLOCK_IMDS), the job role
    reachable through the ECS agent; the efa row shows what /dev/infiniband holds."""
    lines = node_lines(0, imds="reachable", infiniband="rdma_cm uverbs0 uverbs1 uverbs2 uverbs3")
    lines += node_lines(1, job_role="unreachable") + nccl_lines(*EFA_P4DE)
    report = check.evaluate(lines, 2, P4D)
    found = statuses(report)
    assert (found["0:imds"], found["0:job role"]) == ("FAIL", "pass")
    assert (found["1:imds"], found["1:job role"]) == ("pass", "FAIL")
    assert "job containers can read the instance role's credentials" in report.table()
    assert "4/4 (rdma_cm uverbs0 uverbs1 uverbs2 uverbs3)" in report.table()
    missing = [ln for ln in node_lines(0) if "job_role" not in ln and "imds" not in ln]
    aws = statuses(check.evaluate(missing, 1, P4D))
    local = statuses(check.evaluate(missing, 1, P4D, local=True))
    assert (aws["0:job role"], local["0:job role"], local["0:imds"]) == ("FAIL", "n/a", "n/a")


def test_data_buckets_fsx_and_the_way_out_get_their_own_rows():
    """Each data bucket is listed from every node with the job role (S3 ListObjectsV2 needs only
    s3:ListBucket, S3 API reference); the answer is translated into what to do: another
    account's bucket must also grant the role in its bucket policy ("you must grant
    cross-account access in both the IAM policy and the bucket policy", S3 user guide,
    example-bucket-policies.html), and a bucket in another Region is out of the S3 gateway
    endpoint's reach ("A gateway endpoint is available only in the Region where you created it",
    VPC user guide, vpc-endpoints-s3.html)."""
    cluster = cluster_info(
        "p4d.24xlarge",
        data_buckets=("ok-bucket/data", "denied-bucket", "far-bucket:rw"),
        fsx_file_system_id="fs-0123456789abcdef0",
    )
    probes = {
        "s3_0": "ok",
        "s3_1": "error:403:AccessDenied",
        "s3_2": "region:eu-west-1",
        "fsx_write": "ok",
        "fsx_shared": "2",
    }
    lines = node_lines(0, **probes) + node_lines(1, **(probes | {"fsx_shared": "1"}))
    report = check.evaluate(lines + nccl_lines(*EFA_P4DE), 2, cluster)
    found = statuses(report)
    assert found["0:s3 s3://ok-bucket/data/"] == "pass"
    assert found["0:s3 s3://denied-bucket/"] == "FAIL"
    assert found["0:s3 s3://far-bucket/"] == "FAIL"
    assert found["0:fsx"] == "pass" and found["1:fsx"] == "FAIL"
    assert found["all:internet"] == "n/a"
    table = report.table()
    assert "bucket policy" in table and "in eu-west-1, not us-east-1" in table
    assert "experiment trackers, model hubs and pip" in table

    with_nat = dataclasses.replace(cluster, internet_egress=Egress.NAT)
    report = check.evaluate(lines + nccl_lines(*EFA_P4DE), 2, with_nat)
    assert statuses(report)["0:s3 s3://far-bucket/"] == "n/a"
    assert statuses(report)["all:internet"] == "pass"


def test_the_check_job_asks_for_each_bucket_location():
    cluster = cluster_info(data_buckets=("ok-bucket/data/set", "whole-bucket:rw"))
    env = dict(check.spec(cluster, 2, "image:1", 29500, 600).env)
    assert env["LAUNCHER_CHECK_BUCKETS"] == "ok-bucket/data/set whole-bucket/"
    assert env["LAUNCHER_CHECK_REGION"] == "us-east-1"
    assert "LAUNCHER_CHECK_BUCKETS" not in dict(check.spec(cluster_info(), 2, "i", 29500, 600).env)


def test_the_s3_probe_signs_a_listing_with_the_container_credentials(moto_server, tmp_path):
    """The probe runs in the node's image with the standard library only; here it runs against
    the moto server, with credentials from an endpoint like the ECS agent's
    (AWS_CONTAINER_CREDENTIALS_FULL_URI, the SDKs' variable) and AWS_ENDPOINT_URL."""
    s3 = moto_server.client("s3")
    s3.create_bucket(Bucket="probe-bucket")
    s3.put_object(Bucket="probe-bucket", Key="data/x", Body=b"1")
    (tmp_path / "creds").write_text(
        json.dumps({"AccessKeyId": "AKIDEXAMPLE", "SecretAccessKey": "secret", "Token": "t"})
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port := free_port()), "--bind", "127.0.0.1"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while (
            subprocess.run(
                [
                    "python3",
                    "-c",
                    f"import socket; socket.create_connection(('127.0.0.1', {port}), 1)",
                ],
                capture_output=True,
            ).returncode
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        env = {
            "PATH": os.environ["PATH"],
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": f"http://127.0.0.1:{port}/creds",
            "AWS_ENDPOINT_URL": moto_server.url,
        }
        args = ["us-east-1", "probe-bucket/data", "no-such-bucket/"]
        result = subprocess.run(
            ["python3", "-c", check_script.S3_PROBE, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.terminate()
        server.wait()
    assert result.stdout.splitlines() == ["s3_0=ok", "s3_1=error:404:NoSuchBucket"], result.stderr


def test_the_check_job_is_a_valid_batch_job():
    from launcher.job import jobdef
    from tests.support.service_model import assert_valid

    spec = check.spec(P4D, 2, check.DEFAULT_IMAGE, 29500, 1800)
    requests = jobdef.build(spec, P4D)
    assert_valid("batch", "RegisterJobDefinition", requests.register)
    assert_valid("batch", "SubmitJob", requests.submit)
    container = requests.register["nodeProperties"]["nodeRangeProperties"][0]["container"]
    assert container["command"][4:6] == ["/bin/sh", "-c"]
    assert len(container["linuxParameters"]["devices"]) == 4


@pytest.mark.parametrize(
    ("pipeline", "output", "count"),
    [
        (check_script.COUNT_EFA_PROVIDERS, "fi_info_efa.txt", "1"),
        (check_script.COUNT_EFA_PROVIDERS, "fi_info_missing.txt", "0"),
        (check_script.COUNT_GPUS, "nvidia_smi_8x_a100.txt", "8"),
    ],
)
def test_the_script_counts_real_tool_output(pipeline, output, count):
    """The node's own pipelines (in dash, as the images run them) over real tool output."""
    run = subprocess.run(
        ["dash", "-c", pipeline], input=fixture(output), capture_output=True, text=True
    )
    assert run.stdout.strip() == count
    assert f"| {pipeline})" in check_script.SCRIPT


def test_dash_parses_the_check_script():
    assert subprocess.run(["dash", "-n", "-c", check_script.SCRIPT], check=False).returncode == 0


# --- on the local Docker engine: the same orchestration, for real ------------------------------


@pytest.fixture(scope="module")
def stack(moto_server, synth_default):
    moto_server.reset()
    return moto_server.deploy(synth_default.outdir, synth_default.stack_names)["EfaBatch"]


def launcher(env, *args) -> subprocess.CompletedProcess:
    return cli.launcher(*args, env=env)


def test_check_local_runs_rendezvous_and_efs_for_real(
    stack, moto_server, docker_engine, busybox_base, tmp_path
):
    env = {
        **os.environ,
        **moto_server.env,
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_LOCAL_STATE": str(tmp_path / "state"),
    }
    args = ["check", "--local", "--local-efs", str(tmp_path / "efs"), "--image", busybox_base]
    result = launcher(env, *args, "--nodes", "2", "--port", str(rendezvous_port()), "-o", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "pass"
    rows = {f"{n}:{r['check']}": r for n, rs in report["nodes"].items() for r in rs}
    assert rows["0:rendezvous port"]["status"] == "pass"
    assert rows["0:rendezvous port"]["detail"] == "1/1"
    assert rows["1:rendezvous port"]["status"] == "pass"
    assert rows["0:efs"]["detail"] == "write ok, sees 2/2 nodes"
    assert rows["0:gpus"]["status"] == rows["0:efa devices"]["status"] == "n/a"
    assert report["cluster"][0]["status"] == "n/a"
    assert not list((tmp_path / "efs").glob(".launcher-check/*"))  # cleaned up

    table = launcher(env, *args, "--port", str(rendezvous_port()))
    assert table.returncode == 0 and "PASS: the cluster is ready" in table.stdout


def test_check_on_one_node_runs_a_single_node_job(
    stack, moto_server, docker_engine, busybox_base, tmp_path
):
    env = {
        **os.environ,
        **moto_server.env,
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_LOCAL_STATE": str(tmp_path / "state"),
    }
    args = ["check", "--local", "--local-efs", str(tmp_path / "efs"), "--image", busybox_base]
    result = launcher(env, *args, "--nodes", "1", "-o", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "pass"
    rows = {f"{n}:{r['check']}": r for n, rs in report["nodes"].items() for r in rs}
    assert rows["0:efs"]["detail"] == "write ok, sees 1/1 nodes"
    assert "0:rendezvous port" not in rows
    from launcher.local import Store

    (record,) = Store(tmp_path / "state").records()
    assert record.single_node  # a container job, not a one-node gang


def test_check_refuses_bad_input_before_submitting(stack, moto_server, busybox_base, tmp_path):
    env = {**os.environ, **moto_server.env, "LAUNCHER_LOCAL_STATE": str(tmp_path / "state")}
    too_many = launcher(env, "check", "--nodes", "3", "--image", busybox_base)
    assert too_many.returncode == 2
    assert "--nodes 3: EfaBatch runs at most 2" in too_many.stderr
    missing = launcher(env, "check", "--image", busybox_base.replace(":1", ":absent"))
    assert missing.returncode == 2, missing.stderr
    assert "no such image in its registry" in missing.stderr
    batch = moto_server.client("batch")
    assert (
        batch.list_jobs(
            jobQueue="EfaBatch-jobs", filters=[{"name": "JOB_NAME", "values": ["launcher-check"]}]
        )["jobSummaryList"]
        == []
    )
