"""``launcher completion``: the shell completion script (argcomplete's), which asks ``launcher``
itself for the command tree."""

from __future__ import annotations

import argparse
import sys

from launcher.cli.base import Command

SHELLS = ("bash", "zsh", "fish")


class Completion(Command):
    name = "completion"
    help = "print the shell completion script for bash, zsh or fish"
    notes = "The script completes commands and options; it asks launcher itself, with no AWS call."
    examples = (
        "# bash: for this shell, then for every new one",
        'eval "$(launcher completion bash)"',
        "launcher completion bash > ~/.local/share/bash-completion/completions/launcher",
        "# zsh: a directory on $fpath (then `autoload -U compinit && compinit` in ~/.zshrc)",
        'launcher completion zsh > "${fpath[1]}/_launcher"',
        "# fish",
        "launcher completion fish > ~/.config/fish/completions/launcher.fish",
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")

    def run(self, args: argparse.Namespace) -> int:
        from argcomplete.shell_integration import shellcode

        sys.stdout.write(shellcode(["launcher"], shell=args.shell))
        return 0
