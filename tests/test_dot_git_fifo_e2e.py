"""A hostile worker races the bot's own reads of its worktree's `.git` file: a service of the task swapping that file
with a FIFO, again and again, must never have the bot wait on the FIFO.

Before every git call in the worktree (its commits) the bot reads `.git` and the configuration it names, and after
every worker step its guard checks that `.git` is still the file git wrote; all of it on the bot's event loop. The
worker (the scripted model through the real bot and real bwrap) starts a background service in its sandbox that
exchanges `.git` with a FIFO (one `renameat2(RENAME_EXCHANGE)` each time; a new FIFO where the guard deleted it), then
takes a few steps (a guard check each), and stops it. A read by name that sees the FIFO waits for a writer: the whole bot stops. A watchdog thread, seeing
the event loop make no progress for LOOP_GUARD seconds, opens the FIFO for writing so that the read ends, and says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time

import pytest

from tests.conftest import BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.sandbox import needs_bwrap
from tests.support.swappers import dot_git_fifo_swapper
from tests.support.tasks import ended, start_task, tool_results

pytestmark = needs_bwrap

LOOP_GUARD = 3.0  # seconds without a tick of the event loop: it is blocked
STEPS = 20  # worker steps (a guard check each) while the service swaps

SWAPPER = dot_git_fifo_swapper(stoppable=True)


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
@pytest.mark.settings(worker_max_steps=STEPS + 10)
async def test_a_fifo_swapped_in_for_dot_git_never_blocks_the_bot(bot: BotHarness, model: RoleScript) -> None:
    worktrees = bot.runtime.settings.paths.worktrees_dir
    stop, blocked = threading.Event(), []
    beat = [time.monotonic()]

    async def tick() -> None:
        while True:
            beat[0] = time.monotonic()
            await asyncio.sleep(0.1)

    def watch() -> None:
        while not stop.wait(0.5):
            if time.monotonic() - beat[0] < LOOP_GUARD:
                continue
            for name in [p for tree in worktrees.glob("*") for p in (tree / ".git", tree / "fifo")]:
                with contextlib.suppress(OSError):  # ENXIO: no reader waits on this one
                    os.close(os.open(name, os.O_WRONLY | os.O_NONBLOCK))
                    blocked.append(name.name)
            beat[0] = time.monotonic()

    calls = [
        claude_says.tool_use("write_file", {"path": "swap.py", "content": SWAPPER}),
        claude_says.tool_use("run_command", {"command": "python -u swap.py", "background": True}),
        *[claude_says.tool_use("read_file", {"path": "calc.py"}) for _ in range(STEPS)],
        # git's own reads of `.git` (in its processes, bounded by their timeout) are not what this is about: the swap
        # stops before the turn's commit
        claude_says.tool_use("run_command", {"command": "touch stop && sleep 1 && rm stop && echo stopped"}),
    ]
    model.add("orchestrator", start_task("calc", "Look around."), claude_says.text("Started."))
    model.add("code", *calls, claude_says.text("Done looking around."))
    ticker = asyncio.create_task(tick())
    watchdog = threading.Thread(target=watch, daemon=True)
    watchdog.start()
    try:
        bot.say("look around calc")
        await ended(bot, 1, timeout=120)
    finally:
        stop.set()
        watchdog.join()
        ticker.cancel()
    assert any("swapping" in r for r in tool_results(model)), tool_results(model)[:3]
    assert blocked == [], f"the bot's event loop waited on the FIFO at .git ({len(blocked)} times released)"
