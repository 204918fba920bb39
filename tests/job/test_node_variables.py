"""docs/jobs.md's table of the variables a node gets, held to the code that sets them: every
name the launcher sets is in the table, every row names something set, and each "with ..."
condition is what turns its names on (tests/local/test_node_variables.py checks the rows for
every node, multi-node jobs and workers against real local nodes)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from devenv.clusters import cluster_info
from launcher.image.patch import ENV as IMAGE_ENV
from launcher.job import capacity
from launcher.job.environment import environment
from launcher.job.jobspec import EfaMode, JobSpec, NodeGroup
from launcher.local.containers import LOOPBACK_SOCKETS
from launcher.node import prelude
from tests.conftest import ROOT

# Batch's own names ("AWS Batch job environment variables", Batch user guide job_env_vars:
# "All variables that AWS Batch set start with the AWS_BATCH_ prefix"), less the one for jobs
# on Amazon EKS (AWS_BATCH_JOB_KUBERNETES_NODE_UID), which this cluster does not run.
BATCH = {
    "AWS_BATCH_CE_NAME",
    "AWS_BATCH_JOB_ARRAY_INDEX",
    "AWS_BATCH_JOB_ARRAY_SIZE",
    "AWS_BATCH_JOB_ATTEMPT",
    "AWS_BATCH_JOB_ID",
    "AWS_BATCH_JOB_MAIN_NODE_INDEX",
    "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS",
    "AWS_BATCH_JOB_NODE_INDEX",
    "AWS_BATCH_JOB_NUM_NODES",
    "AWS_BATCH_JQ_NAME",
}
# The prelude's own, removed before the user's command starts (docs/jobs.md says so).
PRELUDE_OWN = {"LAUNCHER_WATCH_TOKEN", "LAUNCHER_START_GATE", "LAUNCHER_SECRETS_FILE"}


def node_variables() -> dict[str, str]:
    """docs/jobs.md's table: each variable with its Where column."""
    text = (ROOT / "docs" / "jobs.md").read_text()
    section = text[text.index("**Every variable a node gets.**") :]
    section = section[: section.index("\n\n", section.index("| Variable |"))]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            names, where = line.split(" | ")[:2]
            for name in re.findall(r"`([A-Z0-9_]+)`", names):
                rows[name] = where.strip()
    return rows


def prelude_exports() -> set[str]:
    """Every name the node prelude exports (``export A=... B=...``)."""
    names = set()
    for line in (ROOT / "launcher" / "node" / "prelude.sh").read_text().splitlines():
        match = re.match(r"\s*(?:.*\s)?export ([A-Z_][A-Z0-9_]*=.*)", line)
        if match:
            names |= set(re.findall(r"(?:^|\s)([A-Z_][A-Z0-9_]*)=", match.group(1)))
    return names


SPEC = JobSpec(name="train", command=("python3", "train.py"), image="img", nodes=2)
WINDOW = capacity.Window("cr-1", 1_800_000_000.0, 1_800_086_400.0, "active")


def env_of(spec: JobSpec = SPEC, **cluster) -> set[str]:
    group = spec.groups[0] if spec.groups else None
    return set(environment(spec, cluster_info(**cluster), gpus=8, group=group))


EVERYTHING = dataclasses.replace(
    SPEC,
    efa=EfaMode.REQUIRE,
    restarts=True,
    groups=(NodeGroup(0, 0, name="trainer"), NodeGroup(1, 1, name="reader")),
)


def test_every_variable_the_launcher_sets_is_in_the_table():
    """What the job definition carries (with every option on), the Capacity Block's
    variables, the prelude's exports, the local nodes' own and the image's ENV."""
    table = node_variables()
    set_by_launcher = (
        env_of(EVERYTHING, fsx_file_system_id="fs-0123456789abcdef0")
        | set(capacity.environment(SPEC, WINDOW, "ce-block", "ce-fallback"))
        | prelude_exports()
        | set(LOOPBACK_SOCKETS)
        | {prelude.REHEARSAL_ENV}
        | set(IMAGE_ENV)
    )
    missing = sorted(set_by_launcher - set(table) - PRELUDE_OWN)
    assert not missing, f"set on a node but not in docs/jobs.md's table: {missing}"
    assert set(table) <= set_by_launcher | BATCH, "a row names a variable nothing sets"


@pytest.mark.parametrize(
    ("where", "without", "with_"),
    [
        (
            "with EFA",
            env_of(dataclasses.replace(SPEC, efa=EfaMode.OFF)),
            env_of(dataclasses.replace(SPEC, efa=EfaMode.REQUIRE)),
        ),
        ("with FSx", env_of(), env_of(fsx_file_system_id="fs-0123456789abcdef0")),
        ("with `--restarts`", env_of(), env_of(dataclasses.replace(SPEC, restarts=True))),
        ("with node groups", env_of(), env_of(dataclasses.replace(SPEC, groups=EVERYTHING.groups))),
    ],
)
def test_a_condition_in_the_table_is_what_sets_its_variables(where, without, with_):
    """A row's "with ..." names appear when that option is on and not otherwise (the EFA rows
    the prelude's fabric check sets are left to it: they depend on the image)."""
    rows = {name for name, w in node_variables().items() if w == where}
    assert rows, where
    from_definition = rows - prelude_exports()
    assert from_definition and from_definition <= with_ - without, (where, rows)
    assert with_ - without <= rows, f"{where} also sets {sorted(with_ - without - rows)}"


def test_capacity_block_rows_are_what_a_job_in_a_block_gets():
    rows = {n for n, w in node_variables().items() if w == "in a Capacity Block pool"}
    assert rows == set(capacity.environment(SPEC, WINDOW, "ce-block", "ce-fallback"))
