"""``python -m devenv.emulator deploy``: a platform engineer's own environment of cdk.json on
the emulated AWS, in its own account and any Region, in one command, and the launcher pointed
at it with the lines it prints (docs/teams.md, "Rehearse it on the emulator"; docs/operating.md).

The deploys share one moto server (the command reuses it) and run in file order: eu-west-1,
then prod in its own account, then an update of the first, then stop."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
import requests

from tests.conftest import ROOT
from tests.support.cli import launcher

PROG = [sys.executable, "-m", "devenv.emulator"]
CPU_POOL = '{"cpu": {"instance_type": "c7i.4xlarge", "max_nodes": 4, "spot": true}}'


def emulate(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*PROG, *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def exports(stdout: str) -> dict[str, str]:
    """The environment the printed lines give a shell that evaluates them."""
    found = dict(re.findall(r"^export (\w+)=(\S+)$", stdout, re.M))
    assert len(found) == len(stdout.splitlines()), stdout  # stdout holds the lines alone
    return found


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    path = tmp_path_factory.mktemp("emulate") / ".emulator"
    yield path
    emulate("stop", "--workdir", str(path))  # a no-op when the last test stopped it


@pytest.fixture(scope="module")
def eu_west_1(workdir):
    result = emulate("deploy", "-c", "env=demo", "--region", "eu-west-1", "--workdir", str(workdir))
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.mark.cdk
@pytest.mark.emulator
def test_an_environment_deploys_in_another_region_and_the_launcher_reads_it(eu_west_1, workdir):
    env = exports(eu_west_1.stdout)
    assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "eu-west-1"
    assert env["LAUNCHER_STACK"] == "EfaBatch"
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", env["AWS_ENDPOINT_URL"])
    # The same lines, for `source`, private: they hold the emulator's key.
    assert (workdir / "env").read_text() == eu_west_1.stdout
    assert (workdir / "env").stat().st_mode & 0o777 == 0o600
    err = eu_west_1.stderr
    assert "deployed EfaBatch-Network, EfaBatch-Storage, EfaBatch in 123456789012 eu-west-1" in err
    assert f"point the launcher at it: source {workdir / 'env'}" in err
    assert f"stop the emulator: python -m devenv.emulator stop --workdir {workdir}" in err
    assert "Traceback" not in err and "!!" not in err  # nor jsii's Node.js banner

    shell = {**os.environ, **env}
    shell.pop("LAUNCHER_TEAM", None)
    outputs = launcher("outputs", env=shell)
    assert outputs.returncode == 0, outputs.stderr
    assert re.search(r"^stack +EfaBatch \(eu-west-1\)$", outputs.stdout, re.M)
    assert "123456789012.dkr.ecr.eu-west-1.amazonaws.com/" in outputs.stdout
    # The Region's zone: the environment's letter (us-east-1a -> eu-west-1a).
    ec2 = boto3.client(
        "ec2",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        region_name="eu-west-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    subnets = ec2.describe_subnets(Filters=[{"Name": "tag:aws-cdk:subnet-name", "Values": ["*"]}])
    assert {s["AvailabilityZone"] for s in subnets["Subnets"]} == {"eu-west-1a"}
    # Nothing in the environment's own Region: --region moved it.
    cf = boto3.client(
        "cloudformation",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    assert cf.describe_stacks()["Stacks"] == []


@pytest.mark.cdk
@pytest.mark.emulator
def test_an_environment_of_another_account_deploys_into_that_account(eu_west_1, workdir):
    """cdk.json's prod (210987654321, us-west-2): its stacks are in its account, which the
    printed key reaches, and not in the emulator's default account."""
    result = emulate("deploy", "-c", "env=prod", "--workdir", str(workdir))
    assert result.returncode == 0, result.stderr[-3000:]
    env = exports(result.stdout)
    assert env["AWS_ENDPOINT_URL"] == exports(eu_west_1.stdout)["AWS_ENDPOINT_URL"]  # reused
    assert "reusing the emulated AWS at" in result.stderr
    assert env["AWS_REGION"] == "us-west-2" and env["AWS_ACCESS_KEY_ID"] != "testing"
    outputs = launcher("outputs", "--all", "-o", "json", env={**os.environ, **env})
    assert outputs.returncode == 0, outputs.stderr
    assert ":210987654321:" in json.loads(outputs.stdout)["job_queue_arn"]
    default_account = {**os.environ, **env, "AWS_ACCESS_KEY_ID": "testing"}
    missing = launcher("outputs", env=default_account)
    assert missing.returncode == 2
    assert "stack EfaBatch not found in us-west-2" in missing.stderr


@pytest.mark.cdk
@pytest.mark.emulator
def test_deploying_again_plans_with_the_predeploy_check_then_updates(eu_west_1, workdir):
    result = emulate(
        "deploy",
        "-c",
        "env=demo",
        "-c",
        f"pools={CPU_POOL}",
        "--region",
        "eu-west-1",
        "--workdir",
        str(workdir),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    err = result.stderr
    assert "updating; first the pre-deploy check: python -m infra.predeploy --app" in err
    assert re.search(r"^EfaBatch: .*\d+ added", err, re.M), err  # the pool's resources
    assert "updated EfaBatch-Network, EfaBatch-Storage, EfaBatch in 123456789012 eu-west-1" in err
    outputs = launcher("outputs", env={**os.environ, **exports(result.stdout)})
    assert re.search(r"^cpu +EfaBatch-cpu +c7i\.4xlarge", outputs.stdout, re.M), outputs.stdout


@pytest.mark.cdk
@pytest.mark.emulator
def test_stop_ends_the_server_it_started(eu_west_1, workdir):
    url = exports(eu_west_1.stdout)["AWS_ENDPOINT_URL"]
    result = emulate("stop", "--workdir", str(workdir))
    assert result.returncode == 0
    assert re.fullmatch(
        rf"emulator: stopped the emulated AWS at {url} \(pid \d+\)\n", result.stderr
    )
    assert not (workdir / "server.json").exists()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{url}/moto-api/", timeout=2)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["-c", "env=demo", "-c", "max_node=8"],
            "error: invalid cluster configuration: max_node: not a setting; did you mean "
            "max_nodes?",
        ),
        (
            ["-c", "env=nowhere"],
            "error: invalid cluster configuration: env: unknown environment 'nowhere'; allowed: "
            "demo, prod, teams",
        ),
        (["-c", "env"], "error: -c env: expected KEY=VALUE (as with cdk -c)"),
        (
            ["-c", "env=demo", "--region", "eu-west"],
            "error: invalid cluster configuration: region: 'eu-west' is malformed; expected a "
            "region name such as us-east-1",
        ),
    ],
    ids=["misspelt", "unknown-env", "no-value", "bad-region"],
)
def test_bad_settings_are_one_line_and_nothing_starts(tmp_path, args, line):
    """Checked as the CDK app checks them, before a server starts (this tier may start none)."""
    result = emulate("deploy", *args, "--workdir", str(tmp_path / ".emulator"))
    assert (result.returncode, result.stdout, result.stderr) == (2, "", line + "\n")
    assert not (tmp_path / ".emulator").exists()


def test_without_cdk_json_it_says_where_to_run(tmp_path):
    result = emulate("deploy", "-c", "env=demo", cwd=tmp_path, env={"PYTHONPATH": str(ROOT)})
    assert result.returncode == 2
    assert result.stderr == f"error: no cdk.json in {tmp_path}: run this where `cdk deploy` runs\n"
