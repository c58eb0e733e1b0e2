"""The bot's folders in the temporary directory, named after the process that made them, and the start-up sweep.

Every folder the bot makes there (a task's services logs, an MCP research folder, the browser's proxy socket, pasta's
pid file, the sandbox's private copies, the git index of a diff, a test run's reports, a screenshot) is
`agentlab-<kind>-<pid>-<label>-<random>`: `temp_folder` makes one, `temp_prefix` is the prefix for a
`tempfile.TemporaryDirectory`. Each is removed by its maker when its task or call ends; a bot (or runner) killed with
SIGKILL leaves them behind, so `sweep_leftovers` runs at every start and removes those whose maker is gone:

- a named folder goes when its pid is no live process, or when the live process of that pid started after the folder
  last changed (its ctime: the pid was reused by another program, since the maker existed before its folder);
- a folder of a known kind without a pid in its name (made by an older version of the bot) goes once it has not
  changed for `UNNAMED_AGE_SECONDS` (a day: no task runs that long);
- folders of another user, links and files are never touched;
- the pasta a killed bot left running (its pid file is in a `pasta` folder) is killed before its folder goes.

A bot never removes the folders of a task still running, in itself or in another live bot or runner on the machine:
their makers are alive.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from agents.sandbox.clean_env import child_env
from agents.sandbox.safe_paths import unlock_folders

KINDS = ("services", "mcp", "proxy", "pasta", "sandbox", "index", "junit", "shot", "doctor")
UNNAMED_AGE_SECONDS = 24 * 3600.0
_START_SLACK_SECONDS = 2.0  # a process's start time is known to a clock tick, the boot time to a second
_KIND = re.compile(r"^agentlab-(?P<kind>" + "|".join(KINDS) + r")-(?P<rest>.+)$")
# mkdtemp's random part: 8 characters of [a-z0-9_]; the label never holds a dash
_NAMED = re.compile(r"^(?P<pid>\d+)-(?P<label>[A-Za-z0-9_.]+)-[a-z0-9_]{8}$")


def temp_prefix(kind: str, label: str) -> str:
    """`agentlab-<kind>-<this pid>-<label>-`: the prefix of a folder the sweep knows (`tempfile` adds the rest)."""
    if kind not in KINDS:
        raise ValueError(f"unknown temporary folder kind {kind!r}: add it to KINDS so the sweep knows it")
    clean = re.sub(r"[^A-Za-z0-9_.]", "_", label) or "x"
    return f"agentlab-{kind}-{os.getpid()}-{clean}-"


def temp_folder(kind: str, label: str) -> Path:
    """A new private folder (mode 0700) in the temporary directory, named so the start-up sweep knows its maker."""
    return Path(tempfile.mkdtemp(prefix=temp_prefix(kind, label)))


@contextlib.contextmanager
def scratch_folder(kind: str, label: str) -> Iterator[Path]:
    """A new `temp_folder` for a sandboxed run to write, deleted on exit by `remove_folder`."""
    folder = temp_folder(kind, label)
    try:
        yield folder
    finally:
        remove_folder(folder)


def remove_folder(folder: Path) -> None:
    """Delete `folder` and everything in it, never through a link: a sandboxed run that wrote it may have left a folder
    it made unwritable there, holding a link out. Its folders are made writable first by descriptors
    (`safe_paths.unlock_folders`: never a file, never a link's target); `tempfile.TemporaryDirectory`'s clean-up
    chmods the very path it failed to delete, and so, before Python 3.11.8 and 3.12.2, the target of such a link."""
    unlock_folders(folder)
    try:
        shutil.rmtree(folder, ignore_errors=True)
    except RecursionError:  # a tree deeper than Python's recursion limit: shutil.rmtree recurses per level (3.11)
        pass
    if os.path.lexists(folder):  # what recursion could not reach: rm walks iteratively, links deleted, never followed
        rm = ["rm", "-rf", "--one-file-system", "--", str(folder)]
        subprocess.run(rm, capture_output=True, check=False, env=child_env())


def sweep_leftovers(folder: Path | None = None) -> list[Path]:
    """Remove what killed bots left in the temporary folder (see the module docstring); returns what was removed."""
    removed: list[Path] = []
    base = Path(folder or tempfile.gettempdir())
    now = time.time()
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for entry in entries:
        match = _KIND.match(entry.name)
        if match is None:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            continue
        named = _NAMED.match(match.group("rest"))
        if named is not None:
            # ctime: a program inside the folder may set its mtime back (utime), never its ctime
            gone = not _maker_alive(int(named.group("pid")), info.st_ctime)
        else:
            gone = now - info.st_mtime > UNNAMED_AGE_SECONDS
        if gone:
            if match.group("kind") == "pasta":
                _end_left_pasta(Path(entry.path))
            remove_folder(Path(entry.path))
            removed.append(Path(entry.path))
    return removed


def _end_left_pasta(folder: Path) -> None:
    """Kill the pasta a killed bot left running: pasta forks into the background, in no process group or session of
    the bot's, and (as Debian's passt 2023 does) does not end when the namespace it wired out is gone. Its pid is in
    the folder's `pasta.pid`, and only a process whose command line names that very file is killed (the pid may be
    another program's by now)."""
    pid_file = folder / "pasta.pid"
    try:
        pid = int(pid_file.read_text().strip())
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return
    if os.fsencode(str(pid_file)) in arguments:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _maker_alive(pid: int, changed: float) -> bool:
    """Whether the process `pid` is alive and may be the one that made a folder last changed at `changed`."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: alive
    started = process_start(pid)
    return started is None or started <= changed + _START_SLACK_SECONDS


def process_start(pid: int) -> float | None:
    """When `pid` started (seconds since the epoch), from /proc; None where that cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22 of stat(5), counted after the command name
        return _boot_time() + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise ValueError("no btime in /proc/stat")
