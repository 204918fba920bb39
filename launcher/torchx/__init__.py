"""The TorchX front door: the ``efa_batch`` scheduler (``scheduler``, with the AppDef's
translation in ``appdef``, its run options in ``options`` and the launcher's errors as TorchX
reports them in ``errors``) and TorchX 0.7.0's own schedulers, registered again beside it
(``builtins``).

Beside ``launcher.cli``: it may import the API and the values below it; nothing imports it.
"""
