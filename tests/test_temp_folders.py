"""The start-up sweep of the bot's temporary folders: what it removes and what it never touches."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agents.sandbox.temp_folders import process_start, sweep_leftovers, temp_folder, temp_prefix


def test_only_the_folders_of_gone_makers_and_old_unnamed_ones_are_swept(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    alive = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.05)
        gone = Path(tempfile.mkdtemp(prefix=f"agentlab-services-{dead.pid}-3-", dir=tmp_path))
        running = Path(tempfile.mkdtemp(prefix=f"agentlab-proxy-{alive.pid}-4-", dir=tmp_path))
        mine = Path(tempfile.mkdtemp(prefix=temp_prefix("mcp", "5"), dir=tmp_path))
        old = Path(tempfile.mkdtemp(prefix="agentlab-pasta-", dir=tmp_path))
        os.utime(old, (time.time() - 3 * 86400,) * 2)
        recent = Path(tempfile.mkdtemp(prefix="agentlab-mcp-6-", dir=tmp_path))
        other_kind = Path(tempfile.mkdtemp(prefix=f"agentlab-routing-eval-{dead.pid}-x-", dir=tmp_path))
        target = tmp_path / "target"
        target.mkdir()
        (target / "kept.txt").write_text("x")
        link = tmp_path / f"agentlab-services-{dead.pid}-7-abcdefgh"
        link.symlink_to(target)
        removed = set(sweep_leftovers(tmp_path))
    finally:
        alive.kill()
        alive.wait()
    assert removed == {gone, old}, removed
    assert running.exists() and mine.exists() and recent.exists() and other_kind.exists()
    assert link.is_symlink() and (target / "kept.txt").exists()


def test_a_folder_is_named_after_its_maker() -> None:
    folder = temp_folder("services", "12")
    try:
        assert folder.name.startswith(f"agentlab-services-{os.getpid()}-12-"), folder
        assert folder.stat().st_mode & 0o777 == 0o700
        started = process_start(os.getpid())
        assert started is not None and started <= folder.stat().st_ctime
    finally:
        folder.rmdir()
