"""Bulk parsing spread over worker processes: a cold build of a big repository parses on every core.

`ast` parsing is CPU-bound Python that threads cannot run in parallel (the GIL), so a batch of at least
`PROCESS_MIN_FILES` files is dealt round-robin to one short-lived child process per core (up to `MAX_PROCESSES`):
`python -m agents.repo_map.parse_pool` reads its share (pickled) on stdin and writes the outlines (pickled) on
stdout. Plain asyncio subprocesses rather than `multiprocessing`: no fork of a process with threads, and no
re-import of the bot's `__main__` in the children; each child runs in its own process group, killed on timeout or
cancellation, and exits (returning its memory) when its share is done. Smaller batches (the usual incremental
refresh), a machine with one core, or a child that fails fall back to a worker thread of this process. Results
come back in the order of `paths`, as `parse_files` returns them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import signal
import sys
from pathlib import Path

from agents.repo_map.outline import FileOutline, SameContent, parse_files

log = logging.getLogger(__name__)

PROCESS_MIN_FILES = 300  # below this a batch is parsed in one thread: starting processes would cost more
THREAD_CHUNK = 400  # files per worker-thread hop when parsing in this process
MAX_PROCESSES = 4
CHILD_TIMEOUT_S = 600.0

Parsed = FileOutline | SameContent | None


def process_count() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells), at most `MAX_PROCESSES`."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(MAX_PROCESSES, cores))


async def parse_many(
    root: Path, paths: list[str], states: dict[str, tuple[int, int]], hashes: dict[str, str]
) -> list[Parsed]:
    """`parse_files` over `paths`, in child processes for a big batch, else in a worker thread."""
    processes = process_count() if len(paths) >= PROCESS_MIN_FILES else 1
    if processes == 1:
        return await _in_thread(root, paths, states, hashes)
    shares = [paths[i::processes] for i in range(processes)]
    results = await asyncio.gather(*(_in_child_or_thread(root, share, states, hashes) for share in shares))
    by_path = {path: parsed for share, part in zip(shares, results) for path, parsed in zip(share, part)}
    return [by_path[path] for path in paths]


async def _in_thread(
    root: Path, paths: list[str], states: dict[str, tuple[int, int]], hashes: dict[str, str]
) -> list[Parsed]:
    parsed: list[Parsed] = []
    for begin in range(0, len(paths), THREAD_CHUNK):
        parsed += await asyncio.to_thread(parse_files, root, paths[begin : begin + THREAD_CHUNK], states, hashes)
    return parsed


async def _in_child_or_thread(
    root: Path, paths: list[str], states: dict[str, tuple[int, int]], hashes: dict[str, str]
) -> list[Parsed]:
    try:
        return await _in_child(root, paths, states, hashes)
    except (OSError, RuntimeError, pickle.UnpicklingError, EOFError, TimeoutError):
        log.warning("repo map: a parse process failed; parsing its %d files in a thread", len(paths), exc_info=True)
        return await _in_thread(root, paths, states, hashes)


async def _in_child(
    root: Path, paths: list[str], states: dict[str, tuple[int, int]], hashes: dict[str, str]
) -> list[Parsed]:
    payload = pickle.dumps(
        (str(root), paths, {p: states[p] for p in paths}, {p: hashes[p] for p in paths if p in hashes}),
        protocol=pickle.HIGHEST_PROTOCOL,
    )
    package_parent = str(Path(__file__).resolve().parents[2])  # the folder holding `agents/`
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agents.repo_map.parse_pool",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(payload), CHILD_TIMEOUT_S)
    finally:
        if proc.returncode is None:  # timed out or cancelled: the whole group goes
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"parse process exited with {proc.returncode}")
    parsed = pickle.loads(out)
    if not isinstance(parsed, list) or len(parsed) != len(paths):
        raise RuntimeError("parse process returned a malformed answer")
    return parsed


def _child_main() -> None:
    root, paths, states, hashes = pickle.load(sys.stdin.buffer)
    sys.stdout.buffer.write(pickle.dumps(parse_files(Path(root), paths, states, hashes), pickle.HIGHEST_PROTOCOL))


if __name__ == "__main__":
    _child_main()
