"""agents/sandbox/pause.py on real processes: a tree that keeps forking is stopped whole, then continued."""

from __future__ import annotations

import asyncio
import os
import signal

from agents.sandbox import pause


async def test_a_tree_that_keeps_forking_is_stopped_whole_then_continued() -> None:
    # a shell starting a child every 10 ms, each child living a second: the tree changes while it is being stopped
    shell = await asyncio.create_subprocess_exec(
        "sh", "-c", "while true; do sleep 1 & sleep 0.01; done", start_new_session=True
    )
    try:
        await asyncio.sleep(0.3)
        async with pause.paused(lambda: pause.tree([shell.pid])):
            stopped = pause.tree([shell.pid])
            await asyncio.sleep(0.2)  # a process left running would have forked meanwhile
            assert pause.tree([shell.pid]) <= stopped, "a process of the tree was still forking"
            assert len(stopped) > 5 and {(pause.state(pid) or "gone") for pid in stopped} <= {"T", "Z", "gone"}
        await asyncio.sleep(0.05)
        running = {(pause.state(pid) or "gone") for pid in pause.tree([shell.pid])}
        assert "T" not in running, f"still stopped after the pause: {running}"
    finally:
        os.killpg(shell.pid, signal.SIGKILL)
        await shell.wait()
