"""The TorchX front door: the ``efa_batch`` scheduler and TorchX 0.7.0's own schedulers,
registered again beside it.

Beside ``launcher.cli``: it may import the API and the values below it; nothing imports it.
"""
