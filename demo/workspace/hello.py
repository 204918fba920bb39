"""A first two-node job: each node says who it is, from what the launcher gives every node."""

import os
import socket

rank = int(os.environ["LAUNCHER_NODE_RANK"])  # 0 on the main node
nodes = int(os.environ["LAUNCHER_NNODES"])
print(f"hello from node {rank} of {nodes} on {socket.gethostname()}")
if rank == 0:
    print(f"the main node is at {os.environ['LAUNCHER_MAIN_ADDR']}; workers reach it there")
