"""A job's default name, from its command (launcher.job.job_name): what a person would call it,
and always a name Batch accepts."""

from __future__ import annotations

import re

import pytest

from launcher.job.job_name import default_name
from launcher.job.jobspec import JobSpec

# SubmitJob's jobName (AWS Batch API reference, SubmitJob): "It can be up to 128 letters long.
# The first character must be alphanumeric, can contain uppercase and lowercase letters,
# numbers, hyphens (-), and underscores (_)."
BATCH_JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (["python3", "train.py", "--lr", "1"], "train"),
        (["sh", "train.sh"], "train"),
        (["/opt/bin/run-me.sh"], "run-me"),
        (["echo", "hi"], "echo"),
        (["python3", "-m", "http.server"], "http-server"),
        (["python", "-m", "torch.distributed.run", "--nproc-per-node", "8", "train.py"], "train"),
        # A shell's script is read, not named "sh".
        (["sh", "-c", "echo hi"], "echo"),
        (["sh", "-c", "python3 train.py --epochs 1"], "train"),
        (["sh", "-c", "cd /data && python3 prep.py"], "prep"),
        (["/bin/bash", "-lc", "set -e; export A=1; B=2 exec torchrun --nnodes 2 fit.py"], "fit"),
        (["sh", "-ec", "env -i A=1 nvidia-smi -L"], "nvidia-smi"),
        (["sh", "-c", "sh -c 'hostname'"], "hostname"),
        # Nothing to name it by: the shell's own name, as before.
        (["sh", "-c", "cd /x"], "sh"),
        (["sh", "-c", ""], "sh"),
        (["sh"], "sh"),
        ([], "job"),
    ],
)
def test_a_job_is_named_for_what_it_runs(command, name):
    assert default_name(command) == name


@pytest.mark.parametrize(
    "command",
    [
        ["sh", "-c", 'echo "unclosed'],  # the shell refuses it; the name does not
        ["sh", "-c", "__init__.py"],
        ["sh", "-c", "./" + "x" * 300 + ".sh"],
        ["sh", "-c", "échec; ünïcode"],
        ["python3", "-m", "..."],
        ["sh", "-c", "&& ; |"],
    ],
)
def test_every_default_name_is_one_batch_accepts_and_the_same_each_time(command):
    name = default_name(command)
    assert BATCH_JOB_NAME.fullmatch(name), name
    assert default_name(list(command)) == name
    assert JobSpec(name=name, command=("true",), image="img").name == name
