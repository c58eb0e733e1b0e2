"""The programs a command line names that the task itself can rewrite, for the owner's network question.

A sandboxed command's PATH starts with the worktree's `.venv/bin` (so the project's own tools run), and the worker
may replace `.venv` with a folder of its own. An owner who reads `curl -sI https://pypi.org/simple/` and allows it
would then allow the worker's `curl`, with the network. `task_programs` finds each word of the command that the
sandbox's PATH resolves first to a folder the task can write, so the question says whose program it is.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from agents.sandbox.bwrap import SandboxSpec, sandbox_env, task_writes

_WORD = re.compile(
    r"(?<![A-Za-z0-9._+-])[A-Za-z0-9_][A-Za-z0-9._+-]{0,254}(?![A-Za-z0-9._+-])"
)  # a file name PATH may resolve
MAX_WORDS = 400  # a command of thousands of words is shown as a file; its first words are looked up


def task_programs(command: str, spec: SandboxSpec, env: Mapping[str, str]) -> list[Path]:
    """The files the sandbox would run for the command's bare words that lie in folders the task can write, in the
    order the words come. Every word is looked up, not only the ones in a command's place: a caution too many
    (a URL's `python`) costs a line, one too few an owner's wrong decision."""
    path = sandbox_env(env, spec)["PATH"].split(":")
    found: list[Path] = []
    for word in list(dict.fromkeys(_WORD.findall(command)))[:MAX_WORDS]:
        for entry in path:
            candidate = Path(entry) / word
            if _runs(candidate):
                if task_writes(entry, spec):
                    found.append(candidate)
                break
    return found


def _runs(candidate: Path) -> bool:
    """Whether PATH's lookup would run `candidate` (an executable file, through links)."""
    try:
        return candidate.is_file() and os.access(candidate, os.X_OK)
    except OSError:  # a name the file system refuses, a loop of links: nothing runs there
        return False
