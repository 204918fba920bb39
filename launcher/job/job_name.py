"""A job's default name, made from its command when the user gives none (``--name``).

What a person would call the job: the script it runs (``python3 train.py`` and ``sh
train.sh`` are ``train``), a module run with ``python -m`` (``http-server``), else the
program. A shell's ``-c SCRIPT`` is read for the same, so ``sh -c 'cd /data && python3
prep.py'`` is ``prep`` and ``sh -c 'echo hi'`` is ``echo``, not ``sh``. Pure and deterministic:
the same command always gets the same name, and every name is one Batch accepts
(``jobspec._JOB_NAME``: up to 128 letters, digits, ``-`` and ``_``, starting with a letter or
digit).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

MAX_LENGTH = 128  # SubmitJob's jobName: "It can be up to 128 letters long"
SCRIPT_SUFFIXES = (".py", ".sh")
SHELLS = frozenset({"sh", "bash", "dash", "ash", "ksh", "zsh", "busybox"})
# Words of a shell script that set up rather than do the work: skipped when naming.
SETUP = frozenset(
    {"cd", "set", "export", "source", ".", "true", ":", "umask", "ulimit", "trap", "mkdir"}
)
# Words that run the next word: the program is the word after them.
PREFIXES = frozenset({"exec", "env", "time", "nohup", "nice", "command"})
SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", ";;", "\n"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SHELL_C = re.compile(r"^-[a-z]*c[a-z]*$")  # -c, -ec, -lc, -xec ...


def default_name(command: Sequence[str]) -> str:
    """A job name from the command: its script's, its module's, or its program's."""
    return clean(_base(list(command)) or "job")


def _base(words: list[str]) -> str | None:
    if not words:
        return None
    script = _shell_script(words)
    if script is not None:
        return _from_script(script) or _program(words[0])
    found = next((w for w in words if w.endswith(SCRIPT_SUFFIXES)), None)
    if found is not None:
        return found.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    if "-m" in words[:-1] and _program(words[0]).startswith("python"):
        return words[words.index("-m") + 1]
    return _program(words[0])


def _shell_script(words: list[str]) -> str | None:
    """The script of ``sh -c SCRIPT`` (any shell, any flags that include ``c``), else None."""
    if _program(words[0]) not in SHELLS:
        return None
    for i, word in enumerate(words[1:-1], start=1):
        if _SHELL_C.match(word):
            return words[i + 1]
        if not word.startswith("-"):
            return None  # sh FILE: a script file, named like any other
    return None


def _from_script(script: str) -> str | None:
    """The name of a shell script's work: a script file it runs, else its first command that
    is not set-up (``cd``, ``export``, an assignment)."""
    try:
        lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:  # an unclosed quote: the shell would refuse it; name from its words
        tokens = script.split()
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token in SEPARATORS:
            commands.append([])
        else:
            commands[-1].append(token)
    for words in commands:
        prefixed = False  # after ``env``, ``nice``...: their options too
        while words and (
            _ASSIGNMENT.match(words[0])
            or words[0] in PREFIXES
            or (prefixed and words[0].startswith("-"))
        ):
            prefixed = prefixed or words[0] in PREFIXES
            words = words[1:]
        if words and words[0] not in SETUP:
            return _base(words)
    return None


def _program(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def clean(base: str) -> str:
    """Batch's characters only, starting with a letter or digit, at most 128 of them."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "-", base).strip("-_") or "job"
    return cleaned[:MAX_LENGTH]
