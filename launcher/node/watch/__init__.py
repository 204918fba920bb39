"""The node watch: how the main node of a multi-node job hears that a worker is lost or failed.

Two programs, ``main_node`` (the main node's side) and ``worker`` (every other node's), that the
prelude runs with ``python3 -c`` beside the user's command when restarts are on
(launcher/node/prelude.sh, MONITOR and RUN). Workers say hello, beat every few seconds and
report their exit code; the main node's side ends the command when a worker is lost (silence
or a dropped connection without an exit code) or failed, and leaves a file saying which, which
the prelude turns into its exit code (NODE_LOST_EXIT: another attempt).

Why Python, when the rest of the prelude is shell: the watch is a TCP server with a thread a
connection, timeouts, a constant-time token comparison and a read of ECS's task metadata
(JSON over HTTP); POSIX sh has none of these, and nc differs from image to image. Most training
images have python3; one without gets a warning and no watch (the prelude says so).

Why these modules are written compactly, with their values as names (HELLO_SECONDS) and their
statements under ``if __name__ == "__main__":``: they travel inside every job's command, the
same bytes as before they were files; launcher.node.assemble takes out what is only for mypy and
the tests and puts the values in (tests/node/test_assembled.py pins the result). They are
modules so that mypy checks them and tests import their parts (tests/node/test_watch.py).

Only the job's own nodes are heard. A connection counts for nothing until its first line is
"hello TOKEN N": TOKEN the job's own (WATCH_TOKEN_ENV, new with every submit, the same for every
node and attempt of it: launcher.job.jobdef.watch_token), compared in constant time, and N a
worker's rank. Anyone else who reaches the port (on AWS every pool shares one security group
that admits all traffic from itself, so other teams' jobs do) is cut off at its first other
line, or after HELLO_SECONDS of silence, and neither ends nor retries the job; the main node
counts them and says so in one line when its command ends. The token is taken out of the
command's environment, which has no use for it and could print it to the job log.

Nor can anyone keep the workers out. At most PENDING_PEERS connections wait for their hello; a
newcomer past that cuts off the oldest, not itself, so peers that open connections and say
nothing (anyone who reaches the port, in the first seconds of an attempt) must outpace the watch
reading a worker's first line, which the worker sends at once. The main node answers a valid
hello with WELCOME, and a worker whose connection is cut or refused before that tries again, a
little later each time (at most RETRY_SECONDS apart), until it is welcomed or its start deadline
passes; a worker welcomed once never says hello again (its connection lost is the node lost).
Both sides always come from the same prelude: every node range's command is this script, from
one job definition registered by one launcher (launcher.job.jobdef); a submit, a retry or
``launcher resubmit`` changes only the environment. So no worker meets a main node that does
not answer.

Where it listens: the address the workers are given for the main node, and no other. On AWS
that is the task's own (awsvpc) address, which Batch gives the workers as
AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS but not the main node itself: the main node reads
it from ECS's task metadata ($ECS_CONTAINER_METADATA_URI_V4, which the ECS agent sets in every
container since 1.39.0; "Networks" of the container metadata), so loopback and the link-local
ecs-eth0 beside it are left out. Off ECS (the local backend) it is LAUNCHER_MAIN_ADDR, which the
backend gives every node (127.0.0.1). Where the metadata cannot be read, or the address is not
this node's, the watch keeps to every interface (0.0.0.0), not ``hostname -i``, the prelude's
own guess for MASTER_ADDR: that depends on the image's resolver and /etc/hosts, and a wrong
guess would leave every worker unheard and retry the job until its attempts ran out. The token
is the protection; the address only narrows who can try.

It imports the standard library only, and nothing of the launcher: its programs are read into
every job's command and run on whatever python3 the image has (pyproject.toml's import-linter
contracts hold launcher.node to that).
"""

from __future__ import annotations

HEARTBEAT_SECONDS = 5
LOST_AFTER_SECONDS = 30  # a worker silent this long is lost (a dead host sends no FIN)
# The node watch's per-job secret, set with every submit (launcher.job.jobdef).
WATCH_TOKEN_ENV = "LAUNCHER_WATCH_TOKEN"
HELLO_SECONDS = 10  # a connection to the watch says hello within this long (workers do at once)
# Connections yet to say hello, at most: a newcomer past it cuts off the oldest of them, which
# is counted, so peers that hold connections open cannot keep a worker out.
PENDING_PEERS = 64
# The main node's answer to a worker's valid hello, a line. A worker tries again until it gets
# it (RETRY_SECONDS apart at most), within its start deadline ($LAUNCHER_START_SECONDS).
WELCOME = "welcome"
WELCOME_LINE = f"{WELCOME}\n".encode()
RETRY_SECONDS = 1
# Every worker must say hello within this long of the main node's start ($LAUNCHER_START_SECONDS
# overrides it): Batch starts the workers once the main node runs, and a worker whose image
# cannot be pulled, whose volume cannot be mounted or whose host is lost before its command
# never says a word, which would otherwise leave the main node waiting until the job's timeout.
START_SECONDS = 900
# What the programs' names stand for on the node (launcher.node.assemble.program).
VALUES: dict[str, int | str | bytes] = {
    "HEARTBEAT_SECONDS": HEARTBEAT_SECONDS,
    "LOST_AFTER_SECONDS": LOST_AFTER_SECONDS,
    "WATCH_TOKEN_ENV": WATCH_TOKEN_ENV,
    "HELLO_SECONDS": HELLO_SECONDS,
    "PENDING_PEERS": PENDING_PEERS,
    "WELCOME_LINE": WELCOME_LINE,
    "RETRY_SECONDS": RETRY_SECONDS,
}
