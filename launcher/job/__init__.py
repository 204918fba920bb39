"""A job as values: what the user asked for (``jobspec``, ``jobfile``, ``shapes``), the exact
requests that carry it to Batch (``jobdef``, the dry run, with its parts ``validation``,
``container``, ``environment`` and ``volumes``; ``node_ranges`` and ``resumption`` read them
back), and the rules and readings every backend shares (``info``, ``retry``, ``waiting``,
``capacity``, ``lost_nodes``, ``check``).

Pure: decisions without I/O, so every rule is a unit test. May import ``launcher.stack``,
``launcher.node`` and the shared ``errors`` and ``progress``; no boto3, docker or requests.
"""
