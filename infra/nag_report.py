"""Run a cdk-nag pack over the app and list its unacknowledged findings.

``python -m infra.nag_report [AwsSolutions|NIST.800.53.R5]`` prints one finding per line.
The app itself always runs AwsSolutions (synth fails on an unacknowledged finding); the NIST
800-53 R5 pack is informational and its findings are listed in docs/security.md.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import cdk_nag

from infra.app import create_app

PACKS = {
    "AwsSolutions": cdk_nag.AwsSolutionsChecks,
    "NIST.800.53.R5": cdk_nag.NIST80053R5Checks,
}


@dataclass(frozen=True, order=True)
class Finding:
    rule: str
    severity: str
    path: str


def findings(context: dict, pack: str) -> list[Finding]:
    """``pack``'s unacknowledged findings, from a synth of the app as ``cdk synth`` runs it
    (AwsSolutions on, so its own report is empty unless the synth would fail)."""
    extra = () if pack == "AwsSolutions" else (PACKS[pack],)
    with tempfile.TemporaryDirectory() as out:
        app, _, _ = create_app(context, outdir=out, packs=extra)
        try:
            app.synth()
        except RuntimeError as exc:
            if "ValidationFailed" not in str(exc):
                raise
        report = json.loads((Path(out) / "validation-report.json").read_text())
    return sorted(
        Finding(v["ruleName"], v["severity"], c["constructPath"])
        for plugin in report["pluginReports"]
        if plugin["pluginName"] == pack
        for v in plugin["violations"]
        for c in v["violatingConstructs"]
    )


def main() -> None:
    pack = sys.argv[1] if len(sys.argv) > 1 else "NIST.800.53.R5"
    context = json.loads(Path("cdk.json").read_text())["context"]
    for f in findings(context, pack):
        print(f"{f.rule}\t{f.severity}\t{f.path}")


if __name__ == "__main__":
    main()
