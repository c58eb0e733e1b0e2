"""Starting a process group that a cancellation ends whole, and killing a process the caller gave up on then waiting
for it, bounded. Nothing of either is left for the event loop's end (a subprocess transport collected after its loop
closed reports an exception). A module of its own, below every module that starts processes (the shell, a task's
services, the network helper of a sandbox, git, the parse pool)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Coroutine, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


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


@contextlib.asynccontextmanager
async def reaped_on_failure(process: asyncio.subprocess.Process, *, group: bool = False) -> AsyncIterator[None]:
    """A block waiting on `process`: if it fails, times out or is cancelled, the process (its whole group with
    `group`) is killed and waited for, to the end, before the error goes on."""
    try:
        yield
    except BaseException:
        await uninterrupted(reap(process, group=group))
        raise


async def uninterrupted(clean_up: Coroutine[Any, Any, None]) -> None:
    """Run `clean_up` to its end even if the caller is cancelled again meanwhile (it must be bounded). A second
    cancellation, such as a shutdown's after the task's own, otherwise broke off a reaping: the command was killed
    but never waited for, and its pipes were still open when the event loop closed. A cancellation that comes
    meanwhile is not raised here: callers run this on their way out of a cancellation and raise that one after."""
    running = asyncio.ensure_future(clean_up)
    while not running.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(running)
    running.result()


async def to_its_end(work: asyncio.Future[T]) -> T:
    """`work`'s result. If the caller is cancelled meanwhile, `work` still runs to its end (it must be bounded) and
    the cancellation is raised after, whatever `work`'s outcome: a step whose half-done state nobody could clean up
    (a process forked, a background pid not read yet) is never broken off."""
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        await uninterrupted(_settled(work))
        raise


async def _settled(work: asyncio.Future[Any]) -> None:
    with contextlib.suppress(Exception):
        await work


async def start_group(argv: Sequence[str], **options: Any) -> asyncio.subprocess.Process:
    """`asyncio.create_subprocess_exec(*argv, start_new_session=True, **options)`, whose whole group is killed and
    reaped if the caller is cancelled while it starts.

    The start ends after the fork, once asyncio has connected the process's pipes (a few turns of the event loop).
    A cancellation in between made asyncio kill the process it started, alone, then wait for its pipes to close: a
    child it had started meanwhile held them open, so the cancel hung as long as that child lived, and it lived on.
    Here the start runs to its end, then the group is killed and reaped (bounded), then the cancellation goes on."""
    caller = asyncio.current_task()
    starting = asyncio.get_running_loop().create_task(
        asyncio.create_subprocess_exec(*argv, start_new_session=True, **options),
        name=None if caller is None else caller.get_name(),  # the caller's work, under the caller's name
    )
    try:
        return await to_its_end(starting)
    except asyncio.CancelledError:
        if not starting.cancelled() and starting.exception() is None:  # started: it ends with the caller
            await uninterrupted(reap(starting.result(), group=True))
        raise
