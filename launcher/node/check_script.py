"""The shell every node of ``launcher check`` runs (behind the usual prelude), and its values.

Each finding is one line, ``LAUNCHER_CHECK node=N key=value``; the main node's NCCL test
output is forwarded as ``LAUNCHER_CHECK_NCCL <line>``. ``launcher.job.check`` parses them.
The script is launcher/node/check.sh (what it does and why is written there); SCRIPT is that
file with its ``@NAME@`` placeholders filled from the values here (launcher.node.assemble),
byte for byte the script the check job carried when it was an f-string
(tests/node/test_assembled.py). The two probes are Python that the script runs with
``python3 -c``, kept here as text because the tests run them alone (tests/job/test_check.py).
"""

from __future__ import annotations

from launcher.node import assemble

MIN_BYTES = 256 * 2**20  # all_reduce_perf's sweep: 256 MiB to 2 GiB, sizes the network paces
SSH_PORT = 2022  # the check's own sshd, beside anything the image runs
WAIT_SECONDS = 300  # for the other nodes to appear; Batch starts them within minutes

# Job-role credentials from the ECS agent's endpoint, and whether IMDS answers at all (any
# answer, even IMDSv2's 401, means a container could ask it for the instance role).
CREDENTIALS_PROBE = """import socket, sys, urllib.request
try:
    body = urllib.request.urlopen("http://169.254.170.2" + sys.argv[1], timeout=5).read()
    print("job_role=" + ("ok" if b"AccessKeyId" in body else "no-credentials"))
except Exception:
    print("job_role=unreachable")
s = socket.socket(); s.settimeout(2)
try:
    s.connect(("169.254.169.254", 80)); print("imds=reachable")
except OSError:
    print("imds=blocked")"""

# One ListObjectsV2 (max-keys=1) per data bucket location, signed (SigV4, standard library
# only: images rarely carry an AWS SDK) with the job role's credentials from the ECS agent's
# endpoint: the job role may list exactly its locations (infra/data_access.py), so "ok" proves
# the role, the bucket policy and the route (S3 gateway endpoint or NAT) together.
# AWS_ENDPOINT_URL (the SDKs' variable) points it elsewhere, as the tests do.
S3_PROBE = """import datetime, hashlib, hmac, json, os, sys, urllib.error, urllib.parse, urllib.request
full = os.environ.get("AWS_CONTAINER_CREDENTIALS_FULL_URI") or (
    "http://169.254.170.2" + os.environ["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"])
try:
    creds = json.load(urllib.request.urlopen(full, timeout=5))
except Exception:
    creds = None
region = sys.argv[1]
def sign(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()
for index, location in enumerate(sys.argv[2:]):
    if creds is None:
        print(f"s3_{index}=no-credentials"); continue
    bucket, _, prefix = location.partition("/")
    endpoint = os.environ.get("AWS_ENDPOINT_URL") or f"https://s3.{region}.amazonaws.com"
    base = urllib.parse.urlsplit(endpoint)
    path = "/" + urllib.parse.quote(bucket)
    query = urllib.parse.urlencode(sorted({"list-type": "2", "max-keys": "1",
        "prefix": prefix + "/" if prefix else ""}.items()), quote_via=urllib.parse.quote)
    now = datetime.datetime.now(datetime.timezone.utc)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    headers = {"host": base.netloc, "x-amz-content-sha256": hashlib.sha256(b"").hexdigest(),
        "x-amz-date": stamp}
    if creds.get("Token"):
        headers["x-amz-security-token"] = creds["Token"]
    names = ";".join(sorted(headers))
    canonical = "\\n".join(["GET", path, query, *(f"{k}:{headers[k]}" for k in sorted(headers)),
        "", names, headers["x-amz-content-sha256"]])
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\\n".join(["AWS4-HMAC-SHA256", stamp, scope,
        hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + creds["SecretAccessKey"]).encode()
    for part in (day, region, "s3", "aws4_request"):
        key = sign(key, part)
    access, signature = creds["AccessKeyId"], hmac.new(key, to_sign.encode(), hashlib.sha256)
    headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={access}/{scope}, "
        f"SignedHeaders={names}, Signature={signature.hexdigest()}")
    request = urllib.request.Request(f"{endpoint}{path}?{query}", headers=headers)
    try:
        urllib.request.urlopen(request, timeout=10).read(); print(f"s3_{index}=ok")
    except urllib.error.HTTPError as exc:
        where = exc.headers.get("x-amz-bucket-region")
        code = exc.read().decode(errors="replace").partition("<Code>")[2].partition("<")[0]
        code = code or "no-code"
        print(f"s3_{index}=" + (f"region:{where}" if where and where != region else
            f"error:{exc.code}:{code}"))
    except Exception as exc:
        print(f"s3_{index}=unreachable:{type(exc).__name__}")"""

# What a node counts in its tools' output (tested against real output in tests/fixtures/check).
COUNT_EFA_PROVIDERS = "grep -c 'provider: efa'"  # fi_info -p efa -t FI_EP_RDM; 0: unusable
COUNT_GPUS = "grep -c '^GPU '"  # nvidia-smi -L

SCRIPT = assemble.shell(
    assemble.read("launcher.node", "check.sh"),
    {
        "WAIT_SECONDS": str(WAIT_SECONDS),
        "SSH_PORT": str(SSH_PORT),
        "MIN_BYTES": str(MIN_BYTES),
        "COUNT_EFA_PROVIDERS": COUNT_EFA_PROVIDERS,
        "COUNT_GPUS": COUNT_GPUS,
        "CREDENTIALS_PROBE": CREDENTIALS_PROBE,
        "S3_PROBE": S3_PROBE,
    },
)
