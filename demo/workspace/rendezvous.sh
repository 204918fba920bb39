#!/bin/sh
# Every node prints its rank; the main node waits for each worker over TCP at the address
# and port the launcher provides (LAUNCHER_MAIN_ADDR, LAUNCHER_MAIN_PORT), as torchrun would.
rank="$AWS_BATCH_JOB_NODE_INDEX"
echo "rank $rank of $AWS_BATCH_JOB_NUM_NODES: main at $LAUNCHER_MAIN_ADDR:$LAUNCHER_MAIN_PORT"
if [ -d "$LAUNCHER_EFS/shards" ]; then  # what the pipeline's first step prepared
  echo "rank $rank reads $(find "$LAUNCHER_EFS/shards" -type f | wc -l) shards from $LAUNCHER_EFS/shards"
fi
if [ "$rank" = "$AWS_BATCH_JOB_MAIN_NODE_INDEX" ]; then
  workers=$((AWS_BATCH_JOB_NUM_NODES - 1))
  while [ "$workers" -gt 0 ]; do
    # -e: the connection itself is the reader's stdin (nothing races our own stdin's EOF).
    nc -l -p "$LAUNCHER_MAIN_PORT" -e sh -c 'cat > /tmp/rendezvous-message'
    echo "rank $rank received: $(cat /tmp/rendezvous-message)"
    workers=$((workers - 1))
  done
  echo "rendezvous complete" > "$LAUNCHER_EFS/rendezvous"
else
  # The main node may not listen yet: try for 20 s, quietly (a refused try is expected), and
  # end the node with the last try's error if it never answers.
  sent=""
  for _ in $(seq 1 200); do
    if error="$(echo "hello from rank $rank" | nc "$LAUNCHER_MAIN_ADDR" "$LAUNCHER_MAIN_PORT" 2>&1)"; then
      sent=yes
      break
    fi
    sleep 0.1
  done
  if [ -z "$sent" ]; then
    echo "rank $rank: no rendezvous: the main node did not answer at $LAUNCHER_MAIN_ADDR:$LAUNCHER_MAIN_PORT in 20 s ($error)" >&2
    exit 1
  fi
fi
