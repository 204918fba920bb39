"""`launcher exec`: a command or a shell in a running job's node, locally (docker exec) and on
AWS (ECS ExecuteCommand, then the Session Manager plugin); the stack's ecs_exec setting."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pty
import select
import stat
import subprocess
import time
from pathlib import Path
from unittest import mock

import pytest
from botocore.stub import Stubber

from devenv.clusters import cluster_info
from infra.cluster import SSM_MESSAGES
from infra.network import exec_endpoints
from launcher import local
from launcher.aws import node_shell
from launcher.aws.batch import BatchBackend
from launcher.aws.client import Aws
from launcher.cli.main import parser
from launcher.errors import LauncherError, UsageError
from launcher.job import enterable, jobdef
from launcher.job.info import JobInfo, JobState
from launcher.job.jobspec import JobSpec
from launcher.local.shell import docker_environment, docker_exec_argv
from launcher.stack.cluster import ClusterInfo
from launcher.stack.outputs import OutputKey
from tests.conftest import synth_templates
from tests.support import cli
from tests.support.processes import rendezvous_port
from tests.support.service_model import assert_valid

JOB = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"
QUEUE = "arn:aws:batch:us-east-1:123456789012:job-queue/EfaBatch-jobs"
CLUSTER = "arn:aws:ecs:us-east-1:123456789012:cluster/AWSBatch-default-0a1b"
TASK = "arn:aws:ecs:us-east-1:123456789012:task/AWSBatch-default-0a1b/5e6f7a8b9c0d"


def _info(state: JobState, nodes: int = 2, **kw) -> JobInfo:
    return JobInfo(job_id=JOB, name="train", state=state, nodes=nodes, **kw)


# --- refusals (pure) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "state", [JobState.SUBMITTED, JobState.PENDING, JobState.RUNNABLE, JobState.STARTING]
)
def test_a_job_not_yet_running_is_refused_with_what_to_look_at(state):
    refused = enterable.refusal(_info(state), 0)
    assert refused is not None and refused.exit_code == 2
    assert str(refused) == (
        f"job {JOB} is {state}, not running yet; launcher status {JOB} says what it waits for"
    )


@pytest.mark.parametrize("state", [JobState.SUCCEEDED, JobState.FAILED])
def test_an_ended_job_is_refused_pointing_to_its_logs(state):
    refused = enterable.refusal(_info(state), 0)
    assert str(refused) == (
        f"job {JOB} has ended ({state}); nothing runs to enter: its output is in "
        f"launcher logs {JOB}"
    )


def test_a_node_outside_the_job_and_an_array_parent_are_refused():
    assert (
        str(enterable.refusal(_info(JobState.RUNNING), 2)) == f"--node 2: job {JOB} has nodes 0-1"
    )
    assert str(enterable.refusal(_info(JobState.RUNNING, nodes=1), -1)) == (
        f"--node -1: job {JOB} has one node, 0"
    )
    array = _info(JobState.RUNNING, nodes=1, array_size=4)
    assert "launcher exec " + JOB + ":K" in str(enterable.refusal(array, 0))
    assert enterable.refusal(_info(JobState.RUNNING), 1) is None


def test_options_after_the_job_and_the_command_after_the_dashes():
    """`exec JOB --node 1 -- CMD` as kubectl exec takes it: --node is exec's, the command's own
    options (-n, even --node) stay the command's."""
    args = parser().parse_args(["exec", JOB, "--node", "1", "--", "echo", "-n", "--node"])
    assert args.command == ["--node", "1", "--", "echo", "-n", "--node"]  # REMAINDER, as words
    assert parser().parse_args(["exec", JOB]).command == []
    # The split itself happens in Exec.run; its refusal of a bad --node is argparse's one line.
    result = cli.launcher("exec", JOB, "--node", "x", "--", "true", env=_offline_env())
    assert result.returncode == 2
    assert result.stderr == (
        "launcher: error: argument --node: invalid int value: 'x' (see launcher exec --help)\n"
    )


def _offline_env() -> dict[str, str]:
    return {**os.environ, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x"}


# --- local: the docker CLI's argv and environment (pure) ------------------------------------


def test_docker_exec_gets_a_terminal_only_when_this_side_is_one():
    assert docker_exec_argv("c1", ["sh"], tty=True) == ["docker", "exec", "-i", "-t", "c1", "sh"]
    assert docker_exec_argv("c1", ["echo", "hi"], tty=False) == [
        "docker",
        "exec",
        "-i",
        "c1",
        "echo",
        "hi",
    ]


def test_the_docker_cli_reaches_the_engine_the_local_backend_uses():
    """docker.from_env reads DOCKER_HOST, else the default socket; the CLI would also follow a
    `docker context use`, so the context is dropped and the host named."""
    assert docker_environment({"DOCKER_CONTEXT": "remote"})["DOCKER_HOST"] == (
        "unix:///var/run/docker.sock"
    )
    assert "DOCKER_CONTEXT" not in docker_environment({"DOCKER_CONTEXT": "remote"})
    assert docker_environment({"DOCKER_HOST": "tcp://127.0.0.1:1"})["DOCKER_HOST"] == (
        "tcp://127.0.0.1:1"
    )


# --- AWS: the plugin's argv, as the AWS CLI builds it ---------------------------------------

SESSION = {"sessionId": "ecs-execute-command-0a1b", "streamUrl": "wss://s", "tokenValue": "t"}
RESPONSE = {
    "clusterArn": CLUSTER,
    "containerArn": "arn:aws:ecs:us-east-1:123456789012:container/AWSBatch-default-0a1b/c",
    "containerName": "default",
    "interactive": True,
    "session": SESSION,
    "taskArn": TASK,
}


def test_the_plugin_is_called_as_the_aws_cli_calls_it():
    """aws/aws-cli, awscli/customizations/ecs/executecommand.py (ExecuteCommandCaller.invoke,
    build_ssm_request_paramaters): ``["session-manager-plugin", SESSION, region_name,
    "StartSession", profile_name, json.dumps(ssm_request_params), endpoint_url]``, with
    ``profile_name`` '' when the session names none and ``ssm_request_params = {"Target":
    "ecs:{}_{}_{}".format(cluster_name, task_id, container_runtime_id)}``, names being the
    ARNs' last parts; SESSION is the name of the environment variable that holds the response
    (awscli/customizations/sessionmanager.py, StartSessionCaller.invoke: ``env[ssm_env_name] =
    start_session_response; start_session_response = ssm_env_name``)."""
    endpoint = "https://ecs.us-east-1.amazonaws.com"
    argv, env = node_shell.plugin_argv(RESPONSE, "rt-1", "us-east-1", None, endpoint)
    cluster_name, task_id = CLUSTER.split("/")[-1], TASK.split("/")[-1]
    assert argv == [
        "session-manager-plugin",
        "AWS_SSM_START_SESSION_RESPONSE",
        "us-east-1",
        "StartSession",
        "",
        json.dumps({"Target": f"ecs:{cluster_name}_{task_id}_rt-1"}),
        endpoint,
    ]
    assert env == {"AWS_SSM_START_SESSION_RESPONSE": json.dumps(RESPONSE["session"])}
    argv, _ = node_shell.plugin_argv(RESPONSE, "rt-1", "eu-west-1", "team", endpoint)
    assert argv[4] == "team"


@pytest.mark.parametrize(
    ("said", "from_environment"),
    [
        ("1.2.707.0\n", True),
        ("1.2.536.0", True),
        ("1.2.498", True),
        ("1.3", True),
        ("1.2.497.0\n", False),  # the last without (sessionmanager.py: strictly newer)
        ("1.2.463.0", False),
        ("1.2.497.0.1", False),  # five numbers: not a version the AWS CLI accepts either
        ("", False),
        ("Unknown operation --version.", False),  # plugins before --version
    ],
)
def test_the_plugins_version_decides_as_the_aws_cli_does(said, from_environment):
    """awscli/customizations/sessionmanager.py, VersionRequirement: whitespace removed, up to
    four dot-separated numbers, strictly newer than LAST_PLUGIN_VERSION_WITHOUT_ENV_VAR
    (1.2.497.0); session-manager-plugin's RELEASENOTES: 1.2.536.0 "Support reading StartSession
    API response parameters from environment variable"."""
    assert node_shell.reads_session_from_environment(said) is from_environment


def test_the_command_reaches_the_container_word_for_word():
    """The SSM agent splits ExecuteCommand's one string with shlex and runs it without a shell
    (amazon-ssm-agent, agent/session/shell/shell_unix.go, StartPty)."""
    words = ["sh", "-c", "echo 'a b' $HOME; ls"]
    request = node_shell.execute_command_request(CLUSTER, TASK, "default", words)
    assert request == {
        "cluster": CLUSTER,
        "task": TASK,
        "interactive": True,
        "command": "sh -c 'echo '\"'\"'a b'\"'\"' $HOME; ls'",
        "container": "default",
    }
    import shlex

    assert shlex.split(request["command"]) == words
    assert_valid("ecs", "ExecuteCommand", request)


# --- AWS: the calls, against botocore's own models (Stubber validates each request) ---------


def _job(status: str = "RUNNING", *, exec_on: bool = True, multinode: bool = True) -> dict:
    job = {
        "jobName": "train",
        "jobId": JOB,
        "jobQueue": QUEUE,
        "status": status,
        "startedAt": 1,
        "jobDefinition": "arn:aws:batch:us-east-1:123456789012:job-definition/efa-batch-x:1",
    }
    container = {"taskArn": TASK, "enableExecuteCommand": exec_on}
    if multinode:
        job["nodeProperties"] = {"numNodes": 2, "mainNode": 0, "nodeRangeProperties": []}
    else:
        job["container"] = container
    return job


def _node(status: str = "RUNNING", exec_on: bool = True) -> dict:
    node = {**_job(status, multinode=False), "jobId": f"{JOB}#1"}
    node["container"] = {"taskArn": TASK, "enableExecuteCommand": exec_on}
    return node


@pytest.fixture
def aws(monkeypatch):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "y",
        "AWS_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_ECS", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    aws = Aws()
    batch, ecs = Stubber(aws.client("batch")), Stubber(aws.client("ecs"))
    with batch, ecs:
        yield aws, batch, ecs
        batch.assert_no_pending_responses()
        ecs.assert_no_pending_responses()


_QUEUE = {
    "jobQueueName": "EfaBatch-jobs",
    "jobQueueArn": QUEUE,
    "state": "ENABLED",
    "priority": 1,
    "computeEnvironmentOrder": [{"order": 1, "computeEnvironment": "ce-default"}],
}
_CE = {
    "computeEnvironmentName": "ce-default",
    "computeEnvironmentArn": "arn:aws:batch:us-east-1:1:compute-environment/d",
    "ecsClusterArn": CLUSTER,
}
PLUGIN_VERSION = "1.2.707.0"  # session-manager-plugin's latest release notes' version


def _stand_in(tmp_path: Path, version: str) -> Path:
    """A stand-in session-manager-plugin: says ``version`` to ``--version``; otherwise writes
    what ps would show of it (its /proc/self/cmdline, every process's, proc(5)) and the
    session it reads as the real plugin does (session.go, ValidateInputAndStartSession: the
    variable its first argument names), and exits 7."""
    seen = tmp_path / "seen.json"
    script = tmp_path / "bin" / node_shell.PLUGIN
    script.parent.mkdir(exist_ok=True)
    script.write_text(
        "#!/usr/bin/env python3\nimport json, os, sys\n"
        f"if sys.argv[1:] == ['--version']:\n    print({version!r})\n    sys.exit(0)\n"
        "cmdline = open('/proc/self/cmdline', 'rb').read().decode()\n"
        "session = os.environ.get(sys.argv[1]) if sys.argv[1].startswith("
        "'AWS_SSM_START_SESSION_RESPONSE') else sys.argv[1]\n"
        f"open({str(seen)!r}, 'w').write(json.dumps("
        "{'argv': sys.argv[1:], 'cmdline': cmdline, 'session': session}))\n"
        "sys.exit(7)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return seen


@pytest.fixture
def plugin(tmp_path, monkeypatch) -> Path:
    """The stand-in plugin, of a current version, on PATH: the file it writes."""
    seen = _stand_in(tmp_path, PLUGIN_VERSION)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    return seen


def test_a_node_is_found_and_entered_as_the_aws_cli_would(aws, plugin):
    """DescribeJobs (the job, then its node JOB#1: a multi-node job's task is the node's), the
    queue's compute environments' ECS clusters, DescribeTasks there (the container's name and
    runtime id), ExecuteCommand; then the plugin, whose exit status is exec's."""
    client, batch, ecs = aws
    batch.add_response("describe_jobs", {"jobs": [_job()]}, {"jobs": [JOB]})
    batch.add_response("describe_jobs", {"jobs": [_node()]}, {"jobs": [f"{JOB}#1"]})
    batch.add_response("describe_job_queues", {"jobQueues": [_QUEUE]}, {"jobQueues": [QUEUE]})
    batch.add_response(
        "describe_compute_environments",
        {"computeEnvironments": [_CE]},
        {"computeEnvironments": ["ce-default"]},
    )
    task = {"taskArn": TASK, "containers": [{"name": "default", "runtimeId": "rt-1"}]}
    ecs.add_response("describe_tasks", {"tasks": [task]}, {"cluster": CLUSTER, "tasks": [TASK]})
    request = {
        "cluster": CLUSTER,
        "task": TASK,
        "container": "default",
        "interactive": True,
        "command": "printenv AWS_BATCH_JOB_NODE_INDEX",
    }
    ecs.add_response("execute_command", RESPONSE, request)
    code = BatchBackend(client).enter(JOB, 1, ["printenv", "AWS_BATCH_JOB_NODE_INDEX"])
    assert code == 7
    seen = json.loads(plugin.read_text())
    endpoint = client.client("ecs").meta.endpoint_url
    argv, _ = node_shell.plugin_argv(RESPONSE, "rt-1", "us-east-1", None, endpoint)
    assert [node_shell.PLUGIN, *seen["argv"]] == argv
    assert json.loads(seen["session"]) == SESSION


def test_the_session_token_is_not_in_the_process_list(aws, plugin):
    """Any local user's ps reads a process's command line (proc(5): /proc/PID/cmdline is
    world-readable), only its user the environment (/proc/PID/environ, 0400). The plugin gets
    the session, token included, in AWS_SSM_START_SESSION_RESPONSE, as the AWS CLI hands it
    (sessionmanager.py), and the token appears nowhere in what ps shows."""
    client, batch, ecs = aws
    batch.add_response("describe_jobs", {"jobs": [_job(multinode=False)]})
    batch.add_response("describe_job_queues", {"jobQueues": [_QUEUE]})
    batch.add_response("describe_compute_environments", {"computeEnvironments": [_CE]})
    task = {"taskArn": TASK, "containers": [{"name": "default", "runtimeId": "rt-1"}]}
    ecs.add_response("describe_tasks", {"tasks": [task]})
    token = "AAEAAdEkRBE3LVr5yv9TOKEN-NOT-FOR-PS"
    ecs.add_response("execute_command", {**RESPONSE, "session": {**SESSION, "tokenValue": token}})
    assert BatchBackend(client).enter(JOB, 0, ["sh"]) == 7
    seen = json.loads(plugin.read_text())
    assert json.loads(seen["session"])["tokenValue"] == token
    assert token not in seen["cmdline"] and "tokenValue" not in seen["cmdline"]
    assert "AWS_SSM_START_SESSION_RESPONSE" not in os.environ  # this process keeps none


def test_a_plugin_that_would_take_the_token_on_its_command_line_is_refused_first(
    aws, tmp_path, monkeypatch
):
    """A plugin of 1.2.497.0 or before reads the session only from its first argument
    (sessionmanager.py's fallback, which puts the token in ps): refused in one line saying the
    version to install, before any call opens a session (no response is queued)."""
    client, _, _ = aws
    seen = _stand_in(tmp_path, "1.2.497.0")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    with pytest.raises(LauncherError) as old:
        BatchBackend(client).enter(JOB, 0, ["sh"])
    assert old.value.exit_code == 1 and "\n" not in str(old.value)
    assert str(old.value).startswith(
        "session-manager-plugin 1.2.497.0 takes the session's token on its command line, where "
        "any local user's ps reads it; install 1.2.536.0 or later"
    )
    assert not seen.exists()


def test_a_job_submitted_without_ecs_exec_names_the_setting(aws, plugin):
    client, batch, _ = aws
    batch.add_response("describe_jobs", {"jobs": [_job(exec_on=False, multinode=False)]})
    with pytest.raises(UsageError) as refused:
        BatchBackend(client).enter(JOB, 0, ["sh"])
    assert str(refused.value) == (
        f"job {JOB} was submitted without ECS Exec: deploy the stack with -c ecs_exec=true "
        f"(docs/configuration.md) and submit the job again; until then, launcher logs {JOB} "
        "shows its output"
    )
    assert not plugin.exists()


def test_a_node_that_ended_in_a_running_job_is_refused(aws, plugin):
    client, batch, _ = aws
    batch.add_response("describe_jobs", {"jobs": [_job()]})
    batch.add_response("describe_jobs", {"jobs": [_node("SUCCEEDED")]})
    with pytest.raises(UsageError, match=f"^node 1 of job {JOB} is SUCCEEDED; its output"):
        BatchBackend(client).enter(JOB, 1, ["sh"])


def test_an_ended_job_costs_one_call_and_opens_nothing(aws, plugin):
    client, batch, _ = aws
    batch.add_response("describe_jobs", {"jobs": [_job("FAILED")]})
    with pytest.raises(UsageError, match="has ended"):
        BatchBackend(client).enter(JOB, 0, ["sh"])


def test_no_plugin_is_one_line_saying_where_to_get_it_before_any_call(aws, monkeypatch):
    client, _, _ = aws  # no response queued: a call would fail the test
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(LauncherError) as missing:
        BatchBackend(client).enter(JOB, 0, ["sh"])
    assert missing.value.exit_code == 1 and "\n" not in str(missing.value)
    assert "session-manager-plugin" in str(missing.value)
    assert "session-manager-working-with-install-plugin.html" in str(missing.value)


# --- the job definition and the stack output --------------------------------------------------


def _spec(**kw) -> JobSpec:
    values = {"name": "demo", "command": ("sh", "-c", "echo hi"), "image": "img", "nodes": 2}
    return JobSpec(**(values | kw))


@pytest.mark.parametrize("nodes", [1, 2])
def test_ecs_exec_on_sets_enable_execute_command_in_every_container(nodes):
    """Batch ContainerProperties.enableExecuteCommand, in a container job's properties and in
    each node range's (botocore's batch model has it in ContainerProperties, which both use);
    with initProcessEnabled, which the ECS guide (ecs-exec.html) recommends so that the SSM
    agent's child processes are reaped. Off, the request is what it was before the setting."""
    on = dataclasses.replace(cluster_info(), ecs_exec=True)
    requests = jobdef.build(_spec(nodes=nodes), on)
    assert_valid("batch", "RegisterJobDefinition", requests.register)
    register = requests.register
    containers = (
        [register["containerProperties"]]
        if nodes == 1
        else [r["container"] for r in register["nodeProperties"]["nodeRangeProperties"]]
    )
    for container in containers:
        assert container["enableExecuteCommand"] is True
        assert container["linuxParameters"]["initProcessEnabled"] is True
    off = jobdef.build(_spec(nodes=nodes), cluster_info()).register
    assert "enableExecuteCommand" not in json.dumps(off)
    assert off["jobDefinitionName"] != register["jobDefinitionName"]


def test_a_stack_from_before_the_output_reads_as_ecs_exec_off():
    outputs = {k.value: k.example for k in OutputKey}
    assert ClusterInfo.from_outputs("S", outputs).ecs_exec is False
    del outputs[OutputKey.ECS_EXEC.value]
    assert ClusterInfo.from_outputs("S", outputs).ecs_exec is False
    outputs[OutputKey.ECS_EXEC.value] = "true"
    assert ClusterInfo.from_outputs("S", outputs).ecs_exec is True


@pytest.mark.cdk
def test_the_stack_setting_grants_the_channels_keeps_the_endpoint_and_says_so(
    tmp_path_factory, synth_default
):
    """ecs_exec on: the job role may open the four ssmmessages channels (ECS guide,
    ecs-exec.html, "IAM permissions required for ECS Exec"), the ssmmessages interface
    endpoint is there without NAT ("you must create the interface Amazon VPC endpoints for
    Systems Manager Session Manager"), and the output EcsExec is true. Off: none of the
    grants, the output false (the endpoint stays for Session Manager to the nodes)."""
    on = synth_templates(tmp_path_factory, ecs_exec=True)  # test_day2's example, too
    off = synth_default.templates()

    def job_role_actions(templates) -> set[str]:
        found: set[str] = set()
        for resource in templates["EfaBatch"]["Resources"].values():
            if resource["Type"] != "AWS::IAM::Policy":
                continue
            roles = json.dumps(resource["Properties"]["Roles"])
            if "JobRole" not in roles or "CopyJobRole" in roles:
                continue
            for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                actions = statement["Action"]
                found |= {actions} if isinstance(actions, str) else set(actions)
        return found

    assert set(SSM_MESSAGES) <= job_role_actions(on)
    assert not set(SSM_MESSAGES) & job_role_actions(off)
    outputs = on["EfaBatch"]["Outputs"]
    assert outputs[OutputKey.ECS_EXEC.value]["Value"] == "true"
    assert off["EfaBatch"]["Outputs"][OutputKey.ECS_EXEC.value]["Value"] == "false"
    endpoints = [
        json.dumps(r["Properties"]["ServiceName"])
        for r in on["EfaBatch-Network"]["Resources"].values()
        if r["Type"] == "AWS::EC2::VPCEndpoint"
    ]
    assert any("ssmmessages" in e for e in endpoints)
    assert set(exec_endpoints(dataclasses.replace(_config(), ecs_exec=False))) == set()


def _config():
    from infra.config import load
    from tests.conftest import cdk_context

    return load(cdk_context())


# --- local, for real ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def running(docker_engine, busybox_base, tmp_path_factory):
    """A two-node local job that sleeps until cancelled, and the environment to reach it."""
    state = tmp_path_factory.mktemp("exec-state")
    env = {
        **os.environ,
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_LOCAL_STATE": str(state),
        "AWS_REGION": "us-east-1",
    }
    # LocalBackend and its Store read these from this process's environment.
    with mock.patch.dict(os.environ, {k: env[k] for k in ("DOCKER_HOST", "LAUNCHER_LOCAL_STATE")}):
        requests = jobdef.build(
            _spec(
                command=("sh", "-c", "sleep 600"),
                image=busybox_base,
                rendezvous_port=rendezvous_port(),
            ),
            cluster_info(),
        )
        efs = tmp_path_factory.mktemp("exec-efs")
        job_id = local.LocalBackend("q", str(efs)).schedule(requests)
        deadline = time.monotonic() + 60
        while local.LocalBackend().describe(job_id).state is not JobState.RUNNING:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        yield job_id, env
        with contextlib.suppress(UsageError):  # the last test ended it
            local.LocalBackend().cancel(job_id)


def test_a_command_in_the_main_node_and_in_node_1(running):
    job_id, env = running
    hi = cli.launcher("exec", job_id, "--", "echo", "hi", env=env, timeout=60)
    assert (hi.returncode, hi.stdout, hi.stderr) == (0, "hi\n", "")
    node = cli.launcher(
        "exec",
        job_id,
        "--node",
        "1",
        "--",
        "sh",
        "-c",
        "echo $AWS_BATCH_JOB_NODE_INDEX; exit 3",
        env=env,
    )
    assert (node.returncode, node.stdout) == (3, "1\n")  # node 1, its exit status passed on
    piped = subprocess.run(
        [*cli.LAUNCHER, "exec", job_id, "--", "cat"],
        input="through stdin\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (piped.returncode, piped.stdout) == (0, "through stdin\n")


def test_a_shell_under_a_terminal(running):
    """No command: a shell (sh: busybox has no bash) on a pseudo-terminal, as docker exec -it
    gives it; it reads what is typed, runs it and leaves at exit with its status."""
    job_id, env = running
    main, child = pty.openpty()
    process = subprocess.Popen(
        [*cli.LAUNCHER, "exec", job_id], stdin=child, stdout=child, stderr=child, env=env
    )
    os.close(child)
    os.write(main, b"echo ON-$((6*7)); exit 5\n")
    seen = b""
    deadline = time.monotonic() + 60
    while b"ON-42" not in seen or process.poll() is None:
        assert time.monotonic() < deadline, seen
        if select.select([main], [], [], 0.5)[0]:
            try:
                seen += os.read(main, 65536)
            except OSError:  # the terminal's last user has gone
                break
    assert process.wait(timeout=30) == 5
    os.close(main)
    assert b"ON-42" in seen and b"echo ON-$((6*7))" in seen  # echoed: a terminal's line mode


def test_an_ended_job_is_refused_in_one_line(running):
    job_id, env = running
    local.LocalBackend().cancel(job_id)
    local.LocalBackend().wait(job_id, timeout=60)
    ended = cli.launcher("exec", job_id, "--", "true", env=env, timeout=60)
    assert ended.returncode == 2
    assert ended.stderr.count("\n") == 1 and f"job {job_id} has ended (FAILED)" in ended.stderr
