# shellcheck shell=sh disable=SC2170 # -lt @NAME@: the assembler puts the number in
# shellcheck disable=SC2010 # ls | grep -c: names the nodes write (node-N, done), devices (uverbsN)
## The shell every node of `launcher check` runs (behind the usual prelude).
##
## Each finding is one line, `LAUNCHER_CHECK node=N key=value`; the main node's NCCL test
## output is forwarded as `LAUNCHER_CHECK_NCCL <line>`. launcher.job.check parses them.
## POSIX sh, for dash (Ubuntu-based images such as AWS's nccl-tests image) and busybox.
##
## Nodes meet through a directory on the cluster's EFS ($LAUNCHER_EFS/.launcher-check/JOB):
## each node writes its address there (which proves EFS is mounted, writable and shared), the
## main node listens on the rendezvous port and each worker connects to it (task interface to
## task interface), and for NCCL the main node leaves a one-time SSH key there so that
## `mpirun` can start `all_reduce_perf` on every node. The directory is removed at the end.
##
## How this file becomes the check job's command (launcher.node.check_script, with
## launcher.node.assemble): the lines that start with ## and the ShellCheck directives that give
## a reason after a second # are left out, and each @NAME@ becomes its value from
## launcher.node.check_script (the wait, the SSH port, the NCCL sweep, the two Python probes);
## the rest is the script byte for byte (tests/node/test_assembled.py pins it). The one
## directive without a reason below has always been part of the script.
node="${AWS_BATCH_JOB_NODE_INDEX:-0}"; nodes="${AWS_BATCH_JOB_NUM_NODES:-1}"
job="${AWS_BATCH_JOB_ID%%#*}"; shared="${LAUNCHER_EFS:-/mnt/efs}/.launcher-check/$job"
out() { echo "LAUNCHER_CHECK node=$node $1=$2"; }
have() { command -v "$1" >/dev/null 2>&1; }
wait_for() { _t=0; while [ "$(ls "$shared" 2>/dev/null | grep -c "$1")" -lt "$2" ]; do
  [ "$_t" -ge @WAIT_SECONDS@ ] && return 1; sleep 1; _t=$((_t + 1)); done; return 0; }

out efa_devices "$(ls /dev/infiniband/ 2>/dev/null | grep -c '^uverbs')"
## The newline between tr's first quotes is a newline character, as the script always had it.
# shellcheck disable=SC2012 # device names, listed for the report
out infiniband "$(ls /dev/infiniband/ 2>/dev/null | tr '
' ' ')"
fi="$(command -v fi_info || echo /opt/amazon/efa/bin/fi_info)"
if [ -x "$fi" ]; then out efa_provider "$("$fi" -p efa -t FI_EP_RDM 2>&1 | @COUNT_EFA_PROVIDERS@)"
else out efa_provider none; fi
if have nvidia-smi; then out gpus "$(nvidia-smi -L 2>/dev/null | @COUNT_GPUS@)"; else out gpus none; fi

# On ECS the job role's credentials come from the agent's endpoint (169.254.170.2), and the
# instance's metadata service must be out of reach (ECS_AWSVPC_BLOCK_IMDS on the nodes).
if [ -n "${AWS_CONTAINER_CREDENTIALS_RELATIVE_URI:-}" ]; then
  if have python3; then
    python3 -c '@CREDENTIALS_PROBE@' "$AWS_CONTAINER_CREDENTIALS_RELATIVE_URI" | while read -r kv; do out "${kv%%=*}" "${kv#*=}"; done
  elif have curl; then
    if curl -s -m 5 "http://169.254.170.2$AWS_CONTAINER_CREDENTIALS_RELATIVE_URI" | grep -q AccessKeyId; then out job_role ok; else out job_role unreachable; fi
    if curl -s -m 2 -o /dev/null http://169.254.169.254/; then out imds reachable; else out imds blocked; fi
  else out job_role none; out imds none; fi
fi

# The data buckets (LAUNCHER_CHECK_BUCKETS: BUCKET[/PREFIX] ...), listed with the job role.
if [ -n "${LAUNCHER_CHECK_BUCKETS:-}" ]; then
  if have python3; then
    # shellcheck disable=SC2086
    python3 -c '@S3_PROBE@' "$LAUNCHER_CHECK_REGION" $LAUNCHER_CHECK_BUCKETS | while read -r kv; do out "${kv%%=*}" "${kv#*=}"; done
  else out s3 none; fi
fi

# FSx for Lustre (LAUNCHER_FSX, where the job sees the node's mount): written by every node,
# seen by every node.
if [ -n "${LAUNCHER_FSX:-}" ]; then
  lustre="$LAUNCHER_FSX/.launcher-check/$job"
  if mkdir -p "$lustre" && echo "$node" > "$lustre/node-$node"; then out fsx_write ok; else out fsx_write failed; fi
  _t=0; while [ "$(ls "$lustre" 2>/dev/null | grep -c '^node-')" -lt "$nodes" ] && [ "$_t" -lt @WAIT_SECONDS@ ]; do sleep 1; _t=$((_t + 1)); done
  out fsx_shared "$(ls "$lustre" 2>/dev/null | grep -c '^node-')"
fi

addr="$(hostname -i 2>/dev/null | cut -d' ' -f1)"
if mkdir -p "$shared" && echo "$addr" > "$shared/node-$node"; then out efs_write ok; else out efs_write failed; fi
wait_for '^node-' "$nodes"; out efs_shared "$(ls "$shared" 2>/dev/null | grep -c '^node-')"

port="${LAUNCHER_MAIN_PORT:-29500}"
if [ "$node" = 0 ]; then
  got=0; i=1
  while [ "$i" -lt "$nodes" ]; do
    if have python3; then
      python3 -c 'import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)
s.bind(("",int(sys.argv[1]))); s.listen(); s.settimeout(@WAIT_SECONDS@)
c,_=s.accept(); print(c.recv(64).decode().strip())' "$port" > "$shared/rdzv-$i" 2>/dev/null
    elif have nc; then
      timeout @WAIT_SECONDS@ nc -l -p "$port" -e sh -c "cat > '$shared/rdzv-$i'" 2>/dev/null
    else out rendezvous "none"; break; fi
    grep -q '^hello' "$shared/rdzv-$i" 2>/dev/null && got=$((got + 1))
    i=$((i + 1))
  done
  [ "$nodes" -gt 1 ] && out rendezvous "$got/$((nodes - 1))"
else
  ok=failed; t=0
  while [ "$t" -lt @WAIT_SECONDS@ ]; do
    if have python3; then
      python3 -c 'import socket,sys
c=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=5); c.sendall(sys.argv[3].encode())' \
        "$LAUNCHER_MAIN_ADDR" "$port" "hello $node" 2>/dev/null && ok=ok
    elif have nc; then echo "hello $node" | nc "$LAUNCHER_MAIN_ADDR" "$port" 2>/dev/null && ok=ok
    else ok=none; fi
    [ "$ok" = failed ] || break
    sleep 1; t=$((t + 1))
  done
  out rendezvous "$ok"
fi

gpus="${LAUNCHER_GPUS_PER_NODE:-0}"
if [ "$gpus" -gt 0 ] && have all_reduce_perf && have mpirun && have sshd && have ssh-keygen; then
  if [ "$node" = 0 ]; then
    ssh-keygen -q -t ed25519 -N '' -f "$shared/key" && touch "$shared/key-ready"
  fi
  wait_for '^key-ready$' 1
  mkdir -p /root/.ssh /run/sshd && cat "$shared/key.pub" >> /root/.ssh/authorized_keys
  "$(command -v sshd)" -p @SSH_PORT@ && touch "$shared/sshd-$node"
  if [ "$node" = 0 ]; then
    wait_for '^sshd-' "$nodes"
    hosts=""; n=0
    while [ "$n" -lt "$nodes" ]; do hosts="$hosts${hosts:+,}$(cat "$shared/node-$n"):$gpus"; n=$((n + 1)); done
    out nccl ran
    mpirun --allow-run-as-root -np "$((nodes * gpus))" -H "$hosts" --bind-to none \
      --mca plm_rsh_args "-p @SSH_PORT@ -i $shared/key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null" \
      -x PATH -x LD_LIBRARY_PATH -x FI_PROVIDER -x FI_EFA_USE_DEVICE_RDMA -x NCCL_SOCKET_IFNAME \
      -x NCCL_NET_PLUGIN -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,NET -x NCCL_DEBUG_FILE=/dev/stdout \
      all_reduce_perf -b @MIN_BYTES@ -e 2G -f 2 -g 1 -n 20 2>&1 | sed 's/^/LAUNCHER_CHECK_NCCL /'
  fi
elif [ "$node" = 0 ]; then
  out nccl "none"
fi

if [ "$node" = 0 ]; then touch "$shared/done"; sleep 2; rm -rf "$shared" "${lustre:-/nonexistent}"
else wait_for '^done$' 1; fi
exit 0
