"""The shell every node of ``launcher check`` runs (behind the usual prelude).

Each finding is one line, ``LAUNCHER_CHECK node=N key=value``; the main node's NCCL test
output is forwarded as ``LAUNCHER_CHECK_NCCL <line>``. ``launcher.job.check`` parses them.
POSIX sh, for dash (Ubuntu-based images such as AWS's nccl-tests image) and busybox.

Nodes meet through a directory on the cluster's EFS (``$LAUNCHER_EFS/.launcher-check/JOB``):
each node writes its address there (which proves EFS is mounted, writable and shared), the
main node listens on the rendezvous port and each worker connects to it (task interface to
task interface), and for NCCL the main node leaves a one-time SSH key there so that
``mpirun`` can start ``all_reduce_perf`` on every node. The directory is removed at the end.
"""

from __future__ import annotations

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

SCRIPT = f"""\
node="${{AWS_BATCH_JOB_NODE_INDEX:-0}}"; nodes="${{AWS_BATCH_JOB_NUM_NODES:-1}}"
job="${{AWS_BATCH_JOB_ID%%#*}}"; shared="${{LAUNCHER_EFS:-/mnt/efs}}/.launcher-check/$job"
out() {{ echo "LAUNCHER_CHECK node=$node $1=$2"; }}
have() {{ command -v "$1" >/dev/null 2>&1; }}
wait_for() {{ _t=0; while [ "$(ls "$shared" 2>/dev/null | grep -c "$1")" -lt "$2" ]; do
  [ "$_t" -ge {WAIT_SECONDS} ] && return 1; sleep 1; _t=$((_t + 1)); done; return 0; }}

out efa_devices "$(ls /dev/infiniband/ 2>/dev/null | grep -c '^uverbs')"
out infiniband "$(ls /dev/infiniband/ 2>/dev/null | tr '\n' ' ')"
fi="$(command -v fi_info || echo /opt/amazon/efa/bin/fi_info)"
if [ -x "$fi" ]; then out efa_provider "$("$fi" -p efa -t FI_EP_RDM 2>&1 | {COUNT_EFA_PROVIDERS})"
else out efa_provider none; fi
if have nvidia-smi; then out gpus "$(nvidia-smi -L 2>/dev/null | {COUNT_GPUS})"; else out gpus none; fi

# On ECS the job role's credentials come from the agent's endpoint (169.254.170.2), and the
# instance's metadata service must be out of reach (ECS_AWSVPC_BLOCK_IMDS on the nodes).
if [ -n "${{AWS_CONTAINER_CREDENTIALS_RELATIVE_URI:-}}" ]; then
  if have python3; then
    python3 -c '{CREDENTIALS_PROBE}' "$AWS_CONTAINER_CREDENTIALS_RELATIVE_URI" | while read -r kv; do out "${{kv%%=*}}" "${{kv#*=}}"; done
  elif have curl; then
    if curl -s -m 5 "http://169.254.170.2$AWS_CONTAINER_CREDENTIALS_RELATIVE_URI" | grep -q AccessKeyId; then out job_role ok; else out job_role unreachable; fi
    if curl -s -m 2 -o /dev/null http://169.254.169.254/; then out imds reachable; else out imds blocked; fi
  else out job_role none; out imds none; fi
fi

# The data buckets (LAUNCHER_CHECK_BUCKETS: BUCKET[/PREFIX] ...), listed with the job role.
if [ -n "${{LAUNCHER_CHECK_BUCKETS:-}}" ]; then
  if have python3; then
    # shellcheck disable=SC2086
    python3 -c '{S3_PROBE}' "$LAUNCHER_CHECK_REGION" $LAUNCHER_CHECK_BUCKETS | while read -r kv; do out "${{kv%%=*}}" "${{kv#*=}}"; done
  else out s3 none; fi
fi

# FSx for Lustre (LAUNCHER_FSX, where the job sees the node's mount): written by every node,
# seen by every node.
if [ -n "${{LAUNCHER_FSX:-}}" ]; then
  lustre="$LAUNCHER_FSX/.launcher-check/$job"
  if mkdir -p "$lustre" && echo "$node" > "$lustre/node-$node"; then out fsx_write ok; else out fsx_write failed; fi
  _t=0; while [ "$(ls "$lustre" 2>/dev/null | grep -c '^node-')" -lt "$nodes" ] && [ "$_t" -lt {WAIT_SECONDS} ]; do sleep 1; _t=$((_t + 1)); done
  out fsx_shared "$(ls "$lustre" 2>/dev/null | grep -c '^node-')"
fi

addr="$(hostname -i 2>/dev/null | cut -d' ' -f1)"
if mkdir -p "$shared" && echo "$addr" > "$shared/node-$node"; then out efs_write ok; else out efs_write failed; fi
wait_for '^node-' "$nodes"; out efs_shared "$(ls "$shared" 2>/dev/null | grep -c '^node-')"

port="${{LAUNCHER_MAIN_PORT:-29500}}"
if [ "$node" = 0 ]; then
  got=0; i=1
  while [ "$i" -lt "$nodes" ]; do
    if have python3; then
      python3 -c 'import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)
s.bind(("",int(sys.argv[1]))); s.listen(); s.settimeout({WAIT_SECONDS})
c,_=s.accept(); print(c.recv(64).decode().strip())' "$port" > "$shared/rdzv-$i" 2>/dev/null
    elif have nc; then
      timeout {WAIT_SECONDS} nc -l -p "$port" -e sh -c "cat > '$shared/rdzv-$i'" 2>/dev/null
    else out rendezvous "none"; break; fi
    grep -q '^hello' "$shared/rdzv-$i" 2>/dev/null && got=$((got + 1))
    i=$((i + 1))
  done
  [ "$nodes" -gt 1 ] && out rendezvous "$got/$((nodes - 1))"
else
  ok=failed; t=0
  while [ "$t" -lt {WAIT_SECONDS} ]; do
    if have python3; then
      python3 -c 'import socket,sys
c=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=5); c.sendall(sys.argv[3].encode())' \\
        "$LAUNCHER_MAIN_ADDR" "$port" "hello $node" 2>/dev/null && ok=ok
    elif have nc; then echo "hello $node" | nc "$LAUNCHER_MAIN_ADDR" "$port" 2>/dev/null && ok=ok
    else ok=none; fi
    [ "$ok" = failed ] || break
    sleep 1; t=$((t + 1))
  done
  out rendezvous "$ok"
fi

gpus="${{LAUNCHER_GPUS_PER_NODE:-0}}"
if [ "$gpus" -gt 0 ] && have all_reduce_perf && have mpirun && have sshd && have ssh-keygen; then
  if [ "$node" = 0 ]; then
    ssh-keygen -q -t ed25519 -N '' -f "$shared/key" && touch "$shared/key-ready"
  fi
  wait_for '^key-ready$' 1
  mkdir -p /root/.ssh /run/sshd && cat "$shared/key.pub" >> /root/.ssh/authorized_keys
  "$(command -v sshd)" -p {SSH_PORT} && touch "$shared/sshd-$node"
  if [ "$node" = 0 ]; then
    wait_for '^sshd-' "$nodes"
    hosts=""; n=0
    while [ "$n" -lt "$nodes" ]; do hosts="$hosts${{hosts:+,}}$(cat "$shared/node-$n"):$gpus"; n=$((n + 1)); done
    out nccl ran
    mpirun --allow-run-as-root -np "$((nodes * gpus))" -H "$hosts" --bind-to none \\
      --mca plm_rsh_args "-p {SSH_PORT} -i $shared/key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null" \\
      -x PATH -x LD_LIBRARY_PATH -x FI_PROVIDER -x FI_EFA_USE_DEVICE_RDMA -x NCCL_SOCKET_IFNAME \\
      -x NCCL_NET_PLUGIN -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,NET -x NCCL_DEBUG_FILE=/dev/stdout \\
      all_reduce_perf -b {MIN_BYTES} -e 2G -f 2 -g 1 -n 20 2>&1 | sed 's/^/LAUNCHER_CHECK_NCCL /'
  fi
elif [ "$node" = 0 ]; then
  out nccl "none"
fi

if [ "$node" = 0 ]; then touch "$shared/done"; sleep 2; rm -rf "$shared" "${{lustre:-/nonexistent}}"
else wait_for '^done$' 1; fi
exit 0
"""
