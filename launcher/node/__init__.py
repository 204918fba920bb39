"""What runs on every node of a job: the prelude in front of the user's command, the node
watch, the check job's script, and the words (exit codes, log lines) they leave for the
launcher to read.

It imports nothing of the launcher: the launcher imports it to assemble the command a job
definition carries.
"""
