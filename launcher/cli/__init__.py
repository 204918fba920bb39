"""``launcher``, the command line: parse, call the API, print, map errors to exit codes.

A front door, beside ``launcher.torchx``: it may import anything below it and nothing imports
it.
"""
