"""Why a test run could not do its work, in words an owner can act on: a module the tests could not find (which
one, where it was looked for from, and one thing to do), or a file of the workspace the tests looked for that no
commit holds (the clean room has committed files only: agents/verify/clean_room.py).

Pure functions over a run's output; the list of the workspace's uncommitted files is the caller's (git)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import PurePosixPath

from agents.verify.suite_env import CONFIG_FILE
from agents.workspaces.folders import names_a_credential

# node (ESM): `Cannot find package 'vite' imported from /x/y.js`, `Cannot find module '/x/z' imported from /x/y.js`
_NODE_ESM = re.compile(r"Cannot find (?:package|module) '(?P<name>[^'\n]+)' imported from (?P<where>\S+)")
# node (CommonJS): `Error: Cannot find module 'left-pad'` then `Require stack:` / `- /x/y.js`
_NODE_CJS = re.compile(r"Cannot find module '(?P<name>[^'\n]+)'(?:\s*Require stack:\s*-\s*(?P<where>\S+))?")
_PYTHON = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '(?P<name>[^'\n]+)'")
_PY_FRAME = re.compile(r'File "(?P<file>[^"\n]+)", line \d+')
_PYTEST_FRAME = re.compile(r"^(?P<file>\S+\.py):\d+: in ", re.M)
MAX_UNTRACKED = 2_000  # workspace files looked for in an output (more: the first ones, by path)


def missing_module(output: str, room: str | None = None) -> str | None:
    """One sentence when `output` shows a module the tests could not find: which, where from, what to do."""
    for pattern in (_NODE_ESM, _NODE_CJS):
        if match := pattern.search(output):
            name, where = match.group("name"), match.group("where")
            return (
                f"the module `{_shown(name, room)}` cannot be found{_from(where, room)}: install it in the workspace "
                "so the tests find it there (the sandbox shows the workspace and its own `node_modules`, nothing of "
                f"other folders), or set a command that runs without it in `{CONFIG_FILE}` [tests] command"
            )
    if match := _PYTHON.search(output):
        before = output[: match.start()]
        frames = [m.group("file") for m in _PY_FRAME.finditer(before)] or [
            m.group("file") for m in _PYTEST_FRAME.finditer(before)
        ]
        return (
            f"the module `{match.group('name')}` cannot be found{_from(frames[-1] if frames else None, room)}: "
            "install it in the workspace's environment (its `.venv`, which the bot uses), or set the command that "
            f"has it in `{CONFIG_FILE}` [tests] command"
        )
    return None


def _shown(path: str, room: str | None) -> str:
    """A path inside the clean room relative to it (its folder is gone after the run); anything else as it is."""
    if room and path.removeprefix("file://").startswith(room.rstrip("/") + "/"):
        return path.removeprefix("file://")[len(room.rstrip("/")) + 1 :]
    return path


def _from(where: str | None, room: str | None) -> str:
    return f" (looked for from `{_shown(where.rstrip(':'), room)}`)" if where else ""


def needed_untracked(outputs: Iterable[str], untracked: Iterable[str]) -> list[str]:
    """Which of the workspace's uncommitted files (`untracked`, relative paths; a folder ends in `/`) the runs'
    outputs name: by their whole path, or a file by its name when that is distinctive (a dot, five characters or
    more), each standing on its own (not inside a longer name)."""
    text = "\n".join(outputs)
    if not text:
        return []
    found = []
    for path in list(untracked)[:MAX_UNTRACKED]:
        name = PurePosixPath(path.rstrip("/")).name
        names = [path] if path.endswith("/") else [path, *([name] if "." in name.strip(".") and len(name) >= 5 else [])]
        end = "" if path.endswith("/") else r"(?![\w-])"  # a folder's path goes on into its files
        if any(re.search(rf"(?<![\w.-]){re.escape(n)}{end}", text) for n in names):
            found.append(path.rstrip("/"))
    return found


def keep_advice(path: str) -> str:
    """The warning for a file the tests looked for that the clean room did not have (a credential file: kept only
    by the owner's untracked `.agentlab.toml`, never by a committed one)."""
    where = (
        f"an untracked `{CONFIG_FILE}` of the workspace (a committed one never hands over a credential file)"
        if names_a_credential(path)
        else f"`{CONFIG_FILE}`"
    )
    return (
        f"the tests looked for `{path}`, which the workspace has but no commit does: the bot tests committed files "
        f'only; if the tests need it, declare it in {where}: [tests] keep = ["{path}"]'
    )
