"""The CLI speaks as the tools users know (Docker, kubectl, gh, the AWS CLI): no prefix
matching, ``--version``, help on every option and examples on every command, one
``-o/--output`` switch, ``list`` as a table with colour only on a terminal, ``wait`` and
``run --follow`` exiting with the job's result, one-line errors, shell completion."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest

from launcher.aws.explain import explain
from launcher.cli import tables
from launcher.cli.main import COMMANDS, DISTRIBUTION, parser
from launcher.job.info import CANCEL_REASON, JobInfo, JobState
from tests.support import cli
from tests.support.terminal import under_a_terminal

LAUNCHER = shutil.which("launcher") or os.path.join(os.path.dirname(sys.executable), "launcher")
JOB = "00000000-0000-0000-0000-000000000000"
ESCAPE = "\x1b["
# Commands that print data, and so take -o json (completion prints a script).
# exec hands the terminal to the node's command: it prints no data of its own.
DATA_COMMANDS = sorted(c.name for c in COMMANDS if c.name not in ("completion", "exec"))


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    top = parser()
    (action,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    return {"": top, **action.choices}


def _offline_env(**extra: str) -> dict[str, str]:
    """No AWS credentials anywhere: a command that reached AWS would fail, not hang."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "LAUNCHER_", "_ARGCOMPLETE", "COMP_"))
    }
    return {**env, "AWS_EC2_METADATA_DISABLED": "true", "HOME": "/nonexistent", **extra}


# --- the front door -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "unknown"),
    [
        (["run", "--node", "2", "--", "true"], "--node"),
        (["run", "--gpus", "4", "--", "true"], "--gpus"),
        (["list", "--al"], "--al"),
        (["logs", JOB, "--foll"], "--foll"),
    ],
)
def test_no_prefix_matching_and_one_line_errors_without_the_usage(args, unknown):
    """``--node 2`` is not ``--nodes 2``: argparse's prefix matching would take it silently."""
    result = cli.launcher(*args, env=_offline_env(), timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"launcher: error: unrecognized arguments: {unknown}")
    assert line.endswith(f"(see launcher {args[0]} --help)")
    assert "usage:" not in result.stderr


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["list", "-o", "yaml"],
            "launcher: error: argument -o/--output: invalid choice: 'yaml'; allowed: "
            "table, json (see launcher list --help)",
        ),
        (
            ["lst"],
            "launcher: error: unknown command 'lst'; did you mean list? (see launcher --help)",
        ),
        (
            ["status"],
            "launcher: error: the following arguments are required: job "
            "(see launcher status --help)",
        ),
        (
            ["wait", JOB, "--timeout", "soon"],
            "launcher: error: --timeout 'soon': expected a duration like 90m, 2h or 30s",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, line):
    result = cli.launcher(*args, env=_offline_env(), timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", line + "\n")


def test_version_and_bare_launcher_prints_the_help():
    shown = cli.launcher("--version", env=_offline_env(), timeout=60)
    assert (shown.returncode, shown.stdout) == (0, f"launcher {version(DISTRIBUTION)}\n")
    bare = cli.launcher(env=_offline_env(), timeout=60)
    assert bare.returncode == 0 and bare.stderr == ""
    assert bare.stdout == parser().format_help()
    assert bare.stdout.startswith("usage: launcher ")


def test_help_imports_no_table_completion_or_aws_library():
    """``launcher --help`` stays fast (under 0.2 s; bench/launcher_calls.py times it): rich,
    argcomplete and boto3 are imported by the commands that use them, never by the parser."""
    probe = (
        "import sys\n"
        "from launcher.cli import main as cli\n"
        "for name in cli.parser()._actions[-1].choices.values(): name.format_help()\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'rich', 'argcomplete', 'boto3', 'botocore', 'docker'}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "[]\n"


def test_each_command_is_found_from_its_name():
    """``launcher logs`` is ``launcher/cli/cmd_logs.py``: one module a command, named for it."""
    for command in COMMANDS:
        assert type(command).__module__ == f"launcher.cli.cmd_{command.name}", command.name


def test_every_option_has_help_and_every_command_ends_with_examples():
    for name, sub in _subparsers().items():
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
                continue
            assert action.help, f"launcher {name}: {action.option_strings or action.dest}"
        text = sub.format_help()
        assert "\nexamples:\n" in text, name
        examples = text[text.index("\nexamples:\n") :].splitlines()[2:]
        assert examples and all(line.startswith("  ") for line in examples), name
        assert any("launcher" in line and not line.strip().startswith("#") for line in examples)


def _launcher_calls(line: str) -> list[list[str]]:
    """The ``launcher ...`` calls in an example's shell line: in ``$(...)``, quoted or not,
    either side of ``&&`` and before a ``|``."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    segments: list[list[str]] = [[]]
    calls = []
    for token in lexer:
        if "$(" in token:  # a quoted "$(launcher ...)"
            calls.extend(_launcher_calls(token[token.index("$(") + 2 : token.rindex(")")]))
        elif token and set(token) <= set("();<>|&"):
            segments.append([])
        else:
            segments[-1].append(token)
    for words in segments:
        while words and re.match(r"^\w+=", words[0]):  # JOB=$(... before the call
            words = words[1:]
        if words[:1] == ["launcher"]:
            calls.append(words[1:])
    return calls


def test_every_example_is_a_command_the_parser_takes():
    """The examples in each ``--help`` are true commands: each parses, with no unknown word."""
    seen = 0
    for name, sub in _subparsers().items():
        text = sub.format_help()
        for line in text[text.index("\nexamples:\n") :].splitlines()[2:]:
            if line.strip().startswith("#") or "COMMAND --help" in line:
                continue
            calls = _launcher_calls(line.strip())
            assert calls, line
            for call in calls:
                args, unknown = parser().parse_known_args(call)
                assert unknown == [] and args.command_name, line
                seen += 1
            assert name in ("", parser().parse_args(calls[0]).command_name), line
    assert seen >= 2 * len(COMMANDS)


@pytest.mark.parametrize("name", DATA_COMMANDS)
def test_every_command_that_prints_data_takes_output_json_and_the_old_json(name):
    sub = _subparsers()[name]
    (output,) = [a for a in sub._actions if "--output" in a.option_strings]
    assert output.option_strings == ["-o", "--output"] and output.choices == ("table", "json")
    assert output.default == "table"
    base = {"run": ["--", "true"], "mirror": ["busybox"]}.get(
        name, [JOB] if _takes_job(sub) else []
    )
    assert parser().parse_args([name, "-o", "json", *base]).output == "json"
    assert parser().parse_args([name, "--json", *base]).output == "json"  # older scripts
    assert parser().parse_args([name, *base]).output == "table"
    assert "--json" not in sub.format_help()  # documented as -o json


def _takes_job(sub: argparse.ArgumentParser) -> bool:
    return any(a.dest == "job" for a in sub._actions)


# --- tables -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(None, "-"), (0, "0s"), (59.9, "59s"), (60, "1m"), (3599, "59m"), (3600, "1h"),
     (47 * 3600, "47h"), (48 * 3600, "2d"), (-5, "0s")],
)  # fmt: skip
def test_ages_and_durations_read_as_a_person_reads_them(seconds, shown):
    assert tables.span(seconds) == shown


def test_age_and_duration_of_a_job():
    now = 10_000.0
    assert tables.age(now - 180, now) == "3m" and tables.age(None, now) == "-"
    assert tables.duration(None, None, now) == "-"  # never started
    assert tables.duration(now - 7200, None, now) == "2h"  # still running
    assert tables.duration(now - 100, now - 40, now) == "1m"  # ended


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_table_is_plain_and_aligned_off_a_terminal_and_coloured_on_one(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    rows = [("a", "x [bold]y[/]", "SUCCEEDED"), ("bbbb", "z", "FAILED")]
    plain = io.StringIO()
    tables.render(("ID", "NAME", "STATE"), rows, plain, styles={2: tables.STATE_STYLES})
    assert plain.getvalue() == (
        "ID    NAME          STATE\n"
        "a     x [bold]y[/]  SUCCEEDED\n"  # a cell's brackets are text, not markup
        "bbbb  z             FAILED\n"
    )
    terminal = _Terminal()
    tables.render(("ID", "NAME", "STATE"), rows, terminal, styles={2: tables.STATE_STYLES})
    assert "\x1b[32mSUCCEEDED" in terminal.getvalue() and "\x1b[31mFAILED" in terminal.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    no_colour = _Terminal()
    tables.render(("ID", "NAME", "STATE"), rows, no_colour, styles={2: tables.STATE_STYLES})
    assert no_colour.getvalue() == plain.getvalue()


def _local_jobs(state_dir: Path) -> dict[str, JobInfo]:
    """Three finished-or-waiting local job records, as the local backend writes them (no
    engine needed to list them): a SUCCEEDED one 3 h ago that ran 2 min, a FAILED one 620 s
    ago that ran 61 s, and one RUNNABLE for 330 s (ages in whole minutes there, so the three
    runs of one test see the same table while the clock goes on)."""
    from launcher.local import Record, Store

    store = Store(state_dir)
    now = int(time.time() * 1000)
    register = {
        "jobDefinitionName": "jd",
        "nodeProperties": {
            "numNodes": 2,
            "mainNode": 0,
            "nodeRangeProperties": [{"targetNodes": "0:", "container": {"image": "img"}}],
        },
    }
    made = {}
    for index, (state, age, ran) in enumerate(
        [
            (JobState.SUCCEEDED, 3 * 3600, 120),
            (JobState.FAILED, 620, 61),
            (JobState.RUNNABLE, 330, 0),
        ]
    ):
        created = now - age * 1000
        record = Record(
            job_id=f"local-{index:04d}conventions",
            name=f"train{index}",
            definition="jd",
            queue="local",
            status=state,
            created_at=created,
            register=register,
            submit={"jobName": f"train{index}"},
            efs_dir=None,
            infiniband=False,
            gpus=False,
            started_at=created + 1000 if ran else None,
            stopped_at=created + 1000 + ran * 1000 if ran else None,
        )
        store.create(record)
        made[state.value] = record.job_id
    return made


def _under_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """What a person sees from ``launcher ARGS`` in a terminal (200 columns), escape codes
    included."""
    seen = under_a_terminal([LAUNCHER, *args], {**env, "TERM": "xterm"}, columns=200)
    return seen.replace("\r\n", "\n")


def _uncoloured(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_list_as_a_person_sees_it_on_a_terminal_and_piped(tmp_path):
    jobs = _local_jobs(tmp_path / "state")
    env = _offline_env(LAUNCHER_LOCAL_STATE=str(tmp_path / "state"))
    env.pop("NO_COLOR", None)
    args = ["list", "--local", "--all"]

    seen = _under_a_terminal(args, env)
    assert ESCAPE in seen
    assert f"\x1b[32m{JobState.SUCCEEDED}" in seen  # green
    assert f"\x1b[31m{JobState.FAILED}" in seen  # red
    assert f"\x1b[33m{JobState.RUNNABLE}" in seen  # yellow: waiting
    lines = _uncoloured(seen).splitlines()
    assert re.fullmatch(r"ID +NAME +POOL +STATE +NODES +AGE +DURATION", lines[0])
    # Newest first; every column under its header (local jobs have no team or share: no
    # columns for them).
    expected = [
        (jobs["RUNNABLE"], "train2", "-", "RUNNABLE", "2", "5m", "-"),
        (jobs["FAILED"], "train1", "-", "FAILED", "2", "10m", "1m"),
        (jobs["SUCCEEDED"], "train0", "-", "SUCCEEDED", "2", r"[23]h", "2m"),
    ]
    assert len(lines) == 4
    starts = [lines[0].index(h) for h in ("ID", "NAME", "POOL", "STATE", "NODES", "AGE")]
    for line, cells in zip(lines[1:], expected, strict=True):
        assert re.fullmatch(r" +".join(cells), line), line
        for start, cell in zip(starts, cells[:6], strict=True):
            assert re.match(cell, line[start:]), (line, cell)

    piped = subprocess.run(
        [LAUNCHER, *args], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert ESCAPE not in piped
    assert piped.splitlines() == [line.rstrip() for line in _uncoloured(seen).splitlines()]

    no_colour = _under_a_terminal(args, {**env, "NO_COLOR": "1"})
    assert ESCAPE not in no_colour
    assert no_colour.splitlines() == piped.splitlines()


def test_list_json_carries_the_tables_fields(tmp_path):
    jobs = _local_jobs(tmp_path / "state")
    env = _offline_env(LAUNCHER_LOCAL_STATE=str(tmp_path / "state"))
    result = cli.launcher("list", "--local", "--all", "-o", "json", env=env, timeout=60)
    listed = json.loads(result.stdout)
    assert [j["job_id"] for j in listed] == [jobs["RUNNABLE"], jobs["FAILED"], jobs["SUCCEEDED"]]
    for job in listed:  # ID, NAME, POOL, STATE, NODES; AGE and DURATION from the times
        assert {"job_id", "name", "pool", "state", "nodes"} <= set(job)
        assert {"created_at", "started_at", "stopped_at"} <= set(job)
    assert listed[2]["stopped_at"] - listed[2]["started_at"] == pytest.approx(120)


# --- what to do ---------------------------------------------------------------------------


def test_what_to_do_names_the_job_and_says_nothing_for_a_cancel():
    failed = JobInfo(JOB, "train", JobState.FAILED, reason="Essential container in task exited")
    assert explain(failed) == (
        f"the main node's command exited with an error: `launcher logs {JOB}` shows why"
    )
    lost = JobInfo(JOB, "train", JobState.FAILED, last_exit_code=75)
    assert f"`launcher describe {JOB}`" in (explain(lost) or "")
    array = JobInfo(JOB, "prep", JobState.FAILED, array_size=4, children={"FAILED": 1})
    assert f"`launcher logs {JOB} --index K`" in (explain(array) or "")
    for info in (failed, lost, array):
        assert "JOB" not in (explain(info) or "")
    cancelled = JobInfo(JOB, "train", JobState.FAILED, reason=CANCEL_REASON, cancelled=True)
    assert explain(cancelled) is None


def test_no_credentials_says_what_to_set_and_exits_1():
    result = cli.launcher("status", JOB, env=_offline_env(AWS_REGION="us-east-1"), timeout=60)
    assert result.returncode == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("launcher: error: no AWS credentials found: set AWS_PROFILE")
    assert "`aws configure`" in line and "`aws sso login" in line


# --- completion ---------------------------------------------------------------------------

SYNTAX_CHECKS = {"bash": ["bash", "-n"], "zsh": ["zsh", "-n"], "fish": ["fish", "--no-execute"]}


@pytest.mark.parametrize("shell", sorted(SYNTAX_CHECKS))
def test_each_completion_script_passes_its_shells_syntax_check(shell, tmp_path):
    if shutil.which(shell) is None:
        pytest.fail(f"{shell} is not installed: make system-deps (DEBIAN_PACKAGES) installs it")
    result = cli.launcher("completion", shell, env=_offline_env(), timeout=60)
    assert result.returncode == 0 and "launcher" in result.stdout
    script = tmp_path / f"launcher.{shell}"
    script.write_text(result.stdout)
    checked = subprocess.run(
        [*SYNTAX_CHECKS[shell], str(script)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stderr


def _bash_completes(line: str) -> list[str]:
    """What bash offers at the end of ``line`` with the script of ``launcher completion
    bash`` loaded: its completion function, called as bash's ``complete`` would."""
    script = cli.launcher("completion", "bash", env=_offline_env(), timeout=60).stdout
    words = shlex.split(line) + ([""] if line.endswith(" ") else [])
    program = f"""
{script}
COMP_LINE={shlex.quote(line)}
COMP_POINT={len(line)}
COMP_WORDS=({" ".join(shlex.quote(w) for w in words)})
COMP_CWORD={len(words) - 1}
COMP_TYPE=9
_python_argcomplete launcher {shlex.quote(words[-1])} {shlex.quote(words[-2])}
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    env = _offline_env(PATH=f"{os.path.dirname(LAUNCHER)}:{os.environ['PATH']}")
    done = subprocess.run(
        ["bash", "-c", program], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    return [w.strip() for w in done.stdout.splitlines() if w.strip()]


def test_bash_completes_commands_and_options():
    assert _bash_completes("launcher ru") == ["run"]
    assert _bash_completes("launcher list --all") == ["--all", "--all-pools"]
    assert {"bash", "zsh", "fish"} <= set(_bash_completes("launcher completion "))


# --- against the emulated stack: exit statuses and -o json --------------------------------


@pytest.fixture(scope="module")
def cluster(moto_server, synth_default):
    moto_server.reset()
    moto_server.deploy(synth_default.outdir, synth_default.stack_names)
    return moto_server


def _on(server, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LAUNCHER_STACK"} | server.env
    return subprocess.run(
        [LAUNCHER, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _submitted(server, *extra: str) -> str:
    from tests.cli.test_commands import IMAGE

    args = ["run", "--no-workspace", "--image", IMAGE, "--nodes", "2", *extra, "--", "train"]
    result = _on(server, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def _ended(job_id: str, success: bool) -> None:
    from devenv import moto_gaps
    from devenv.emulator import ACCOUNT, REGION

    moto_gaps.run_job(ACCOUNT, REGION, job_id, success=success, node_logs={0: ["hi"]})


def test_wait_exits_with_the_jobs_result_and_status_stays_a_query(cluster):
    failed, succeeded = _submitted(cluster), _submitted(cluster)
    waiting = subprocess.Popen(
        [LAUNCHER, "wait", failed, "--poll", "0.2"],
        env={k: v for k, v in os.environ.items() if k != "LAUNCHER_STACK"} | cluster.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1)
        assert waiting.poll() is None  # still waiting: the job is RUNNABLE
        _ended(failed, success=False)
        out, err = waiting.communicate(timeout=60)
    finally:
        waiting.kill()
    assert waiting.returncode == 1, err
    assert out.startswith(f"{failed} train FAILED")
    assert "JOB" not in out

    _ended(succeeded, success=True)
    done = _on(cluster, "wait", succeeded)
    assert (done.returncode, done.stdout) == (0, f"{succeeded} train SUCCEEDED\n"), done.stderr
    as_json = json.loads(_on(cluster, "wait", succeeded, "-o", "json").stdout)
    assert as_json["state"] == "SUCCEEDED" and as_json["what_to_do"] is None

    # status is a query: 0 whatever the job's state
    assert _on(cluster, "status", failed).returncode == 0

    still = _submitted(cluster)
    timed_out = _on(cluster, "wait", still, "--timeout", "1s", "--poll", "0.2")
    assert timed_out.returncode == 1
    # (what the job waits for may come before, on a terminal or not: launcher.job.waiting)
    assert timed_out.stderr.endswith(f"launcher: {still} still RUNNABLE after 1s\n")


def test_run_follow_exits_0_for_a_job_that_succeeds(cluster):
    before = {j["job_id"] for j in json.loads(_on(cluster, "list", "-o", "json").stdout)}
    from tests.cli.test_commands import IMAGE

    args = ["run", "--no-workspace", "--image", IMAGE, "--nodes", "2", "--follow", "--", "train"]
    env = {k: v for k, v in os.environ.items() if k != "LAUNCHER_STACK"} | cluster.env
    follower = subprocess.Popen(
        [LAUNCHER, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        for _ in range(100):
            listed = json.loads(_on(cluster, "list", "-o", "json").stdout)
            new = [j["job_id"] for j in listed if j["job_id"] not in before]
            if new:
                break
            time.sleep(0.2)
        (job_id,) = new
        _ended(job_id, success=True)
        out, err = follower.communicate(timeout=60)
    finally:
        follower.kill()
    assert follower.returncode == 0, err
    assert out.strip().splitlines()[-1] == job_id
    assert f"{job_id} train SUCCEEDED" in err


def test_output_json_parses_and_carries_the_tables_fields(cluster):
    job_id = _submitted(cluster)

    info = json.loads(_on(cluster, "outputs", "-o", "json").stdout)
    table = _on(cluster, "outputs").stdout
    for pool in info["pools"]:  # the pools table's rows
        assert re.search(rf"^{pool['name']}( \*)? +{pool['queue_name']} ", table, re.M)

    listed = json.loads(_on(cluster, "list", "-o", "json").stdout)
    (row,) = [j for j in listed if j["job_id"] == job_id]
    shown = _on(cluster, "list").stdout.splitlines()
    # A stack without teams, a queue without fair share: no TEAM or SHARE column, and the
    # job's JSON says it has neither.
    assert re.fullmatch(r"ID +NAME +POOL +STATE +NODES +AGE +DURATION", shown[0])
    (line,) = [s for s in shown if s.startswith(job_id)]
    assert (row["team"], row["share"]) == (None, None)
    assert line.split()[:5] == [job_id, row["name"], row["pool"], row["state"], str(row["nodes"])]
    assert row["nodes"] == 2  # JobSummary.nodeProperties.numNodes
    assert row["pool"] == info["pool_name"]

    status = json.loads(_on(cluster, "status", job_id, "-o", "json").stdout)
    assert _on(cluster, "status", job_id).stdout.splitlines()[0] == (
        f"{status['job_id']} {status['name']} {status['state']}"
    )
    assert {"waiting_for", "lost_nodes", "what_to_do"} <= set(status)

    described = json.loads(_on(cluster, "describe", job_id, "-o", "json").stdout)
    text = _on(cluster, "describe", job_id).stdout
    assert f"{described['job_id']} ({described['name']})" in text
    assert described["nodes"] == 2 and "what_to_do" in described

    _ended(job_id, success=True)
    lines = [json.loads(x) for x in _on(cluster, "logs", job_id, "-o", "json").stdout.splitlines()]
    assert lines == [{"node": 0, "message": "hi", "timestamp": lines[0]["timestamp"]}]

    assert json.loads(_on(cluster, "cancel", _submitted(cluster), "-o", "json").stdout)[0][
        "was"
    ] in ("SUBMITTED", "PENDING", "RUNNABLE")
