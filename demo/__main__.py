"""`make demo`: synthesize the CDK app with two pools (the default GPU pool and a CPU Spot
pool), deploy it into moto, patch a workspace into a local registry, submit a 2-node job
through the emulated Batch API, then run a two-step pipeline locally: data preparation as an
array on the CPU pool, and the 2-node job after it.

    python -m demo [--workdir .demo]     run it; servers keep running afterwards
    python -m demo stop [--workdir .demo] stop what the demo started
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

ROOT = Path(__file__).resolve().parent.parent
WORKSPACE = Path(__file__).resolve().parent / "workspace"
STACKS = ["EfaBatch-Network", "EfaBatch-Storage", "EfaBatch"]
# The second pool: CPU nodes on Spot for data preparation (one-node jobs and arrays only).
POOLS = '{"cpu": {"instance_type": "c7i.4xlarge", "max_nodes": 4, "spot": true}}'


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
    from devenv.images import PYTHON, push_python_base
    from devenv.registry_server import RegistryServer

    if workdir.exists():
        stop(workdir)
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)

    say("1. Synthesize the CDK app with the real CDK CLI: cdk.json's pool and a CPU pool")
    assembly = workdir / "cdk.out"
    synth = ["cdk", "synth", "--quiet", "--no-notices", "-c", f"pools={POOLS}", "-o", str(assembly)]
    sh(synth, os.environ.copy())
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
    say("4. What the launcher discovers from the stack (no ARN typed): its pools")
    sh(launcher("outputs"), env)

    say("5. Build a base image offline (busybox and python3 from Debian) and push it")
    base = f"{registry.host}/demo-base:1"
    push_python_base(engine.client(), f"{registry.host}/demo-base")
    print(f"base image: {base} (sh, python3 {PYTHON})")
    env_file = write_env_file(workdir, {**env, "LAUNCHER_IMAGE": base})

    say("6. Patch the demo workspace into the base, in the registry (no pull)")
    sh(launcher("build", "--image", base, "--workspace", str(WORKSPACE)), env, capture=True)

    say("7. Submit the 2-node job through the emulated AWS Batch API (the AWS code path)")
    image_args = ["--image", base, "--workspace", str(WORKSPACE), "--"]
    job = ["--nodes", "2", *image_args, "/workspace/rendezvous.sh"]
    aws_job = sh(launcher("run", *job), env, capture=True).strip().splitlines()[-1]
    sh(launcher("status", aws_job), env)
    print("(moto has no instances: the job waits RUNNABLE, as on a queue scaled to zero)")

    say("8. A two-step pipeline locally: prepare the data on the CPU pool, then train after it")
    prepare = [
        "run",
        "--local",
        "--pool",
        "cpu",
        "--array",
        "2",
        *image_args,
        "/workspace/prepare.sh",
    ]
    prep_job = sh(launcher(*prepare), env, capture=True).strip().splitlines()[-1]
    print("(2 children on the CPU pool; the training job waits for both)")
    local_job = (
        sh(launcher("run", "--local", "--follow", "--after", prep_job, *job), env, capture=True)
        .strip()
        .splitlines()[-1]
    )
    sh(launcher("status", prep_job), env)
    sh(launcher("status", local_job), env)
    sh(launcher("list", "--local", "--all", "--all-pools"), env)
    print(
        f"shared file written by the main node: {(workdir / 'efs' / 'rendezvous').read_text()}",
        end="",
    )

    say("Done. The emulated AWS, the registry and the Docker engine keep running.")
    print(f"  AWS job {aws_job} (RUNNABLE); local jobs {prep_job} -> {local_job}")
    print("  stop it all with: make demo-stop")
    print(f"\nYour turn, in a new shell: source {_shown(env_file)}   then: launcher list")


# What a new shell needs to reach the demo's stack: the launcher on PATH, the emulated AWS, the
# registry, the engine, the local state and EFS stand-in, and the base image the demo pushed.
HANDOVER = (
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
    "DOCKER_HOST",
    "LAUNCHER_REGISTRY",
    "LAUNCHER_IMAGE",
    "LAUNCHER_LOCAL_STATE",
    "LAUNCHER_LOCAL_EFS",
)


def write_env_file(workdir: Path, env: dict[str, str]) -> Path:
    """``WORKDIR/env``, for ``source``: the ports change every run, so the file is the one
    place that knows them. Private (0600): it names the emulator's credentials."""
    bin_dir = Path(sys.executable).parent
    lines = [
        "# make demo's emulated AWS, registry and Docker engine, for a new shell:",
        f"#   source {_shown(workdir / 'env')}",
        f'export PATH={shlex.quote(str(bin_dir))}:"$PATH"',
        *(f"export {name}={shlex.quote(env[name])}" for name in HANDOVER),
    ]
    path = workdir / "env"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("\n".join(lines) + "\n")
    return path


def _shown(path: Path) -> str:
    """A path as the user types it: relative when under the current directory."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


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
