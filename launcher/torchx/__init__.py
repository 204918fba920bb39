"""The TorchX front door: the ``efa_batch`` scheduler (``scheduler``, with the AppDef's
translation in ``appdef``, its run options in ``options`` and the launcher's errors as TorchX
reports them in ``errors``) and TorchX 0.7.0's own schedulers, registered again beside it
(``builtins``).

Beside ``launcher.cli``: it may import the API and the values below it; nothing imports it.
"""

import logging

# TorchX's CLI logs at INFO (torchx/cli/main.py ``run_main``: ``logging.basicConfig``), where
# botocore says "Found credentials in environment variables." and "Found endpoint for batch
# via: environment_global." on every command that reaches AWS: noise, not the user's news.
# Only where nobody chose a level for them (a Runner user's own setting stays).
for _name in ("botocore.credentials", "botocore.configprovider"):
    if logging.getLogger(_name).level == logging.NOTSET:
        logging.getLogger(_name).setLevel(logging.WARNING)
