"""An emulated AWS for the demo, the benchmarks, the tests and rehearsals of a deploy: moto in
server mode, reached over real HTTP.

Everything the launcher does goes through ``AWS_ENDPOINT_URL``, exactly as with real AWS.
``python -m devenv.emulator PORT`` serves one until killed (the demo's);
``python -m devenv.emulator deploy -c env=NAME`` deploys an environment of cdk.json into one,
in its own account and any Region (devenv/emulate.py).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import requests

from devenv import moto_gaps
from devenv.processes import allowed

if TYPE_CHECKING:
    from moto.server import ThreadedMotoServer

ACCOUNT = "123456789012"
REGION = "us-east-1"


@dataclass
class MotoServer:
    server: ThreadedMotoServer
    url: str

    @classmethod
    def start(cls, port: int = 0) -> MotoServer:
        allowed("moto")
        from moto.server import ThreadedMotoServer

        moto_gaps.patch_moto_models()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        host, bound = server.get_host_and_port()
        started = cls(server, f"http://{host}:{bound}")
        # moto keeps accounts in module-level backends that outlive a stopped server, so a
        # second server in one process (`make bench`) would see the first one's stacks.
        started.reset()
        return started

    def stop(self) -> None:
        self.server.stop()

    @property
    def env(self) -> dict[str, str]:
        """Environment for a process that should talk to this server (the launcher CLI)."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
        }

    def client(self, service: str) -> Any:  # boto3 clients are untyped
        return session().client(service, endpoint_url=self.url)

    def reset(self) -> None:
        """Empty every account."""
        requests.post(f"{self.url}/moto-api/reset", timeout=10)
        moto_gaps.batch_without_docker(self.url)

    def deploy(self, cloud_assembly: Path, stack_names: list[str]) -> dict[str, dict[str, str]]:
        return deploy(self.url, cloud_assembly, stack_names)


# The emulator's credentials for its default account; any key that moto has not issued is
# that account's (moto.iam.models.get_account_id_from).
TESTING_KEYS = ("testing", "testing")


def session(region: str = REGION, keys: tuple[str, str] = TESTING_KEYS) -> boto3.Session:
    return boto3.Session(
        aws_access_key_id=keys[0], aws_secret_access_key=keys[1], region_name=region
    )


def account_keys(url: str, account: str) -> tuple[str, str]:
    """Credentials that act in ``account`` on the server at ``url``: moto serves a request in
    the account whose IAM issued its access key, else in its default account (ACCOUNT). A
    key for another account is made there, through moto's account header."""
    if account == ACCOUNT:
        return TESTING_KEYS
    iam = session().client("iam", endpoint_url=url)
    iam.meta.events.register(
        "before-sign.iam.*",
        lambda request, **_: request.headers.__setitem__("x-moto-account-id", account),
    )
    user = "emulator"
    if not any(u["UserName"] == user for u in iam.list_users()["Users"]):
        iam.create_user(UserName=user)
    key = iam.create_access_key(UserName=user)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


def deploy(
    url: str,
    cloud_assembly: Path,
    stack_names: list[str],
    *,
    region: str = REGION,
    keys: tuple[str, str] = TESTING_KEYS,
) -> dict[str, dict[str, str]]:
    """Create each stack (in the given order) through CloudFormation, in ``region`` and the
    account of ``keys``, or update it where it exists; return their outputs."""
    aws = session(region, keys)
    moto_gaps.prepare_account(aws, url)
    cf = aws.client("cloudformation", endpoint_url=url)
    deployed = {s["StackName"] for s in cf.describe_stacks()["Stacks"]}
    outputs: dict[str, dict[str, str]] = {}
    for name in stack_names:
        template = json.loads((cloud_assembly / f"{name}.template.json").read_text())
        request = {
            "StackName": name,
            "TemplateBody": json.dumps(
                moto_gaps.adapt(template, aws.client("batch", endpoint_url=url))
            ),
            "Capabilities": ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
        }
        verb = "UPDATE" if name in deployed else "CREATE"
        (cf.update_stack if name in deployed else cf.create_stack)(**request)
        stack = cf.describe_stacks(StackName=name)["Stacks"][0]
        if stack["StackStatus"] != f"{verb}_COMPLETE":
            reason = stack.get("StackStatusReason")
            raise RuntimeError(f"{name}: {stack['StackStatus']} {reason}")
        outputs[name] = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    moto_gaps.default_security_groups(aws, url)
    return outputs


def serve(port: int) -> None:
    """Run a moto server until killed (for the demo, which outlives one Python process)."""
    import signal
    import threading

    server = MotoServer.start(port)
    print(server.url, flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    stopped.wait()
    server.stop()


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] and sys.argv[1].isdigit():
        serve(int(sys.argv[1]))
    else:
        from devenv import emulate

        sys.exit(emulate.main(sys.argv[1:]))
