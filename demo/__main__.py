"""`make demo`: synthesize the CDK app, deploy it into moto, patch a workspace into a local
registry, submit a 2-node job through the emulated Batch API, then run the same job locally.

    python -m demo [--workdir .demo]     run it; servers keep running afterwards
    python -m demo stop [--workdir .demo] stop what the demo started
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKSPACE = Path(__file__).resolve().parent / "workspace"
STACKS = ["EfaBatch-Network", "EfaBatch-Storage", "EfaBatch"]


def say(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def sh(args: list[str], env: dict, capture: bool = False) -> str:
    print(
        "$ " + " ".join(args if args[0] != sys.executable else ["launcher", *args[3:]]), flush=True
    )
    result = subprocess.run(
        args, env=env, text=True, check=False, stdout=subprocess.PIPE if capture else None
    )
    if result.returncode != 0:
        raise SystemExit(f"demo: step failed ({result.returncode}): {' '.join(args)}")
    if capture:
        print(result.stdout, end="", flush=True)
    return result.stdout or ""


def launcher(*args: str) -> list[str]:
    return [sys.executable, "-m", "launcher", *args]


def _record(workdir: Path, name: str, pid: int) -> None:
    pids = workdir / "pids.json"
    data = json.loads(pids.read_text()) if pids.exists() else {}
    data[name] = pid
    pids.write_text(json.dumps(data))


def start_moto(workdir: Path) -> str:
    from devenv.processes import free_port, wait_until

    port = free_port()
    log = open(workdir / "moto.log", "wb")  # noqa: SIM115 - the server writes it until stopped
    process = subprocess.Popen(
        [sys.executable, "-m", "devenv.emulator", str(port)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    _record(workdir, "moto", process.pid)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        import requests

        try:
            return requests.get(f"{url}/moto-api/data.json", timeout=1).ok
        except requests.RequestException:
            return False

    wait_until(ready, 60, "moto server", process)
    return url


def run(workdir: Path) -> None:
    from devenv.docker_engine import DockerEngine
    from devenv.emulator import deploy
    from devenv.images import push_busybox_base
    from devenv.registry_server import RegistryServer

    if workdir.exists():
        stop(workdir)
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)

    say("1. Synthesize the CDK app with the real CDK CLI")
    assembly = workdir / "cdk.out"
    sh(["cdk", "synth", "--quiet", "-o", str(assembly)], os.environ.copy())
    print(f"stacks: {', '.join(STACKS)} (templates in {assembly})")

    say("2. Start an emulated AWS (moto), a registry and a Docker engine, all on 127.0.0.1")
    moto_url = start_moto(workdir)
    registry = RegistryServer.start(workdir / "registry")
    _record(workdir, "registry", registry.process.pid)
    engine = DockerEngine.start(workdir / "dockerd")
    if engine.process is not None:
        _record(workdir, "dockerd", engine.process.pid)
    print(f"moto: {moto_url}\nregistry: {registry.host}\ndocker: {engine.host}")

    say("3. Deploy the synthesized templates into moto through CloudFormation")
    outputs = deploy(moto_url, assembly, STACKS)["EfaBatch"]
    print(f"EfaBatch: {len(outputs)} outputs")

    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": moto_url,
        "AWS_ACCESS_KEY_ID": "demo",
        "AWS_SECRET_ACCESS_KEY": "demo",
        "AWS_DEFAULT_REGION": "us-east-1",
        "DOCKER_HOST": engine.host,
        # moto's ECR host does not exist: push workspace images to the local registry.
        "LAUNCHER_REGISTRY": registry.host,
        "LAUNCHER_LOCAL_STATE": str(workdir / "state"),
        "LAUNCHER_LOCAL_EFS": str(workdir / "efs"),
    }
    say("4. What the launcher discovers from the stack (no ARN typed)")
    sh(launcher("outputs"), env)

    say("5. Build a base image offline (busybox from Debian) and push it to the registry")
    base = f"{registry.host}/demo-base:1"
    push_busybox_base(engine.client(), f"{registry.host}/demo-base")
    print(f"base image: {base}")

    say("6. Patch the demo workspace into the base, in the registry (no pull)")
    image = sh(
        launcher("build", "--image", base, "--workspace", str(WORKSPACE)), env, capture=True
    ).strip()

    say("7. Submit the 2-node job through the emulated AWS Batch API (the AWS code path)")
    job = [
        "--nodes",
        "2",
        "--image",
        base,
        "--workspace",
        str(WORKSPACE),
        "--",
        "/workspace/rendezvous.sh",
    ]
    aws_job = sh(launcher("run", *job), env, capture=True).strip().splitlines()[-1]
    sh(launcher("status", aws_job), env)
    print("(moto has no instances: the job waits RUNNABLE, as on a queue scaled to zero)")

    say("8. Run the same job locally: one container per node, rendezvous over 127.0.0.1")
    local_job = (
        sh(launcher("run", "--local", "--follow", *job), env, capture=True).strip().splitlines()[-1]
    )
    sh(launcher("status", local_job), env)
    print(
        f"shared file written by the main node: {(workdir / 'efs' / 'rendezvous').read_text()}",
        end="",
    )

    say("Done. Everything is still running:")
    print(f"  emulated AWS      AWS_ENDPOINT_URL={moto_url}  (stack EfaBatch)")
    print(f"  registry          {registry.host}  (workspace image {image})")
    print(f"  docker            DOCKER_HOST={engine.host}")
    print(f"  local job state   {workdir / 'state'}   EFS stand-in {workdir / 'efs'}")
    print(f"  AWS job           {aws_job}   local job {local_job}")
    print("  stop it all with: make demo-stop")


def stop(workdir: Path) -> None:
    pids = workdir / "pids.json"
    if not pids.exists():
        return
    for name, pid in json.loads(pids.read_text()).items():
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
        print(f"stopped {name} ({pid})")
    pids.unlink()
    netns = workdir / "dockerd" / "exec" / "netns"
    for entry in netns.glob("*") if netns.is_dir() else ():
        subprocess.run(["umount", "-l", str(entry)], check=False, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m demo")
    parser.add_argument("action", nargs="?", default="run", choices=["run", "stop"])
    parser.add_argument("--workdir", default=str(ROOT / ".demo"))
    args = parser.parse_args()
    workdir = Path(args.workdir).resolve()
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    if args.action == "stop":
        stop(workdir)
    else:
        run(workdir)


if __name__ == "__main__":
    main()
