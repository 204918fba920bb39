"""``launcher``, the command line: parse, call the API, print, map errors to exit codes.

A front door, beside ``launcher.torchx``: it may import anything below it and nothing imports
it. ``main.py`` assembles the parser and maps errors to exit codes; each command is a module of
its own, named for it (``launcher logs`` is ``cmd_logs.py``); ``base.py`` holds what commands
share (the ``Command`` class, common options, finding the cluster or a job, printing);
``console.py``, ``tables.py`` and ``escapes.py`` draw for a terminal.
"""
