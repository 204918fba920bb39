"""The build's one addition to pyproject.toml: entry_points.txt keeps the order of
``[project.entry-points."torchx.schedulers"]``, so installing the launcher leaves TorchX's
default scheduler TorchX's own.

TorchX takes the FIRST scheduler it finds as the default: 0.7.0's ``get_default_scheduler_name``
is the first key of ``get_scheduler_factories()``, which is the ``torchx.schedulers`` entry
points in file order once any exists (torchx/schedulers/__init__.py, torchx/util/entrypoints.py
``load_group``); torchx-nightly puts registered plugins first, entry points included
(torchx/schedulers/__init__.py, torchx/plugins/_registry.py ``_find``). setuptools writes
entry_points.txt sorted by name (setuptools/_entry_points.py ``render`` and ``render_items``),
which put ``aws_batch`` first: 0.7.0 then asked every ``torchx run`` for a queue, and nightly,
which removed ``aws_batch``, failed. pyproject.toml lists TorchX's own schedulers in TorchX's
order (``local_docker`` first) and ``efa_batch`` last.

The ``egg_info`` command writes entry_points.txt for every install path: the editable install
(PEP 660, through ``dist_info``), wheels and sdists; its subclass here reorders the one group
after setuptools wrote it. Every other field stays in pyproject.toml.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.egg_info import egg_info

GROUP = "torchx.schedulers"


def _name(line: str) -> str:
    return line.split("=", 1)[0].strip()


def in_declared_order(text: str, group: str, names: list[str]) -> str:
    """entry_points.txt's ``text`` with ``group``'s entries in the order of ``names`` (names
    not in it keep their place after them); every other line as it was."""
    lines = text.splitlines()
    header = f"[{group}]"
    if header not in lines:
        return text
    start = lines.index(header) + 1
    end = start
    while end < len(lines) and lines[end].strip() and not lines[end].startswith("["):
        end += 1
    rank = {name: i for i, name in enumerate(names)}
    entries = sorted(lines[start:end], key=lambda line: rank.get(_name(line), len(rank)))
    return "\n".join([*lines[:start], *entries, *lines[end:]]) + "\n"


class egg_info_in_declared_order(egg_info):  # noqa: N801 - a setuptools command's style
    """setuptools' ``egg_info``, then ``torchx.schedulers`` in pyproject.toml's order (which
    setuptools keeps in ``distribution.entry_points``: a list per group, in the table's order)."""

    def run(self) -> None:
        super().run()
        declared = (self.distribution.entry_points or {}).get(GROUP, [])
        if isinstance(declared, str):
            declared = declared.splitlines()
        path = Path(self.egg_info) / "entry_points.txt"
        if path.exists():
            text = path.read_text(encoding="utf-8")
            names = [_name(line) for line in declared if line.strip()]
            path.write_text(in_declared_order(text, GROUP, names), encoding="utf-8")


setup(cmdclass={"egg_info": egg_info_in_declared_order})
