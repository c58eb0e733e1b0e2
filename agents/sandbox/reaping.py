"""Killing a process the caller gave up on and waiting for it, bounded: nothing of it is left for the event loop's
end (a subprocess transport collected after its loop closed reports an exception). A module of its own, below every
module that starts processes (the shell, the network helper of a sandbox, git, the parse pool)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal


async def reap(process: asyncio.subprocess.Process, *, group: bool = False, bound: float = 5.0) -> None:
    """Kill a process the caller gave up on (its whole process group with `group`, for one started in a session of
    its own) and wait for it, never longer than `bound` seconds. On 3.11 `wait()` returns only once every pipe of the
    process is closed: this side's stdin is closed (a caller cancelled mid-write left it open, and the wait hung for
    good), and its output is read to the end (a reader stopped early may have paused it on a full buffer)."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(process.pid, signal.SIGKILL)
            else:
                process.kill()
    if process.stdin is not None:
        process.stdin.close()
    with contextlib.suppress(TimeoutError, OSError):
        async with asyncio.timeout(bound):
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    await pipe.read()
            await process.wait()
