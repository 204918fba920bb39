"""The assembled node scripts and job commands that tests/node/test_assembled.py pins.

Each golden file under tests/fixtures/node/ is plain text, so that a change reads as a diff:
the texts (the prelude, its named parts, the check job's script) as they are, and one file per
job setting with the command of every node range the job definition carries, one argument a
line as JSON, where ``<prelude.txt>`` (or another text's file name) stands for that file's text.

The settings cover what the builders take: the prelude is one script for every job (the job's
settings reach it through the environment), so what varies is the command after it, which
``jobdef.build`` makes from the spec (torchrun and its node and GPU counts, node groups with
their own commands, one node or many, array children as container jobs) and the check job,
whose command is a shell script of its own behind the prelude. The other settings (EFA on, off,
auto or required; restarts and the node watch; a Capacity Block's checkpoint signal; a pool
without EFA or GPUs) are there to show that they leave the command alone.

Written once from the code before the prelude moved into files (commit f4f35f7), with the old
tree first on the path; run it again only to accept a deliberate change of the node's script:
``.venv/bin/python tests/node/goldens.py`` writes the goldens from the code on the path.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "node"
HEADER = (
    "# Every container command of the job definition that jobdef.build registers for\n"
    "# {what}\n"
    "# One argument a line, as JSON; <NAME.txt> stands for the text of that file here.\n"
)


def texts() -> dict[str, str]:
    """The assembled texts, by golden file name."""
    from launcher.node import check_script, prelude

    return {
        "prelude.txt": prelude.SCRIPT,
        "reparse_guard.txt": prelude.REPARSE_GUARD,
        "monitor_main.txt": prelude.MONITOR_MAIN,
        "monitor_worker.txt": prelude.MONITOR_WORKER,
        "check.txt": check_script.SCRIPT,
    }


def _spec(**kwargs: Any) -> Any:
    from launcher.job.jobspec import JobSpec

    values = {"name": "train", "command": ("python", "train.py"), "image": "repo@sha256:ab"}
    return JobSpec(**(values | kwargs))


def _build(cluster: dict[str, Any], **spec: Any) -> Callable[[], dict[str, Any]]:
    def register() -> dict[str, Any]:
        from devenv.clusters import cluster_info
        from launcher.job import jobdef

        return dict(jobdef.build(_spec(**spec), cluster_info(**cluster)).register)

    return register


def _check(cluster: dict[str, Any], nodes: int) -> Callable[[], dict[str, Any]]:
    def register() -> dict[str, Any]:
        from devenv.clusters import cluster_info
        from launcher.job import check, jobdef

        info = cluster_info(**cluster)
        job = check.spec(info, nodes, "repo@sha256:cd", 29500, 900)
        return dict(jobdef.build(job, info).register)

    return register


def settings() -> dict[str, tuple[str, Callable[[], dict[str, Any]]]]:
    """Each setting's golden name: what it is, and its registerJobDefinition request."""
    from launcher.job.jobspec import EfaMode, NodeGroup

    p4d: dict[str, Any] = {"instance_type": "p4d.24xlarge"}
    cpu: dict[str, Any] = {"instance_type": "c5n.18xlarge", "efa": False}
    awkward = ("sh", "-c", "echo \"$1\" 'it'\"'\"'s' $HOME; exit 3", "-", "a b", "", "*", "x\ny")
    return {
        "one-node-cpu-pool": ("1 node, a pool without EFA or GPUs", _build(cpu)),
        "one-node-gpu": ("1 node of p4d.24xlarge (EFA auto)", _build(p4d)),
        "two-nodes-efa-require": (
            "2 nodes of p4d.24xlarge, EFA required (the default)",
            _build(p4d, nodes=2),
        ),
        "two-nodes-efa-off": ("2 nodes, --efa off", _build(p4d, nodes=2, efa=EfaMode.OFF)),
        "two-nodes-efa-auto": ("2 nodes, --efa auto", _build(p4d, nodes=2, efa=EfaMode.AUTO)),
        "two-nodes-pool-without-efa": (
            "2 nodes of a pool without EFA",
            _build({"instance_type": "p4d.24xlarge", "efa": False}, nodes=2),
        ),
        "torchrun-one-node": ("torchrun, 1 node of 8 GPUs", _build(p4d, torchrun=True)),
        "torchrun-two-nodes-4-gpus": (
            "torchrun, 2 nodes, 4 GPUs each (restarts on: the node watch)",
            _build(p4d, nodes=2, torchrun=True, gpus_per_node=4),
        ),
        "torchrun-cpu-pool": ("torchrun on a pool without GPUs", _build(cpu, torchrun=True)),
        "torchrun-restarts-off": (
            "torchrun, 4 nodes, restarts off (no node watch)",
            _build(p4d, nodes=4, torchrun=True, restarts=False),
        ),
        "restarts-on-without-torchrun": (
            "3 nodes, restarts on (the node watch, a checkpoint directory)",
            _build(p4d, nodes=3, restarts=True),
        ),
        "checkpoint-signal": (
            "2 nodes with a Capacity Block's checkpoint signal and lead",
            _build(p4d, nodes=2, checkpoint_signal="TERM", checkpoint_lead_seconds=600),
        ),
        "node-groups": (
            "4 nodes in groups: node 0 its own image and command, 1-3 the job's",
            _build(
                p4d,
                nodes=4,
                groups=(
                    NodeGroup(0, 0, image="repo@sha256:cd", command=("python", "serve.py")),
                    NodeGroup(1, 3, gpus_per_node=2, name="trainers"),
                ),
            ),
        ),
        "node-groups-torchrun": (
            "torchrun, 2 nodes in groups with their own commands and GPU counts",
            _build(
                p4d,
                nodes=2,
                torchrun=True,
                groups=(
                    NodeGroup(0, 0, command=("python", "a.py"), gpus_per_node=1),
                    NodeGroup(1, 1, command=("python", "b.py")),
                ),
            ),
        ),
        "array-children": (
            "an array of 3 one-node children (a container job)",
            _build(p4d, array_size=3),
        ),
        "awkward-arguments": (
            "1 node, a command whose arguments hold quotes, spaces, nothing, * and a newline",
            _build(cpu, command=awkward),
        ),
        "check-two-nodes-efa": ("launcher check, 2 nodes of p4d.24xlarge", _check(p4d, 2)),
        "check-one-node-cpu": ("launcher check, 1 node of a pool without EFA", _check(cpu, 1)),
    }


def commands(register: dict[str, Any]) -> Iterator[tuple[str, list[str]]]:
    """Each container's command in a registerJobDefinition request, by where it is."""
    if "containerProperties" in register:
        yield "containerProperties", list(register["containerProperties"]["command"])
    for node_range in register.get("nodeProperties", {}).get("nodeRangeProperties", []):
        yield (
            f"nodeRangeProperties {node_range['targetNodes']}",
            list(node_range["container"]["command"]),
        )


def render(what: str, register: dict[str, Any], known: dict[str, str]) -> str:
    """A setting's golden text: every command, an argument a line, the known texts by name."""
    by_text = {text: name for name, text in known.items()}
    lines = [HEADER.format(what=what)]
    for where, argv in commands(register):
        lines.append(f"[{where}]\n")
        lines.extend(f"<{by_text[a]}>\n" if a in by_text else json.dumps(a) + "\n" for a in argv)
    return "".join(lines)


def parse(golden: str, known: dict[str, str]) -> list[tuple[str, list[str]]]:
    """A setting's golden text back into its commands, the named texts put back in."""
    found: list[tuple[str, list[str]]] = []
    for line in golden.splitlines():
        if line.startswith("#"):
            continue
        if line.startswith("["):
            found.append((line.strip("[]"), []))
        elif line.startswith("<"):
            found[-1][1].append(known[line.strip("<>")])
        else:
            found[-1][1].append(json.loads(line))
    return found


def write(where: Path = FIXTURES) -> None:
    where.mkdir(parents=True, exist_ok=True)
    known = texts()
    for name, text in known.items():
        (where / name).write_bytes(text.encode())
    for name, (what, register) in settings().items():
        (where / f"command-{name}.txt").write_bytes(render(what, register(), known).encode())


if __name__ == "__main__":
    import launcher

    print(f"writing the goldens from {Path(launcher.__file__).parent}", file=sys.stderr)
    write()
