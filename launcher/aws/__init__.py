"""The AWS backend: the one boto3 client, the Batch backend, logs, exec, and Batch's words.

What it may import: the shared modules at launcher's top (errors, progress, cache, backend),
``launcher.job``, ``launcher.stack``, ``launcher.node`` and ``launcher.image``; never the local
backend, the API or a front door (pyproject.toml's import-linter contracts hold this).
"""
