"""A Capacity Block's window (launcher.capacity): shown by outputs and status, a timeout past it
refused, its end and the checkpoint signal given to every node, and the prelude's timer sending
the signal, on the emulated stack with four pools (tests/conftest.py ``POOLS``: train runs in
Capacity Block cr-0123456789abcdef0) and on the local Docker engine.

EC2 ends a block's instances from 30 minutes before its end: "Forty minutes before your
Capacity Block reservation ends, you receive another EventBridge event that tells you that any
instances running in the reservation will begin to terminate in 10 minutes" (EC2 user guide,
capacity-blocks-monitor.html)."""

from __future__ import annotations

import json
import os
import time

import pytest

from devenv import moto_gaps
from devenv.clusters import cluster_info
from devenv.emulator import ACCOUNT, REGION
from launcher import capacity, jobdef, jobfile, prelude
from launcher.cluster import ClusterInfo
from launcher.errors import RemoteError, UsageError
from launcher.jobspec import JobSpec, parse_lead, parse_signal
from launcher.outputs import OutputKey
from tests.support import cli

BLOCK = "cr-0123456789abcdef0"
NOW = 1_800_000_000.0  # 2027-01-15 08:00 UTC
HOUR = 3600


def window(start: float = NOW - HOUR, end: float = NOW + 5 * HOUR, state: str = "active"):
    return capacity.Window(BLOCK, start, end, state)


def spec(**kwargs) -> JobSpec:
    return JobSpec(name="train", command=("python", "train.py"), image="base:1", **kwargs)


# --- the window in words, and the timeout it allows --------------------------------------------


def test_the_window_in_words():
    assert window().text(NOW) == "active, 5h00m left (ends 2027-01-15 13:00 UTC)"
    assert window(NOW + 3 * HOUR, NOW + 9 * HOUR).text(NOW).startswith("starts in 3h00m (")
    assert window(end=NOW - 1).text(NOW) == "ended (2027-01-15 07:59 UTC)"
    assert window(state="cancelled").text(NOW).startswith("ended")


def test_the_longest_timeout_ends_30_minutes_before_the_block():
    """From now while the block runs; from its start before it starts (the job waits for it)."""
    assert window().longest_timeout(NOW) == 5 * HOUR - capacity.EC2_LEAD_SECONDS
    assert window(NOW + HOUR, NOW + 3 * HOUR).longest_timeout(NOW) == 2 * HOUR - 1800
    capacity.check_timeout(
        spec(timeout_seconds=4 * HOUR + 1800), window(), NOW, "train"
    )  # exactly: fine
    capacity.check_timeout(spec(), window(), NOW, "train")  # no timeout: nothing to check
    capacity.check_timeout(
        spec(timeout_seconds=9 * HOUR), window(end=NOW - 1), NOW, "train"
    )  # ended


def test_a_timeout_past_the_window_is_refused_naming_the_end_and_the_longest_allowed():
    with pytest.raises(UsageError) as refused:
        capacity.check_timeout(spec(timeout_seconds=5 * HOUR), window(), NOW, "train")
    assert str(refused.value) == (
        "--timeout 5h00m: pool train runs in Capacity Block cr-0123456789abcdef0, which ends "
        "2027-01-15 13:00 UTC; EC2 ends its instances from 2027-01-15 12:30 UTC, so the longest "
        "timeout from now is 4h30m"
    )
    late = window(end=NOW + 1800 + 30)
    with pytest.raises(UsageError, match="too little is left of it for any timeout"):
        capacity.check_timeout(spec(timeout_seconds=60), late, NOW, "train")


# --- what every node gets, per submit -------------------------------------------------------


def test_every_node_gets_the_end_and_the_checkpoint_time_in_the_submit_not_the_definition():
    """Beside the node watch's token in each node range's overrides (a gang), or in the
    container's (one node): definitions are named by their content and shared (jobdef)."""
    gang = spec(nodes=2, checkpoint_signal="SIGUSR2", checkpoint_lead_seconds=300)
    env = capacity.environment(gang, window())
    assert env == {
        "LAUNCHER_CAPACITY_BLOCK": BLOCK,
        "LAUNCHER_WINDOW_END": str(int(NOW + 5 * HOUR)),
        "LAUNCHER_CHECKPOINT_SIGNAL": "USR2",
        "LAUNCHER_CHECKPOINT_AT": str(int(NOW + 5 * HOUR) - 1800 - 300),
    }
    plain = jobdef.build(gang, cluster_info())
    timed = capacity.timed(plain, env)
    assert timed.register == plain.register
    (node_range,) = timed.submit["nodeOverrides"]["nodePropertyOverrides"]
    names = [e["name"] for e in node_range["containerOverrides"]["environment"]]
    assert names[0] == prelude.WATCH_TOKEN_ENV and set(env) <= set(names)
    one = capacity.timed(jobdef.build(spec(), cluster_info()), env)
    assert one.submit["containerOverrides"]["environment"][0]["name"] == "LAUNCHER_CAPACITY_BLOCK"
    assert capacity.timed(plain, {}) is plain


def test_the_prelude_reads_what_the_launcher_sets():
    for name in (
        capacity.BLOCK_ENV,
        capacity.WINDOW_END_ENV,
        capacity.SIGNAL_ENV,
        capacity.CHECKPOINT_AT_ENV,
    ):
        assert name in prelude.CHECKPOINT_TIMER, name
    assert f"- {capacity.EC2_LEAD_SECONDS}))" in prelude.CHECKPOINT_TIMER
    assert prelude.CHECKPOINT_TIMER in prelude.SCRIPT


@pytest.mark.parametrize("given", ["USR1", "SIGUSR1", "usr1", " sigusr1 "])
def test_a_signal_by_name_with_or_without_sig(given):
    assert parse_signal(given) == "USR1"


@pytest.mark.parametrize("given", ["10", "KILL", "SIGSTOP", ""])
def test_other_signals_are_refused_in_one_line(given):
    with pytest.raises(UsageError, match=r"^--checkpoint-signal .*: allowed USR1, USR2, INT"):
        parse_signal(given)


def test_the_lead_is_a_duration_with_no_lower_bound():
    assert (parse_lead("10m"), parse_lead("10s"), parse_lead("0")) == (600, 10, 0)
    with pytest.raises(UsageError, match="--checkpoint-lead 'soon'"):
        parse_lead("soon")
    with pytest.raises(UsageError, match="--checkpoint-lead -1"):
        spec(checkpoint_lead_seconds=-1)


def test_the_job_file_holds_the_signal_and_the_lead(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(
        "command: [python, train.py]\ncheckpoint_signal: SIGUSR2\ncheckpoint_lead: 90s\n"
    )
    options = jobfile.load(path).options
    assert (options["checkpoint_signal"], options["checkpoint_lead_seconds"]) == ("USR2", 90)
    path.write_text("command: [python, train.py]\ncheckpoint_signal: KILL\n")
    with pytest.raises(UsageError, match="checkpoint_signal: allowed USR1"):
        jobfile.load(path)


# --- the pool knows its block; reading it -----------------------------------------------------


def test_an_older_stacks_pools_without_the_block_still_parse():
    """Stacks deployed before the field: their Pools output lacks the key (and CDK leaves nulls
    out); the block is then unknown, not an error."""
    old = json.loads(OutputKey.POOLS.example)
    for pool in old:
        del pool["capacity_block_id"]
    outputs = {k.value: k.example for k in OutputKey} | {"Pools": json.dumps(old)}
    info = ClusterInfo.from_outputs("Old", outputs)
    assert [p.capacity_block_id for p in info.pools] == [None, None]
    new = [dict(p, capacity_block_id=BLOCK) for p in old]
    info = ClusterInfo.from_outputs("New", outputs | {"Pools": json.dumps(new)})
    assert info.current_pool.capacity_block_id == BLOCK


class _Aws:
    def __init__(self, answer):
        self.answer = answer

    def capacity_reservation(self, block_id):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_reading_the_window_never_fails_the_command():
    """An identity without ec2:DescribeCapacityReservations (EC2 answers
    UnauthorizedOperation) gets a note naming the permission; a group of blocks is not read."""
    found = capacity.read(
        _Aws(
            {
                "CapacityReservationId": BLOCK,
                "StartDate": "2027-01-15T07:00:00Z",
                "EndDate": "2027-01-15T13:00:00Z",
                "State": "active",
            }
        ),
        BLOCK,
    )
    assert found.window == window()
    denied = RemoteError(
        "AWS DescribeCapacityReservations failed: UnauthorizedOperation: You are not authorized"
    )
    note = capacity.read(_Aws(denied), BLOCK)
    assert note.text(NOW) == (
        f"Capacity Block {BLOCK}: window not shown: this AWS identity may not call "
        "ec2:DescribeCapacityReservations"
    )
    group = f"arn:aws:resource-groups:{REGION}:{ACCOUNT}:group/blocks"
    assert "a group of Capacity Blocks" in capacity.read(_Aws(denied), group).text(NOW)


# --- the emulated stack: outputs, status, the refusal --------------------------------------------

IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/base@sha256:" + "a" * 64


@pytest.fixture(scope="module")
def stack(moto_server, synth_pools):
    moto_server.reset()
    moto_server.deploy(synth_pools.outdir, synth_pools.stack_names)
    return synth_pools.config.stack_name


def launcher(server, stack, *args, env=None):
    return cli.launcher(
        *args, env={**os.environ, **server.env, "LAUNCHER_STACK": stack, **(env or {})}
    )


def test_the_window_is_shown_checked_and_sent_on_the_emulated_stack(moto_server, stack):
    now = time.time()
    moto_gaps.capacity_block(BLOCK, now - HOUR, now + 2 * HOUR)
    out = launcher(moto_server, stack, "outputs")
    assert out.returncode == 0, out.stderr
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("capacity (train)")]
    assert f"Capacity Block {BLOCK}: active, 1h59m left" in line or "2h00m left" in line

    run = ("run", "--no-workspace", "--image", IMAGE, "--share-id", "vision")
    refused = launcher(moto_server, stack, *run, "--timeout", "2h", "--", "python", "prep.py")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith(
        "launcher: error: --timeout 2h00m: pool train runs in Capacity "
    )
    assert "so the longest timeout from now is 1h29m" in refused.stderr
    batch = moto_server.client("batch")
    assert batch.describe_job_definitions()["jobDefinitions"] == []  # nothing registered

    ok = launcher(moto_server, stack, *run, "--timeout", "1h", "--", "python", "prep.py")
    assert ok.returncode == 0, ok.stderr
    job_id = ok.stdout.strip()
    status = launcher(moto_server, stack, "status", job_id)
    assert f"  capacity: Capacity Block {BLOCK}: active" in status.stdout

    dry = launcher(moto_server, stack, *run, "--dryrun", "--checkpoint-lead", "5m", "--", "x")
    env = {
        e["name"]: e["value"]
        for e in json.loads(dry.stdout)["submitJob"]["containerOverrides"]["environment"]
    }
    assert int(env["LAUNCHER_CHECKPOINT_AT"]) == int(env["LAUNCHER_WINDOW_END"]) - 1800 - 300


# --- the local Docker engine: the signal reaches the command --------------------------------------


def _local_run(moto_server, stack, docker_engine, busybox_base, tmp_path, *flags, command):
    """``launcher run --local --follow`` of ``sh -c COMMAND`` in the vision pool (a Capacity
    Block's) on the busybox base; the process and the seconds it took."""
    env = {
        "DOCKER_HOST": docker_engine.host,
        "LAUNCHER_LOCAL_STATE": str(tmp_path / "state"),
        "LAUNCHER_LOCAL_EFS": str(tmp_path / "efs"),
    }
    started = time.time()
    result = launcher(
        moto_server,
        stack,
        "run",
        "--local",
        "--follow",
        "--no-workspace",
        "--image",
        busybox_base,
        "--share-id",
        "vision",
        *flags,
        "--",
        "sh",
        "-c",
        command,
        env=env,
    )
    return result, time.time() - started


def test_the_command_gets_its_signal_before_the_block_ends(
    moto_server, stack, docker_engine, busybox_base, tmp_path
):
    """The block ends 30 min + 20 s from now and the lead is 10 s: the command hears SIGUSR1
    about 10 s into the job, from the same prelude that runs on AWS."""
    moto_gaps.capacity_block(BLOCK, time.time() - HOUR, time.time() + 1800 + 20)
    command = (
        'trap "echo checkpointing; exit 0" USR1; i=0; '
        "while [ $i -lt 400 ]; do sleep 0.1; i=$((i+1)); done; echo no signal; exit 1"
    )
    result, seconds = _local_run(
        moto_server,
        stack,
        docker_engine,
        busybox_base,
        tmp_path,
        "--checkpoint-lead",
        "10s",
        command=command,
    )
    assert result.returncode == 0, result.stderr
    assert "[node 0] checkpointing" in result.stderr and "no signal" not in result.stderr
    assert f"launcher: Capacity Block {BLOCK} ends at " in result.stderr
    assert ": sent SIGUSR1 to the command (pid " in result.stderr
    assert seconds < 40


def test_a_command_that_dies_of_the_signal_is_tried_again(
    moto_server, stack, docker_engine, busybox_base, tmp_path
):
    """A command that does not catch the signal dies of it (exit 138 for SIGUSR1), which the
    retry rules would take for an application failure and end the job; the prelude ends the
    node with 75 instead, as EC2's ending of the instance ("Host EC2") would have been retried."""
    moto_gaps.capacity_block(BLOCK, time.time() - HOUR, time.time() + 1800 + 5)
    result, seconds = _local_run(
        moto_server,
        stack,
        docker_engine,
        busybox_base,
        tmp_path,
        "--retries",
        "1",
        "--checkpoint-lead",
        "1s",
        command="sleep 30; echo never",
    )
    assert result.returncode == 1, result.stderr
    assert ": sent SIGUSR1 to the command (pid " in result.stderr
    assert (
        "launcher: the command ended with exit code 138 after the checkpoint signal: ending with "
        "exit code 75 so that the job is tried again" in result.stderr
    )
    assert "never" not in result.stderr and seconds < 30
