"""The runner of a Python function's job, on each node (launcher.node.function says why).

``python3 -c PROGRAM``: reads ``FUNCTION_ENV``'s payload, refuses one of another Python in one
line, runs the function with the caller's own cloudpickle and writes this rank's result. On the
main node, with GATHER_ENV=all, it then waits for every worker's result, since Batch ends the
whole job when the main node's command ends. Its exit status: 0 when the function returned, 1
when it raised, REFUSED_EXIT when the payload cannot be loaded here.

A result is one JSON line (``attempt``, first; ``status``: ok, error or refused; for an error
the exception's type, message and traceback) and then the value or the exception, pickled; an
exception that cannot be pickled leaves the bytes empty and the caller raises the line's words
instead.

Where: ``s3://BUCKET/PREFIX/`` signs GET and PUT with SigV4 (the job role's credentials from
the ECS agent's endpoint, or the SDKs' variables when they are set, in the SDKs' own order;
``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL`` point it elsewhere, path-style, as the tests do);
a directory is read and written as files, each result made private to the directory's owner
(a local job's node is root, the directory the user's).
"""

from launcher.node.function import (
    CALL,
    FUNCTION_ENV,
    GATHER_ENV,
    GATHER_SECONDS,
    META,
    PAYLOAD,
    REFUSED_EXIT,
    REGION_ENV,
    RESULT,
)

# fmt: off
# --- node program ---
import datetime, hashlib, hmac, json, os, sys, tempfile, time, traceback
import urllib.error, urllib.parse, urllib.request, zipfile
where = os.environ[FUNCTION_ENV]
rank = int(os.environ.get("LAUNCHER_NODE_RANK", "0"))
nodes = int(os.environ.get("LAUNCHER_NNODES", "1"))
attempt = os.environ.get("AWS_BATCH_JOB_ATTEMPT", "1")  # Batch's, and the local backend's
creds: dict[str, str]
def credentials() -> dict[str, str]:
    if os.environ.get("AWS_ACCESS_KEY_ID") and os.environ.get("AWS_SECRET_ACCESS_KEY"):
        return {"AccessKeyId": os.environ["AWS_ACCESS_KEY_ID"],
                "SecretAccessKey": os.environ["AWS_SECRET_ACCESS_KEY"],
                "Token": os.environ.get("AWS_SESSION_TOKEN", "")}
    full = os.environ.get("AWS_CONTAINER_CREDENTIALS_FULL_URI") or (
        "http://169.254.170.2" + os.environ["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"])
    headers = {}
    if os.environ.get("AWS_CONTAINER_AUTHORIZATION_TOKEN"):
        headers["Authorization"] = os.environ["AWS_CONTAINER_AUTHORIZATION_TOKEN"]
    request = urllib.request.Request(full, headers=headers)
    return dict(json.load(urllib.request.urlopen(request, timeout=10)))
def s3(method: str, name: str, body: bytes = b"", first: int = 0) -> bytes | None:
    """One signed request for the object ``name`` of the call (``first``: its first bytes
    only); None: no such object."""
    bucket, _, prefix = where[len("s3://"):].partition("/")
    region = os.environ[REGION_ENV]
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    key = urllib.parse.quote(prefix + name, safe="/-_.~")
    if endpoint:
        url, path = endpoint.rstrip("/"), "/" + bucket + "/" + key
    else:
        url, path = f"https://{bucket}.s3.{region}.amazonaws.com", "/" + key
    now = datetime.datetime.now(datetime.timezone.utc)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    headers = {"host": urllib.parse.urlsplit(url).netloc, "x-amz-date": stamp,
               "x-amz-content-sha256": hashlib.sha256(body).hexdigest()}
    if creds.get("Token"):
        headers["x-amz-security-token"] = creds["Token"]
    if first:
        headers["range"] = f"bytes=0-{first - 1}"
    names = ";".join(sorted(headers))
    canonical = "\n".join([method, path, "", *(f"{k}:{headers[k]}" for k in sorted(headers)),
                           "", names, headers["x-amz-content-sha256"]])
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    signing = ("AWS4" + creds["SecretAccessKey"]).encode()
    for part in (day, region, "s3", "aws4_request"):
        signing = hmac.new(signing, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(signing, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={creds['AccessKeyId']}/{scope}, "
                                f"SignedHeaders={names}, Signature={signature}")
    if method == "PUT":  # urllib's default type would be a form's
        headers["Content-Type"] = "application/octet-stream"
    request = urllib.request.Request(url + path, data=body if method == "PUT" else None,
                                     headers=headers, method=method)
    for tried in range(5):  # not ``attempt``: that is the job's (AWS_BATCH_JOB_ATTEMPT)
        try:
            return bytes(urllib.request.urlopen(request, timeout=60).read())
        except urllib.error.HTTPError as exc:
            # Without s3:ListBucket, S3 answers 403 for a key that does not exist.
            if exc.code in (403, 404) and method == "GET":
                return None
            if exc.code < 500 or tried == 4:
                raise
        except OSError:
            if tried == 4:
                raise
        time.sleep(2 ** tried)
    return None
def read(name: str, first: int = 0) -> bytes | None:
    if where.startswith("s3://"):
        return s3("GET", name, first=first)
    try:
        with open(os.path.join(where, name), "rb") as f:
            return f.read(first or -1)
    except FileNotFoundError:
        return None
def this_attempts(name: str) -> bool:
    """Whether a worker's result is of this attempt: a retried job's workers run again, and
    the result of an attempt that failed may still be there."""
    head = read(name, 64)
    return head is not None and head.startswith(b'{"attempt": ' + json.dumps(attempt).encode())
def write(name: str, data: bytes) -> None:
    if where.startswith("s3://"):
        s3("PUT", name, data)
        return
    owner = os.stat(where)
    fd, part = tempfile.mkstemp(dir=where, prefix="." + name)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    if os.getuid() == 0 and owner.st_uid != 0:
        os.chown(part, owner.st_uid, owner.st_gid)
    os.replace(part, os.path.join(where, name))
def finish(header: dict[str, str], body: bytes, code: int) -> None:
    try:
        line = json.dumps({"attempt": attempt, **header}).encode()  # the attempt first
        write(RESULT + str(rank), line + b"\n" + body)
    except Exception as exc:  # noqa: BLE001 - said in one line; the job's log has the rest
        print(f"launcher: this node's result could not be written to {where}: {exc}",
              file=sys.stderr)
        sys.exit(code or 1)
    if rank == 0 and nodes > 1 and os.environ.get(GATHER_ENV) == "all":
        deadline = time.monotonic() + GATHER_SECONDS
        waiting, pause = list(range(1, nodes)), 0.1  # workers end about together: ask soon
        while waiting and time.monotonic() < deadline:
            waiting = [r for r in waiting if not this_attempts(RESULT + str(r))]
            if waiting:
                time.sleep(pause)
                pause = min(2.0, pause * 2)
        if waiting:
            print(f"launcher: no result from node(s) {' '.join(map(str, waiting))} after "
                  f"{GATHER_SECONDS} s", file=sys.stderr)
    sys.exit(code)
def refuse(message: str) -> None:
    print("launcher: " + message, file=sys.stderr)
    finish({"status": "refused", "message": message}, b"", REFUSED_EXIT)
if __name__ == "__main__":
    creds = credentials() if where.startswith("s3://") else {}
    payload = read(PAYLOAD)
    if payload is None:
        refuse("no payload at " + where + PAYLOAD + ": it expired or was removed, or this "
               "job's role may not read it")
    scratch = tempfile.mkdtemp(prefix="launcher-function-")
    archive = os.path.join(scratch, "payload.zip")
    with open(archive, "wb") as f:
        f.write(payload or b"")
    bundle = zipfile.ZipFile(archive)
    meta = json.loads(bundle.read(META))
    mine = "%d.%d.%d" % sys.version_info[:3]
    if mine.split(".")[:2] != meta["python"].split(".")[:2]:
        refuse(f"this image runs Python {mine}, the caller Python {meta['python']}: a function "
               f"travels only between one Python version; use an image with Python "
               f"{'.'.join(meta['python'].split('.')[:2])}, or call from Python "
               f"{'.'.join(mine.split('.')[:2])}")
    sys.path.insert(0, archive)  # the caller's cloudpickle, ahead of any the image has
    import cloudpickle
    if cloudpickle.__version__ != meta["cloudpickle"]:
        refuse(f"this image loaded cloudpickle {cloudpickle.__version__} before the caller's "
               f"{meta['cloudpickle']} (from {cloudpickle.__file__}); a function travels only "
               "between one cloudpickle version")
    try:
        function, args, kwargs = cloudpickle.loads(bundle.read(CALL))
        value = function(*args, **kwargs)
        body = cloudpickle.dumps(value)
    except BaseException as exc:  # noqa: BLE001 - the caller gets what the function raised
        # From the function's frame on: the runner's own is nothing the caller wrote.
        tb = exc.__traceback__.tb_next if exc.__traceback__ else None
        text = "".join(traceback.format_exception(type(exc), exc, tb))
        sys.stderr.write(text)
        try:
            body = cloudpickle.dumps(exc)
        except Exception:  # noqa: BLE001 - its words still travel in the header
            body = b""
        kind = type(exc)
        finish({"status": "error", "type": f"{kind.__module__}.{kind.__qualname__}",
                "message": str(exc), "traceback": text}, body, 1)
    finish({"status": "ok"}, body, 0)
