"""The sandbox's pid that bwrap reports on its `--info-fd` (a JSON object holding "child-pid"), read on the event loop.

Read with the loop's reader rather than in a worker thread: a cancellation (a /cancel, a timeout) stops the read at
once, and no thread is left blocked in `read` on a descriptor its caller then closes. Such a thread read on after
the close, and once the descriptor's number was taken by another file, it would have read that file's bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os

CHUNK = 4096


async def child_pid(fd: int) -> int:
    """The "child-pid" bwrap writes on `fd` (the read end of its info pipe, made non-blocking here); OSError when bwrap
    closes the pipe without it (it ended before its sandbox was set up)."""
    os.set_blocking(fd, False)
    loop = asyncio.get_running_loop()
    data = b""
    while True:
        try:
            chunk = os.read(fd, CHUNK)
        except BlockingIOError:
            await _readable(loop, fd)
            continue
        if not chunk:
            raise OSError("bwrap ended before its sandbox was set up")
        data += chunk
        with contextlib.suppress(ValueError, KeyError):  # bwrap writes the object in parts
            return int(json.loads(data)["child-pid"])


async def _readable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
