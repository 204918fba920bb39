"""What runs on every node of a job: the prelude in front of the user's command, the node
watch, the check job's script, and the words (exit codes, log lines) they leave for the
launcher to read.

- ``prelude.sh``: the prelude, POSIX shell, in named sections (a new check before the command
  is a section there, in the order it must run); ``prelude.py``: its words and values, and
  ``command``, which puts it in front of a job's command.
- ``watch/``: the node watch, the Python the prelude runs beside the command when restarts are
  on (``main_node``, ``worker``), typed and importable for the tests.
- ``check.sh`` and ``check_script.py``: what every node of ``launcher check`` runs.
- ``assemble.py``: how those files become the text a job definition carries (package data, read
  with importlib.resources), byte for byte what it was when they were f-strings
  (tests/node/test_assembled.py pins it).

It imports nothing of the launcher: the launcher imports it to assemble the command a job
definition carries.
"""
