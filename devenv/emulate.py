"""Rehearse a deploy on an emulated AWS: an environment of cdk.json, synthesized as ``cdk
synth`` would (cdk-nag on) and created in moto on 127.0.0.1, in the environment's own account
and any Region, so a platform team can try a change (a new team, a new pool) and the launcher
against it before ``cdk deploy`` on the real account::

    python -m devenv.emulator deploy -c env=NAME [-c KEY=VALUE ...] [--region REGION]
    python -m devenv.emulator stop

``-c`` is the CDK CLI's: cdk.json's context (read from the current directory, as ``cdk``
does) with these keys over it. The moto server outlives the command, so the launcher can
reach it: its URL and process id stay in ``.emulator/server.json``, the next deploy reuses it
and ``stop`` ends it. A deploy over stacks that exist there updates them, after the pre-deploy
check (``infra/predeploy.py``) has planned the change and not refused it. stdout carries the
``export`` lines that point a shell at the stack (also written to ``.emulator/env``), stderr
the progress; a bad setting is one line and exit 2, a failed deploy one line and exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent  # where `python -m devenv.emulator` runs
DEFAULT_WORKDIR = ".emulator"
PROG = "python -m devenv.emulator"
PREDEPLOY = "python -m infra.predeploy"


class Refused(Exception):
    """Bad input: one line, exit 2."""


class Failed(Exception):
    """The emulator or the deploy failed: one line, exit 1."""


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def context_of(directory: Path, overrides: list[str]) -> dict[str, Any]:
    """cdk.json's context (then cdk.context.json's, as the CDK CLI merges them) with ``-c``
    over it; like the CDK CLI, ``-c`` values stay strings (infra/config_values.py coerces)."""
    path = directory / "cdk.json"
    if not path.is_file():
        raise Refused(f"no cdk.json in {directory}: run this where `cdk deploy` runs")
    context: dict[str, Any] = dict(json.loads(path.read_text()).get("context", {}))
    saved = directory / "cdk.context.json"
    if saved.is_file():
        context.update(json.loads(saved.read_text()))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise Refused(f"-c {item}: expected KEY=VALUE (as with cdk -c)")
        context[key] = value
    return context


def in_region(context: dict[str, Any], region: str) -> dict[str, Any]:
    """The environment moved to ``region``: its zone keeps its letter (us-west-2b becomes
    eu-west-1b) unless ``-c availability_zone`` names one."""
    from infra.config import DEFAULT_ENVIRONMENT

    env = (context.get("environments") or {}).get(str(context.get("env") or DEFAULT_ENVIRONMENT))
    zone = str(context.get("availability_zone") or (env or {}).get("availability_zone") or "")
    old = str(context.get("region") or (env or {}).get("region") or "")
    moved = {**context, "region": region}
    if "availability_zone" not in context and zone.startswith(old) and old:
        moved["availability_zone"] = region + zone[len(old) :]
    return moved


def check(context: dict[str, Any]) -> Any:  # an infra.config.ClusterConfig
    """The settings checked as the CDK app checks them, before anything starts."""
    from infra.config import ConfigError, load, refuse_unknown_settings

    try:
        refuse_unknown_settings(context)
        return load(context)
    except ConfigError as exc:
        raise Refused(f"invalid cluster configuration: {exc}") from None


def _answers(url: str) -> bool:
    import requests

    try:  # moto's dashboard (its data.json fails once stacks are deployed)
        return requests.get(f"{url}/moto-api/", timeout=2).ok
    except requests.RequestException:
        return False


def server_url(workdir: Path) -> str:
    """The URL of this workdir's moto server: the running one, else a new one (its own
    session, so it outlives this command; its log in moto.log)."""
    from devenv.processes import allowed, free_port, wait_until

    state = workdir / "server.json"
    if state.is_file():
        url = str(json.loads(state.read_text())["url"])
        if _answers(url):
            say(f"emulator: reusing the emulated AWS at {url}")
            return url
    allowed("moto")
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    with open(workdir / "moto.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "devenv.emulator", str(port)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    state.write_text(json.dumps({"url": url, "pid": process.pid}))
    try:
        wait_until(lambda: _answers(url), 60, "moto server", process)
    except RuntimeError as exc:
        raise Failed(f"{exc} (its log: {workdir / 'moto.log'})") from None
    say(f"emulator: started an emulated AWS (moto) at {url}, log in {workdir / 'moto.log'}")
    return url


def zones(url: str, region: str) -> list[str]:
    from devenv.emulator import session

    ec2 = session(region).client("ec2", endpoint_url=url)
    return [z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]]


def deploy(args: argparse.Namespace) -> int:
    from devenv.emulator import account_keys, session
    from devenv.emulator import deploy as create_stacks
    from infra.config import ZONES_LOOKUP

    workdir = Path(args.workdir).resolve()
    context = context_of(Path.cwd(), args.context)
    if args.region:
        context = in_region(context, args.region)
    config = check(context)
    where = f"{config.account} {config.region}"
    url = server_url(workdir)
    # What `cdk synth` looks up in the account: the Region's zones, here the emulator's.
    lookup = ZONES_LOOKUP.format(account=config.account, region=config.region)
    context.setdefault(lookup, zones(url, config.region))
    keys = account_keys(url, config.account)
    cf = session(config.region, keys).client("cloudformation", endpoint_url=url)
    deployed = config.stack_name in {s["StackName"] for s in cf.describe_stacks()["Stacks"]}
    outdir = workdir / "cdk.out"
    shutil.rmtree(outdir, ignore_errors=True)
    say(f"emulator: synthesizing environment {config.env_name} ({where}) as cdk synth does")
    stacks = _synth(context, outdir).stack_names
    exports = {
        "AWS_ENDPOINT_URL": url,
        "AWS_ACCESS_KEY_ID": keys[0],
        "AWS_SECRET_ACCESS_KEY": keys[1],
        "AWS_REGION": config.region,
        "AWS_DEFAULT_REGION": config.region,  # botocore reads this one first
        "LAUNCHER_STACK": config.stack_name,
    }
    if deployed:
        _predeploy(outdir, exports)
    try:
        create_stacks(url, outdir, stacks, region=config.region, keys=keys)
    except RuntimeError as exc:
        raise Failed(f"deploy failed: {exc}") from None
    done = "updated" if deployed else "deployed"
    say(f"emulator: {done} {', '.join(stacks)} in {where} (templates in {_shown(outdir)})")
    lines = [f"export {k}={shlex.quote(v)}" for k, v in exports.items()]
    env_file = workdir / "env"
    fd = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds a key
    with os.fdopen(fd, "w") as out:
        out.write("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    say(f"point the launcher at it: source {_shown(env_file)}   then: launcher outputs")
    say(f"stop the emulator: {PROG} stop" + _workdir_flag(workdir))
    return 0


def _predeploy(outdir: Path, exports: dict[str, str]) -> None:
    """An update, as a careful ``cdk deploy`` is: the pre-deploy check first (its plan on
    stderr), and nothing deployed when it refuses."""
    say(f"emulator: updating; first the pre-deploy check: {PREDEPLOY} --app {_shown(outdir)}")
    check = subprocess.run(
        [sys.executable, "-m", PREDEPLOY.split()[-1], "--app", str(outdir)],
        env={**os.environ, **exports},
        stdout=sys.stderr,
        check=False,
    )
    if check.returncode != 0:
        raise Failed("the pre-deploy check refused this change (above); nothing was deployed")


def _synth(context: dict[str, Any], outdir: Path) -> Any:  # a devenv.synth.Synthesized
    from devenv.synth import SynthError, synthesize
    from infra.config import ConfigError

    try:
        return synthesize(context, outdir)
    except (ConfigError, SynthError) as exc:
        raise Refused(f"invalid cluster configuration: {exc}") from None


def _shown(path: Path) -> str:
    """A path as the user types it: relative when under the current directory."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _workdir_flag(workdir: Path) -> str:
    return "" if workdir == Path(DEFAULT_WORKDIR).resolve() else f" --workdir {_shown(workdir)}"


def stop(args: argparse.Namespace) -> int:
    """End the server this workdir started (by its process id), and nothing else."""
    state = Path(args.workdir).resolve() / "server.json"
    if not state.is_file():
        say(f"emulator: none running from {args.workdir}")
        return 0
    recorded = json.loads(state.read_text())
    pid = int(recorded["pid"])
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            os.kill(pid, 0)
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    state.unlink()
    say(f"emulator: stopped the emulated AWS at {recorded['url']} (pid {pid})")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog=PROG,
        description="Deploy an environment of cdk.json into an emulated AWS on 127.0.0.1.",
        allow_abbrev=False,
    )
    verbs = top.add_subparsers(dest="verb", required=True)
    up = verbs.add_parser(
        "deploy",
        help="synthesize and deploy an environment (starts or reuses the emulator)",
        allow_abbrev=False,
    )
    up.add_argument(
        "-c",
        "--context",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting over cdk.json's, as with cdk -c (env=NAME picks the environment)",
    )
    up.add_argument("--region", help="deploy into this Region instead of the environment's")
    down = verbs.add_parser("stop", help="stop the emulator this directory started")
    for sub in (up, down):
        sub.add_argument(
            "--workdir",
            default=DEFAULT_WORKDIR,
            help="where the server's state, the templates and the env file go "
            "(default: %(default)s)",
        )
    return top


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    # jsii's end-of-life banner for Node.js 20 on every synth (Makefile, demo/__main__.py).
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    try:
        return deploy(args) if args.verb == "deploy" else stop(args)
    except Refused as exc:
        say(f"error: {exc}")
        return 2
    except Failed as exc:
        say(f"error: {exc}")
        return 1
