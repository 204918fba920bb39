"""The Covalent front door: ``efa_batch``, an executor that runs a workflow's electrons on the
cluster (``efa_batch``: the executor, through ``Cluster.remote``).

Beside ``launcher.cli`` and ``launcher.torchx``: it may import the API and the values below
it; nothing imports it. Covalent loads it from the ``covalent.executor.executor_plugins``
entry point (the ``covalent`` extra) inside the Covalent server, so it needs covalent, which
the launcher's own venv does not have: nothing of the launcher imports it.
"""
