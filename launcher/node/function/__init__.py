"""What a node of a Python function's job runs (launcher.api.functions): the runner.

``python3 -c RUNNER``, behind the usual prelude, so it gets its rank and the job's size as
every command does (LAUNCHER_NODE_RANK, LAUNCHER_NNODES). It reads the call's payload from
where FUNCTION_ENV says (``s3://BUCKET/PREFIX/`` on AWS, a directory of the EFS mount in a
local run), checks that this node's Python is the caller's, runs the function with the caller's
own cloudpickle (it travels in the payload), and writes ``result-RANK`` beside the payload.

Why the runner is the standard library only: images rarely carry an AWS SDK, so it signs its
two S3 requests itself (SigV4, as the check job's S3 probe does: launcher.node.check_script),
with the job role's credentials from the ECS agent's endpoint. Why a payload carries its
serializer: cloudpickle promises to load only what the same version of itself wrote ("The
same version of cloudpickle should be used ... and the exact same version of Python"; its
README), and an image's copy, if any, is rarely the caller's. The Python version cannot travel,
so it is checked first: a payload of another Python's is refused before any of it is loaded.

runner.py is a module so that mypy and the tests read it; launcher.node.assemble makes the
program from it, its names put in as the values below.
"""

from __future__ import annotations

from launcher.node import assemble, prelude

FUNCTION_ENV = "LAUNCHER_FUNCTION"  # where the call's objects are: s3://BUCKET/PREFIX/ or DIR/
REGION_ENV = "LAUNCHER_FUNCTION_REGION"  # the bucket's Region (SigV4 signs for it)
GATHER_ENV = "LAUNCHER_FUNCTION_GATHER"  # "all": the main node waits for every rank's result
PAYLOAD = "payload"  # a zip: meta.json, call.pkl and the caller's cloudpickle package
RESULT = "result-"  # + the rank: a JSON header line, then the pickled value or exception
META = "meta.json"
CALL = "call.pkl"
# Batch ends a multi-node job when its main node's command ends, workers and all: the main node
# waits this long for the workers' results when the caller asked for every rank's value.
GATHER_SECONDS = 600
# A payload this image cannot load: not worth another attempt (the prelude's exit code for an
# image that cannot do what the job asked; the retry rules end the job on it).
REFUSED_EXIT = prelude.EFA_REQUIRED_EXIT

VALUES: dict[str, int | str | bytes] = {
    "FUNCTION_ENV": FUNCTION_ENV,
    "REGION_ENV": REGION_ENV,
    "GATHER_ENV": GATHER_ENV,
    "PAYLOAD": PAYLOAD,
    "RESULT": RESULT,
    "META": META,
    "CALL": CALL,
    "GATHER_SECONDS": GATHER_SECONDS,
    "REFUSED_EXIT": REFUSED_EXIT,
}
RUNNER = assemble.program(assemble.read("launcher.node.function", "runner.py"), VALUES)
