"""The node watch's worker side: says hello to the main node's watch, beats, reports its code.

``python3 -c PROGRAM HOST PORT NODE DIR START_SECONDS``: connects to the main node's watch at
HOST:PORT and says hello with this job's token and its rank NODE, trying again (a little later
each time, at most RETRY_SECONDS apart) until it is welcomed or START_SECONDS have passed; then
beats every HEARTBEAT_SECONDS until the prelude writes the command's exit code to DIR/exit, and
sends it. The prelude also runs it alone for a worker that ends before its command (_report).

What the node runs is this module below the ``node program`` line, without its annotations and
``__main__`` guards, its names put in as values (launcher.node.assemble); the guards let the
tests import ``welcomed`` with the program's globals set as the guarded lines would set them.
"""

from launcher.node.watch import HEARTBEAT_SECONDS, LOST_AFTER_SECONDS, RETRY_SECONDS
from launcher.node.watch import WATCH_TOKEN_ENV, WELCOME_LINE

# fmt: off
# --- node program ---
import os, socket, sys, time
if __name__ == "__main__":
    host, port, node, d = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    deadline = time.monotonic() + float(sys.argv[5])
    token = os.environ.pop(WATCH_TOKEN_ENV)
def welcomed() -> socket.socket | None:
    try:
        c = socket.create_connection((host, port), timeout=5)
    except OSError: return None
    try:
        c.sendall(f"hello {token} {node}\n".encode())
        c.settimeout(LOST_AFTER_SECONDS)  # the main node answers at once; silence this long: try again
        if c.makefile("rb").readline(64) == WELCOME_LINE:
            c.settimeout(5); return c
    except OSError: pass
    c.close(); return None
if __name__ == "__main__":
    pause = 0.1
    while True:
        c = welcomed()
        if c is not None: break
        if time.monotonic() + pause > deadline: sys.exit(0)
        time.sleep(pause); pause = min(2 * pause, RETRY_SECONDS)
    done = os.path.join(d, "exit")
    try:
        while not os.path.exists(done):
            c.sendall(b"beat\n"); time.sleep(HEARTBEAT_SECONDS)
        c.sendall(f"exit {open(done).read().strip()}\n".encode())
    except OSError: pass
