"""An emulated AWS for the demo, the benchmarks and the tests: moto in server mode, reached
over real HTTP.

Everything the launcher does goes through ``AWS_ENDPOINT_URL``, exactly as with real AWS.
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


def session() -> boto3.Session:
    return boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
    )


def deploy(url: str, cloud_assembly: Path, stack_names: list[str]) -> dict[str, dict[str, str]]:
    """Create each stack (in the given order) through CloudFormation; return their outputs."""
    moto_gaps.prepare_account(session(), url)
    cf = session().client("cloudformation", endpoint_url=url)
    outputs: dict[str, dict[str, str]] = {}
    for name in stack_names:
        template = json.loads((cloud_assembly / f"{name}.template.json").read_text())
        cf.create_stack(
            StackName=name,
            TemplateBody=json.dumps(
                moto_gaps.adapt(template, session().client("batch", endpoint_url=url))
            ),
            Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
        )
        stack = cf.describe_stacks(StackName=name)["Stacks"][0]
        if stack["StackStatus"] != "CREATE_COMPLETE":
            reason = stack.get("StackStatusReason")
            raise RuntimeError(f"{name}: {stack['StackStatus']} {reason}")
        outputs[name] = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    moto_gaps.default_security_groups(session(), url)
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

    serve(int(sys.argv[1]))
