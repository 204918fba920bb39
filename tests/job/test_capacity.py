"""A Capacity Block's window (launcher.job.capacity): shown by outputs and status, a timeout past it
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
from launcher.api import Cluster
from launcher.api.capacity_block import read_block
from launcher.errors import RemoteError, UsageError
from launcher.job import capacity, jobdef, jobfile
from launcher.job.jobspec import JobSpec, parse_lead, parse_signal
from launcher.local import containers
from launcher.node import prelude
from launcher.stack.cluster import ClusterInfo, from_stack
from launcher.stack.outputs import OutputKey
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
    env = capacity.environment(gang, window(), "train-ce", "ondemand-ce")
    assert env == {
        "LAUNCHER_CAPACITY_BLOCK": BLOCK,
        "LAUNCHER_WINDOW_START": str(int(NOW - HOUR)),
        "LAUNCHER_WINDOW_END": str(int(NOW + 5 * HOUR)),
        "LAUNCHER_CHECKPOINT_SIGNAL": "USR2",
        "LAUNCHER_CHECKPOINT_AT": str(int(NOW + 5 * HOUR) - 1800 - 300),
        "LAUNCHER_CAPACITY_BLOCK_CE": "train-ce",
        "LAUNCHER_FALLBACK_CE": "ondemand-ce",
    }
    # A stack too old to name its compute environments, a pool without a fallback: left out.
    assert capacity.BLOCK_CE_ENV not in capacity.environment(gang, window())
    plain = jobdef.build(gang, cluster_info())
    timed = jobdef.with_submit_environment(plain, env)
    assert timed.register == plain.register
    (node_range,) = timed.submit["nodeOverrides"]["nodePropertyOverrides"]
    names = [e["name"] for e in node_range["containerOverrides"]["environment"]]
    assert names[0] == prelude.WATCH_TOKEN_ENV and set(env) <= set(names)
    one = jobdef.with_submit_environment(jobdef.build(spec(), cluster_info()), env)
    assert one.submit["containerOverrides"]["environment"][0]["name"] == "LAUNCHER_CAPACITY_BLOCK"
    assert jobdef.with_submit_environment(plain, {}) is plain


def test_the_prelude_reads_what_the_launcher_sets():
    for name in (
        capacity.BLOCK_ENV,
        capacity.WINDOW_END_ENV,
        capacity.SIGNAL_ENV,
        capacity.CHECKPOINT_AT_ENV,
        capacity.BLOCK_CE_ENV,
        capacity.FALLBACK_CE_ENV,
    ):
        assert name in prelude.CHECKPOINT_TIMER, name
    assert f"- {capacity.EC2_LEAD_SECONDS}))" in prelude.CHECKPOINT_TIMER
    assert prelude.CHECKPOINT_TIMER in prelude.SCRIPT


def test_an_attempt_is_placed_in_the_block_while_it_can_take_it_and_on_the_fallback_otherwise():
    """Where the local backend places each attempt (its AWS_BATCH_CE_NAME), as Batch would: the
    pool's queue tries the block's compute environment first and the fallback's when the first
    cannot run the job ("Compute environments are tried in ascending order", Batch API,
    ComputeEnvironmentOrder; infra.compute_pool ``add_queue``), and the block runs nothing
    before its start or once EC2 ends its instances, 30 minutes before its end."""
    env = capacity.environment(spec(), window(), "train-ce", "ondemand-ce")
    stop = NOW + 5 * HOUR - capacity.EC2_LEAD_SECONDS
    assert capacity.placement(env, NOW) == "train-ce"
    assert capacity.placement(env, stop - 1) == "train-ce"
    assert capacity.placement(env, stop) == "ondemand-ce"  # EC2 is ending the block's instances
    assert capacity.placement(env, NOW - 2 * HOUR) == "ondemand-ce"  # before the block starts
    # Without a fallback the job can only wait for the block; locally it runs there.
    assert capacity.placement(capacity.environment(spec(), window(), "train-ce"), stop) == (
        "train-ce"
    )
    assert capacity.placement(capacity.environment(spec(), window()), NOW) is None  # older stack
    node = {"environment": [{"name": k, "value": v} for k, v in env.items()]}
    assert containers.placement(node, stop) == "ondemand-ce"
    assert containers.placement({"environment": []}, NOW) == "local"  # outside any block


def _block_cluster(*, names: bool) -> Cluster:
    """The example stack with its default pool in the block and the cpu pool as its fallback;
    ``names``: whether its Pools output names the compute environments (stacks since the field)."""
    pools = json.loads(OutputKey.POOLS.example)
    pools[0] |= {"capacity_block_id": BLOCK, "fallback": "cpu"}
    if not names:
        for pool in pools:
            del pool["compute_environment_name"]
    outputs = {k.value: k.example for k in OutputKey} | {"Pools": json.dumps(pools)}
    return Cluster(ClusterInfo.from_outputs("EfaBatch", outputs))


def test_the_nodes_learn_which_compute_environment_is_the_blocks_and_a_late_job_is_told():
    """The timer compares the attempt's compute environment with the block's, so every node gets
    both names from the Pools output. A job whose checkpoint time has passed at submission gets
    no signal, and the launcher says so; a stack too old to name the compute environments gets
    the signal on the fallback too, and the launcher says to deploy it again."""
    said: list[str] = []
    now = time.time()
    env = _block_cluster(names=True).checkpoint_environment(
        spec(), window(now - HOUR, now + 5 * HOUR), lambda e: said.append(e.text)
    )
    pools = {p["name"]: p for p in json.loads(OutputKey.POOLS.example)}
    assert env[capacity.BLOCK_CE_ENV] == pools["default"]["compute_environment_name"]
    assert env[capacity.FALLBACK_CE_ENV] == pools["cpu"]["compute_environment_name"]
    assert said == []

    late = window(now - HOUR, now + 1800 + 60)  # EC2 ends the instances in a minute
    _block_cluster(names=True).checkpoint_environment(spec(), late, lambda e: said.append(e.text))
    (line,) = said
    assert line.startswith(f"warning: Capacity Block {BLOCK}: the checkpoint time (")
    assert line.endswith(
        ") has passed, so this job gets no checkpoint signal: in the block it runs until EC2 "
        "ends its instances"
    )
    said.clear()
    env = _block_cluster(names=False).checkpoint_environment(
        spec(), window(now - HOUR, now + 5 * HOUR), lambda e: said.append(e.text)
    )
    assert capacity.BLOCK_CE_ENV not in env and capacity.CHECKPOINT_AT_ENV in env
    assert said == [
        "warning: stack EfaBatch does not name pool default's compute environment (it was "
        "deployed by an older version), so the checkpoint signal also reaches an attempt that "
        "runs on the fallback pool before the checkpoint time; deploy the stack again to fix that"
    ]


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
    found = read_block(
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
    note = read_block(_Aws(denied), BLOCK)
    assert note.text(NOW) == (
        f"Capacity Block {BLOCK}: window not shown: this AWS identity may not call "
        "ec2:DescribeCapacityReservations"
    )
    group = f"arn:aws:resource-groups:{REGION}:{ACCOUNT}:group/blocks"
    assert "a group of Capacity Blocks" in read_block(_Aws(denied), group).text(NOW)


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
    names = {p.name: p.compute_environment_name for p in _pools(moto_server, stack)}
    assert (env["LAUNCHER_CAPACITY_BLOCK_CE"], env["LAUNCHER_FALLBACK_CE"]) == (
        names["train"],
        names["ondemand"],
    )
    # A lead longer than the 1h30m left before EC2 ends the instances: the time has passed.
    late = launcher(moto_server, stack, *run, "--dryrun", "--checkpoint-lead", "2h", "--", "x")
    assert late.returncode == 0, late.stderr
    assert f"warning: Capacity Block {BLOCK}: the checkpoint time (" in late.stderr
    assert "has passed, so this job gets no checkpoint signal" in late.stderr


def test_the_pools_output_names_each_pools_compute_environment_as_batch_does(moto_server, stack):
    """The name Batch sets AWS_BATCH_CE_NAME to in a job placed there ("the name of the compute
    environment where your job is placed", Batch user guide, job_env_vars.html), read from the
    deployed stack: each pool's queue tries its own compute environment first, and the train
    pool's (the block's) queue the ondemand pool's after it."""
    cf = moto_server.client("cloudformation")
    (described,) = cf.describe_stacks(StackName=stack)["Stacks"]
    info = from_stack(described)
    batch = moto_server.client("batch")
    names = {
        c["computeEnvironmentArn"]: c["computeEnvironmentName"]
        for c in batch.describe_compute_environments()["computeEnvironments"]
    }
    queues = {q["jobQueueName"]: q for q in batch.describe_job_queues()["jobQueues"]}
    for pool in info.pools:
        order = sorted(queues[pool.queue_name]["computeEnvironmentOrder"], key=lambda o: o["order"])
        fallback = info.pool(pool.fallback).current_pool if pool.fallback else None
        assert [names[o["computeEnvironment"]] for o in order] == [
            pool.compute_environment_name,
            *([fallback.compute_environment_name] if fallback else []),
        ]
    assert len({p.compute_environment_name for p in info.pools}) == len(info.pools)
    assert info.pool("train").current_pool.fallback == "ondemand"


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


def test_a_signalled_attempt_is_tried_again_and_the_retry_runs_to_its_end(
    moto_server, stack, docker_engine, busybox_base, tmp_path
):
    """The whole life of a job in the block, on the local engine with the stack's retry rules.
    Attempt 1 runs in the block's compute environment, gets SIGUSR1 at the checkpoint time (the
    moment EC2 starts ending the block's instances, with no lead), saves its step and exits 1,
    which the prelude turns into 75: tried again. Attempt 2 starts after that moment, where
    Batch places it on the fallback pool (the block can no longer take it): no signal, and it
    resumes from the checkpoint and succeeds. The checkpoint values ride in the SubmitJob's
    overrides, which every attempt gets (SubmitJob.retryStrategy: "The retry strategy to use
    for failed jobs from this SubmitJob operation"); before, attempt 2 was signalled as it
    started and ended 75 too, and the job failed once its attempts ran out."""
    moto_gaps.capacity_block(BLOCK, time.time() - HOUR, time.time() + 1800 + 6)
    # A trainer: it saves its step when signalled (in every attempt, as a real one would) and
    # resumes from it; a resumed run has 1 s of work left.
    command = (
        'step="$LAUNCHER_CHECKPOINT_DIR/step"; n=300; '
        'trap \'echo 7 > "$step"; echo "saved step 7"; exit 1\' USR1; '
        'if [ -e "$step" ]; then echo "resumed from step $(cat "$step") on $AWS_BATCH_CE_NAME"; '
        "n=10; fi; i=0; while [ $i -lt $n ]; do sleep 0.1; i=$((i+1)); done; "
        "if [ $n = 10 ]; then echo finished; exit 0; fi; echo never; exit 1"
    )
    result, seconds = _local_run(
        moto_server,
        stack,
        docker_engine,
        busybox_base,
        tmp_path,
        "--retries",
        "2",
        "--checkpoint-lead",
        "0s",
        command=command,
    )
    assert result.returncode == 0, result.stderr
    err = result.stderr
    assert err.count(": sent SIGUSR1 to the command (pid ") == 1
    assert err.count("[node 0] saved step 7") == 1 and "never" not in err
    assert (
        "launcher: the command ended with exit code 1 after the checkpoint signal: ending with "
        "exit code 75 so that the job is tried again" in err
    )
    names = {p.name: p.compute_environment_name for p in _pools(moto_server, stack)}
    assert (
        f": no checkpoint signal: this attempt runs in compute environment {names['ondemand']} "
        f"(the pool's fallback), not in the block's ({names['train']})" in err
    )
    assert f"[node 0] resumed from step 7 on {names['ondemand']}" in err
    assert "[node 0] finished" in err
    assert seconds < 40


def test_a_job_started_after_its_checkpoint_time_runs_to_its_own_end(
    moto_server, stack, docker_engine, busybox_base, tmp_path
):
    """EC2 ends the block's instances in 2 minutes (30 minutes before the block's end, as
    capacity-blocks-monitor.html says, above) and the lead is 5: the checkpoint time has
    passed at submission. The launcher says so, the job runs in the block's compute environment
    (it can still take it) and its command is never signalled: it runs to its end and the job
    succeeds. Before, the timer signalled it as it started and every attempt ended with 75."""
    moto_gaps.capacity_block(BLOCK, time.time() - HOUR, time.time() + 1800 + 120)
    command = (
        "trap 'echo signalled; exit 1' USR1; i=0; "
        'while [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done; echo "ran on $AWS_BATCH_CE_NAME"'
    )
    result, _ = _local_run(
        moto_server,
        stack,
        docker_engine,
        busybox_base,
        tmp_path,
        "--checkpoint-lead",
        "5m",
        command=command,
    )
    assert result.returncode == 0, result.stderr
    err = result.stderr
    assert f"warning: Capacity Block {BLOCK}: the checkpoint time (" in err
    assert ": no checkpoint signal: this attempt started after the checkpoint time (" in err
    names = {p.name: p.compute_environment_name for p in _pools(moto_server, stack)}
    assert f"[node 0] ran on {names['train']}" in err
    assert "signalled" not in err and "sent SIGUSR1" not in err


def _pools(moto_server, stack):
    cf = moto_server.client("cloudformation")
    (described,) = cf.describe_stacks(StackName=stack)["Stacks"]
    return from_stack(described).pools
