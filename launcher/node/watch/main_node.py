"""The node watch's main-node side: hears the workers, and ends the command for one lost.

``python3 -c PROGRAM PORT CHILD DIR NODES START_SECONDS ADDRESS``: listens on PORT (on the
task's own address, see launcher.node.watch), welcomes each worker's hello (this job's token,
its rank), and writes to DIR what the prelude reads when the command ends: ``lost`` (a worker
whose connection ended with no exit code, or silent for LOST_AFTER_SECONDS), ``failed`` (a
worker's rank and its exit code other than 0), ``missing`` (workers not heard within
START_SECONDS) and ``strangers`` (connections without this job's token: how many, the first's
address). A lost, failed or missing worker also ends the command (SIGTERM to CHILD).

What the node runs is this module below the ``node program`` line, without its annotations,
declarations and ``__main__`` guards, its names put in as values (launcher.node.assemble); the
guards let the tests import ``rank``, ``task_address``, ``admit`` and ``stranger``, with the
program's globals set as the guarded lines would set them.
"""

from launcher.node.watch import HELLO_SECONDS, LOST_AFTER_SECONDS, PENDING_PEERS
from launcher.node.watch import WATCH_TOKEN_ENV, WELCOME_LINE

# fmt: off
# --- node program ---
import hmac, json, os, signal, socket, sys, threading, time, urllib.request
if __name__ == "__main__":
    port, child, d = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    nodes, start_seconds, given = int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
    token = os.environ.pop(WATCH_TOKEN_ENV).encode()
def task_address() -> str:
    try:
        get = urllib.request.build_opener(urllib.request.ProxyHandler({})).open
        nets: list[dict[str, str | list[str]]] = json.load(get(os.environ["ECS_CONTAINER_METADATA_URI_V4"], timeout=5))["Networks"]
        return [a for n in nets if n.get("NetworkMode") == "awsvpc" for a in n["IPv4Addresses"]][0]
    except Exception: return ""
def listen(address: str) -> socket.socket:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((address, port)); s.listen(); return s
if __name__ == "__main__":
    try: s = listen(task_address() if "ECS_CONTAINER_METADATA_URI_V4" in os.environ else given)
    except OSError: s = listen("")
    greeted: set[str]
    pending: dict[socket.socket, bool]
    greeted, lock, pending = set(), threading.Lock(), {}  # pending: oldest first (dicts keep order)
    strangers, first = 0, ""
def note(name: str, text: str) -> None:
    with open(os.path.join(d, name), "a") as f: f.write(text + "\n")
    try: os.kill(child, signal.SIGTERM)
    except OSError: pass
def stranger(peer: tuple[str, int]) -> None:
    global strangers, first
    with lock:
        strangers, first = strangers + 1, first or peer[0]
        with open(os.path.join(d, ".strangers"), "w") as f: f.write(f"{strangers} {first}\n")
        os.replace(os.path.join(d, ".strangers"), os.path.join(d, "strangers"))
def rank(line: bytes) -> str | None:
    words = line.split(b" ")
    if len(words) != 3 or words[0] != b"hello" or not hmac.compare_digest(words[1], token):
        return None
    return str(int(words[2])) if words[2].isdigit() and 0 < int(words[2]) < nodes else None
def watch(c: socket.socket, peer: tuple[str, int]) -> None:
    node: str | None
    code: int | None
    c.settimeout(HELLO_SECONDS); node, code, buf = None, None, b""
    try:
        while code is None:
            data = c.recv(256)
            if not data: break
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if node is None:
                    with lock:  # not after it was cut off for a newer connection
                        node = rank(line) if pending.pop(c, False) else None
                        if node is None: raise ValueError("not a hello of this job, or cut off")
                        greeted.add(node)
                    c.settimeout(LOST_AFTER_SECONDS); c.sendall(WELCOME_LINE)
                elif line.startswith(b"exit ") and line[5:].isdigit(): code = int(line[5:])
            if node is None and len(buf) > 256: break
    except (OSError, ValueError): pass
    c.close()
    if node is None:
        with lock: pending.pop(c, None)
        stranger(peer)
    elif code is None: note("lost", node)
    elif code != 0: note("failed", f"{node} {code}")
def roll_call() -> None:
    time.sleep(start_seconds)
    with lock: missing = [str(n) for n in range(1, nodes) if str(n) not in greeted]
    if missing: note("missing", " ".join(missing))
if __name__ == "__main__":
    threading.Thread(target=roll_call, daemon=True).start()
def admit(c: socket.socket) -> None:
    with lock:
        if len(pending) >= PENDING_PEERS:
            oldest = next(iter(pending)); del pending[oldest]
            try: oldest.shutdown(socket.SHUT_RDWR)  # its own thread sees the end and counts it
            except OSError: pass
        pending[c] = True
if __name__ == "__main__":
    while True:
        c, peer = s.accept(); admit(c)
        threading.Thread(target=watch, args=(c, peer), daemon=True).start()
