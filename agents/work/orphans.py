"""Processes left behind by a killed bot: every worker command carries a tag in its environment, found again via /proc.

A SIGKILLed bot cannot kill its workers' commands (they run in their own sessions). At the next start the
runtime looks for processes tagged with an interrupted task of this database and kills them.
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
from pathlib import Path

log = logging.getLogger(__name__)

TAG = "AGENTLAB_TASK"


def instance_token(database_path: Path) -> str:
    """Identifies this bot installation (its database), so two bots on one machine never touch each other's work."""
    return hashlib.sha256(str(Path(database_path).resolve()).encode()).hexdigest()[:12]


def task_tag(token: str, task_id: int) -> dict[str, str]:
    return {TAG: f"{token}:{task_id}"}


def _tag_of(pid: int) -> str | None:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or not ours to read
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(TAG.encode() + b"="):
            return entry.split(b"=", 1)[1].decode(errors="replace")
    return None


def kill_orphans(token: str, task_ids: set[int]) -> list[int]:
    """SIGKILL every process tagged with one of these tasks of this installation; returns the pids killed."""
    wanted = {f"{token}:{task_id}" for task_id in task_ids}
    killed: list[int] = []
    if not wanted or not Path("/proc").is_dir():
        return killed
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        if _tag_of(int(entry.name)) in wanted:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except OSError:
                pass
    if killed:
        log.warning(
            "killed %d process(es) left running by interrupted task(s) %s: %s", len(killed), sorted(task_ids), killed
        )
    return killed
