"""A first multi-node job: every node says who it is, from what the launcher gives each node
(docs/jobs.md has the whole list). Run it from its directory:
launcher run --local --follow --nodes 2 -- python3 hello.py"""

import os

rank = int(os.environ["LAUNCHER_NODE_RANK"])  # 0 on the main node, then 1, 2, ...
nodes = int(os.environ["LAUNCHER_NNODES"])
print(f"hello from node {rank} of {nodes}")
if rank == 0:
    main = f"{os.environ['LAUNCHER_MAIN_ADDR']}:{os.environ['LAUNCHER_MAIN_PORT']}"
    print(f"node 0 is the main node: the others reach it at {main}")
