"""Bulk parsing spread over worker processes: a cold build of a big repository parses on every core.

`ast` parsing is CPU-bound Python that threads cannot run in parallel (the GIL), so a batch of at least
`PROCESS_MIN_FILES` files is split into chunks parsed by a lazily started pool of `spawn`ed processes (spawn, not
fork: the bot's process has threads and an event loop), one per core up to `MAX_PROCESSES`. Smaller batches (the
usual incremental refresh), a machine with one core, or a pool that cannot start or breaks fall back to one worker
thread of this process. Results come back in the order of `paths`, as `parse_files` returns them.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import threading
from concurrent.futures import BrokenExecutor, ProcessPoolExecutor
from pathlib import Path

from agents.repo_map.outline import FileOutline, SameContent, parse_files

log = logging.getLogger(__name__)

PROCESS_MIN_FILES = 300  # below this a batch is parsed in one thread: starting processes would cost more
PROCESS_CHUNK = 100  # files per task sent to a process (small enough to keep both cores busy to the end)
THREAD_CHUNK = 400  # files per worker-thread hop when parsing in this process
MAX_PROCESSES = 4

_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()


def process_count() -> int:
    return max(1, min(MAX_PROCESSES, os.cpu_count() or 1))


def _shared_pool() -> ProcessPoolExecutor | None:
    global _pool
    with _pool_lock:
        if _pool is None and process_count() > 1:
            try:
                _pool = ProcessPoolExecutor(process_count(), mp_context=multiprocessing.get_context("spawn"))
            except (OSError, ValueError):
                log.warning("repo map: could not start parse processes; parsing in one thread", exc_info=True)
                return None
        return _pool


def shutdown_pool() -> None:
    """Stop the parse processes (they start again on the next big batch)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


async def parse_many(
    root: Path, paths: list[str], states: dict[str, tuple[int, int]], hashes: dict[str, str]
) -> list[FileOutline | SameContent | None]:
    """`parse_files` over `paths`, in worker processes for a big batch, else in a worker thread."""
    pool = _shared_pool() if len(paths) >= PROCESS_MIN_FILES else None
    if pool is not None:
        loop = asyncio.get_running_loop()
        chunks = [paths[i : i + PROCESS_CHUNK] for i in range(0, len(paths), PROCESS_CHUNK)]
        try:
            parts = await asyncio.gather(
                *(
                    loop.run_in_executor(
                        pool,
                        parse_files,
                        root,
                        chunk,
                        {p: states[p] for p in chunk},
                        {p: hashes[p] for p in chunk if p in hashes},
                    )
                    for chunk in chunks
                )
            )
            return [outline for part in parts for outline in part]
        except (BrokenExecutor, OSError):
            log.warning("repo map: parse processes failed; parsing in one thread", exc_info=True)
            shutdown_pool()
    parsed: list[FileOutline | SameContent | None] = []
    for begin in range(0, len(paths), THREAD_CHUNK):
        parsed += await asyncio.to_thread(parse_files, root, paths[begin : begin + THREAD_CHUNK], states, hashes)
    return parsed
