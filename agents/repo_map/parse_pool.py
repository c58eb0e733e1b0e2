"""Bulk parsing spread over worker processes: a cold build of a big repository parses on every core.

`ast` parsing is CPU-bound Python that threads cannot run in parallel (the GIL), so a batch of at least
`PROCESS_MIN_FILES` files is parsed by one short-lived child process per core (up to `MAX_PROCESSES`; a build someone
waits on takes one more per other task busy on the machine, for a bigger share of a contended CPU: `processes_for`):
`python -m agents.repo_map.parse_child` reads chunks of the batch (pickled, a length before each) on stdin and answers
each with its outlines on stdout (a frame: a length, then a pickle; parse_child.py), so the caller can store each frame
as it comes (a map can be drawn from what is indexed so far) and neither side holds every outline at once.

The work is shared as it goes, not dealt out at the start: the batch is cut into chunks in the order of the paths
(at most parse_child.FRAME_FILES files each, smaller towards the end: `_chunks`), each process is sent
`CHUNKS_AHEAD` of them, and the next one from the common queue each time it answers one. A process that gets
less of the CPU (another process busy on its core, the bot's own storing) parses fewer chunks, and they all finish
within a small chunk of each other: with the batch dealt in advance into shares of equal bytes, the first to finish a
build of sympy on 2 cores waited idle 0.01–0.6 s for the other (measured), now 0–0.07 s. Its stdin is closed when
the queue is empty, and it exits.

Plain asyncio subprocesses rather than `multiprocessing`: no fork of a process with threads, and no re-import of the
bot's `__main__` in the children; each child runs in its own process group, killed on timeout or cancellation, and
exits (returning its memory) when the queue is empty. Smaller batches (the usual incremental refresh), a machine
with one core, or the chunks a failed child did not answer for (and, after it failed, the rest of the queue) fall back
to a worker thread of this process.

`parse_batches` yields (path, outline) pairs in frames as they are parsed, in no fixed order; `parse_many` collects
them in the order of `paths`, as `parse_files` returns them.

Priority: the parse processes of a build in the background run at nice 10 (CHILD_NICENESS; their autogroup too,
where the kernel shares the CPU by session first: `_deprioritise`), so the bot's replies and a map drawn meanwhile
have the CPU first. Those of an `urgent` build (someone waits on it: a task's first turn,
a worker's look-up) run at the bot's own priority: on 2 cores with another process busy, nice 10 left them one
core between them, and the map being waited for came a third later. When a map is drawn while they run,
`lower_priority` puts them at nice 10 for the rest of their build (the drawing is then what is waited on; an
unprivileged process can raise its children's niceness, never lower it again).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import sys
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path

from agents.repo_map.outline import FileOutline, SameContent, parse_files
from agents.repo_map.parse_child import FRAME_FILES
from agents.repo_map.parse_child import LENGTH as _LENGTH
from agents.sandbox.clean_env import child_env
from agents.sandbox.reaping import reap, start_group

log = logging.getLogger(__name__)

PROCESS_MIN_FILES = 300  # below this a batch is parsed in one thread: starting processes would cost more
THREAD_CHUNK = 200  # files per worker-thread hop when parsing in this process
MAX_PROCESSES = 4
FRAMES_AHEAD = 2  # frames per child read ahead of the caller
TAIL_SHARES = 2  # a chunk holds at most 1/TAIL_SHARES of each process's part of the bytes left (_chunks)
MIN_CHUNK_BYTES = 64_000  # about the least bytes of source per chunk (a smaller one is not worth a frame)
# chunks a parse process holds before it has answered one: it starts the next while its answer is read and the one
# after is sent, never waiting on this process
CHUNKS_AHEAD = 2
# How a build someone waits on tells other work on the machine from a passing moment (busy_elsewhere): 10 ms in all.
BUSY_SAMPLES = 6
BUSY_SAMPLE_GAP_S = 0.002
CHILD_TIMEOUT_S = 600.0
# A parse process of a build in the background yields the CPU to the bot (its map renders, its replies) when both want
# it, and takes it all when the bot is idle: on 2 cores a task's map drawn mid-build was up to twice as slow without.
CHILD_NICENESS = 10
# A process without CAP_SYS_ADMIN (the bot as a user, or root in most containers) may change an autogroup's niceness
# once per tenth of a second, machine-wide; the kernel refuses the others with EAGAIN. So a refused change is tried
# again this much later, up to AUTOGROUP_TRIES times (two parse processes deprioritised at once would otherwise
# leave the second one at full weight).
AUTOGROUP_RETRY_S = 0.11
AUTOGROUP_TRIES = 20

Parsed = FileOutline | SameContent | None
Batch = list[tuple[str, Parsed]]

# process id of each running parse process → whether at the bot's own priority. Process-wide on purpose: the parse
# processes of every build this process runs share its cores with any map it draws, whichever workspace each is for
_running: dict[int, bool] = {}


def autogroup_niceness(pid: int | str) -> int | None:
    """The niceness of the process's autogroup (`/proc/PID/autogroup`: "/autogroup-N nice K"), or None where the
    kernel has none, or where the process is scheduled in a cgroup's group instead (the file is empty there, as in
    most containers)."""
    try:
        return int(Path(f"/proc/{pid}/autogroup").read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def _deprioritise(pid: int) -> None:
    """The process at CHILD_NICENESS (or the bot's own, if lower), and so is its autogroup where the kernel has them.

    Where the kernel shares the CPU between sessions first (sched autogroup, on in Debian's and Ubuntu's kernels), a
    process's nice value weighs only against the processes of its own session, and a parse process leads a session
    of its own (it is killed as a group): at nice 10 alone it still took a full share beside the bot (measured, two
    processes spinning on one core: the one at nice 10 in a session of its own got half of it; with its autogroup at
    nice 10 too, a tenth). Its autogroup holds only this process, so setting that group's niceness touches nothing
    else. (In the bot's session instead, an urgent build would share the bot's one share with everything else the
    bot's session runs: measured, a busy sympy build took 3.5 s rather than 2.5 s.)"""
    with contextlib.suppress(OSError):  # ended meanwhile, or already at a lower priority than that
        os.setpriority(os.PRIO_PROCESS, pid, max(CHILD_NICENESS, os.getpriority(os.PRIO_PROCESS, 0)))
    _running[pid] = False
    _lower_autogroup(pid, AUTOGROUP_TRIES)


def _lower_autogroup(pid: int, tries: int) -> None:
    """The autogroup of parse process `pid` at CHILD_NICENESS (or the bot's own group's, if lower; an empty
    `/proc/self/autogroup` is the machine's first group, at 0, or a cgroup's, where the child's group does not
    count), tried again later while the kernel refuses it for its rate (AUTOGROUP_RETRY_S) and the process runs."""
    if _running.get(pid) is not False:
        return  # ended (or its pid is another build's process by now: that one was set when it started)
    niceness = max(CHILD_NICENESS, autogroup_niceness("self") or 0)
    try:
        fd = os.open(f"/proc/{pid}/autogroup", os.O_WRONLY)
    except OSError:  # ended meanwhile, or a kernel without autogroups
        return
    try:
        os.write(fd, str(niceness).encode())
    except BlockingIOError:  # another change of an autogroup's niceness, machine-wide, within a tenth of a second
        if tries > 1:
            with contextlib.suppress(RuntimeError):  # no event loop: the process keeps its nice value alone
                asyncio.get_running_loop().call_later(AUTOGROUP_RETRY_S, _lower_autogroup, pid, tries - 1)
    except OSError:
        pass  # ended meanwhile
    finally:
        os.close(fd)


def lower_priority() -> None:
    """Put the parse processes of urgent builds at the background's niceness (a map is being drawn)."""
    for pid, urgent in list(_running.items()):
        if urgent:
            _deprioritise(pid)


def process_count() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells), at most `MAX_PROCESSES`."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(MAX_PROCESSES, cores))


def runnable_elsewhere() -> int:
    """How many tasks of the machine want the CPU now besides this process's threads and parse processes: the
    runnable count of `/proc/loadavg` ("0.42 0.30 0.25 3/412 1234": 3 runnable, the reader among them) less those;
    0 where the OS does not tell. (This process's own threads share its one session's CPU: more parse processes
    would win nothing from them.)"""
    try:
        with open("/proc/loadavg") as loadavg:
            runnable = int(loadavg.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return 0
    return max(0, runnable - _runnable_threads() - len(_running))


def _runnable_threads() -> int:
    """This process's threads that are running or ready to (state R in `/proc/self/task/TID/stat`), the caller's
    among them; 1 where they cannot be read."""
    count = 0
    with contextlib.suppress(OSError):
        for thread in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError), open(f"/proc/self/task/{thread}/stat") as stat:
                state = stat.read().rpartition(")")[2][1:2]  # "TID (name) S …": the name may hold anything
                count += state == "R"
    return max(count, 1)


async def busy_elsewhere(samples: int = BUSY_SAMPLES, gap: float = BUSY_SAMPLE_GAP_S) -> int:
    """The tasks runnable elsewhere through a short look (the fewest of `samples` reads `gap` seconds apart): one
    that keeps the CPU busy is in every read, a short one (a kernel thread writing files back, a git that is
    ending) is not."""
    fewest = runnable_elsewhere()
    for _ in range(samples - 1):
        if fewest == 0:
            break
        await asyncio.sleep(gap)
        fewest = min(fewest, runnable_elsewhere())
    return fewest


def processes_for(cores: int, others: int, urgent: bool) -> int:
    """Parse processes for a big batch on `cores` cores while `others` other tasks want the CPU: one per core, and
    for a build someone waits on, one more per other task (at most one more per core).

    The kernel shares a busy CPU between sessions, and a parse process leads a session of its own, so each one is a
    share: on 2 cores with one other process busy, 2 parse processes get two thirds of the machine and 3 get three
    quarters (a cold build of sympy, measured: 5.73 s with 2, 5.19 s with 3, 5.01 s with 4; quiet, a third process
    only costs: 3.86 s against 3.96 s). A build in the background yields to everything (nice 10) and takes none."""
    if cores < 2 or not urgent:
        return cores
    return cores + min(others, cores)


async def parse_many(
    root: Path, paths: list[str], states: dict[str, tuple[int, int]], hashes: dict[str, str]
) -> list[Parsed]:
    """`parse_files` over `paths`, in child processes for a big batch, else in a worker thread."""
    by_path: dict[str, Parsed] = {}
    async for batch in parse_batches(root, paths, states, hashes):
        by_path.update(batch)
    return [by_path[path] for path in paths]


async def parse_batches(
    root: Path, paths: list[str], states: dict[str, tuple[int, int]], hashes: dict[str, str], *, urgent: bool = False
) -> AsyncGenerator[Batch, None]:
    """Every path with its outline, in frames as they are parsed (child processes for a big batch, else a thread);
    `urgent`: someone waits on it (its processes at this process's priority, see the module docstring)."""
    processes = 1
    if len(paths) >= PROCESS_MIN_FILES:
        cores = process_count()
        processes = processes_for(cores, await busy_elsewhere() if urgent and cores > 1 else 0, urgent)
    if processes == 1:
        async for batch in _in_thread(root, paths, states, hashes):
            yield batch
        return
    chunks = _chunks(paths, states, processes)
    frames: asyncio.Queue[Batch | None] = asyncio.Queue()
    # Frames read but not yet taken by the caller are bounded: a child whose frames wait blocks on its pipe, so the
    # outlines of a big build do not pile up in this process while the caller stores (or a map is drawn).
    slots = asyncio.Semaphore(FRAMES_AHEAD * processes)

    async def run() -> None:
        try:
            await _in_child_or_thread(root, chunks, states, hashes, frames, slots, urgent)
        finally:
            frames.put_nowait(None)

    workers = [asyncio.create_task(run()) for _ in range(min(processes, len(chunks)))]
    try:
        running = len(workers)
        while running:
            frame = await frames.get()
            if frame is None:
                running -= 1
            else:
                slots.release()
                yield frame
        for worker in workers:
            worker.result()  # a bug in a worker is raised here, not lost
    finally:
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


def _chunks(paths: list[str], states: dict[str, tuple[int, int]], processes: int) -> deque[list[str]]:
    """`paths` cut in order into chunks of at most FRAME_FILES files and at most 1/TAIL_SHARES of each process's part
    of the bytes left when the chunk starts (but about MIN_CHUNK_BYTES at least): big chunks first (few frames to
    store: each costs the caller a transaction), small ones at the end, where a process done early waits on the
    others."""
    chunks: deque[list[str]] = deque()
    chunk: list[str] = []
    left = sum(states[path][1] for path in paths)
    size, target = 0, 0
    for path in paths:
        if chunk and (len(chunk) >= FRAME_FILES or size + states[path][1] > target):
            chunks.append(chunk)
            chunk, size = [], 0
        if not chunk:
            target = max(MIN_CHUNK_BYTES, left // (TAIL_SHARES * processes))
        chunk.append(path)
        size += states[path][1]
        left -= states[path][1]
    if chunk:
        chunks.append(chunk)
    return chunks


async def _in_thread(
    root: Path, paths: list[str], states: dict[str, tuple[int, int]], hashes: dict[str, str]
) -> AsyncIterator[Batch]:
    for begin in range(0, len(paths), THREAD_CHUNK):
        chunk = paths[begin : begin + THREAD_CHUNK]
        yield list(zip(chunk, await asyncio.to_thread(parse_files, root, chunk, states, hashes)))


async def _in_child_or_thread(
    root: Path,
    chunks: deque[list[str]],
    states: dict[str, tuple[int, int]],
    hashes: dict[str, str],
    frames: asyncio.Queue[Batch | None],
    slots: asyncio.Semaphore,
    urgent: bool,
) -> None:
    """One parse process taking chunks from the common queue until it is empty; if the process fails, the chunks it
    held and then the rest of the queue are parsed in a thread."""
    held: deque[list[str]] = deque()  # chunks sent to the process and not answered yet, oldest first
    try:
        # closed here when this worker is cancelled while it waits for a slot: its process is reaped before the
        # build's clean-up ends, not left to the generator's finaliser as a task of its own later
        async with contextlib.aclosing(_in_child(root, chunks, held, states, hashes, urgent)) as batches:
            async for batch in batches:
                await slots.acquire()
                frames.put_nowait(batch)
        return
    except (OSError, RuntimeError, pickle.UnpicklingError, EOFError, TimeoutError, asyncio.IncompleteReadError):
        left = sum(map(len, held))
        log.warning(
            "repo map: a parse process failed; parsing its %d files left, then any still queued, in a thread",
            left,
            exc_info=True,
        )
    while held or chunks:
        async for batch in _in_thread(root, held.popleft() if held else chunks.popleft(), states, hashes):
            await slots.acquire()
            frames.put_nowait(batch)


async def _in_child(
    root: Path,
    chunks: deque[list[str]],
    held: deque[list[str]],
    states: dict[str, tuple[int, int]],
    hashes: dict[str, str],
    urgent: bool = False,
) -> AsyncGenerator[Batch, None]:
    """A parse process's frames, one per chunk taken from `chunks`; `held` is kept to the chunks it has not answered
    (the caller parses them itself if the process fails)."""
    package_parent = str(Path(__file__).resolve().parents[2])  # the folder holding `agents/`
    env = child_env()  # it reads repository files: none of the bot's secrets in its environment
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))
    proc = await start_group(
        [
            sys.executable,
            "-P",  # `-m` would put the working folder first on the module path: its `agents/`, if any, would run here
            "-m",
            "agents.repo_map.parse_child",
        ],
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin = proc.stdin
    _running[proc.pid] = True
    if not urgent:  # set here, not by the child once it has imported its modules: at its very start
        _deprioritise(proc.pid)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CHILD_TIMEOUT_S

    async def send_next() -> None:
        """The next chunk of the queue to the process, or, when none is left, the end of its input."""
        if stdin.is_closing():
            return
        if not chunks:
            stdin.close()
            return
        chunk = chunks.popleft()
        held.append(chunk)
        payload = pickle.dumps(
            (str(root), chunk, {p: states[p] for p in chunk}, {p: hashes[p] for p in chunk if p in hashes}),
            protocol=pickle.HIGHEST_PROTOCOL,
        )
        stdin.write(_LENGTH.pack(len(payload)) + payload)
        async with asyncio.timeout_at(deadline):
            await stdin.drain()

    # Timeouts as `asyncio.timeout` scopes, never `asyncio.wait_for`: on 3.11 wait_for returns the result when its
    # inner read ends just as the task is cancelled, so the cancel is lost; the worker then waited for ever on a slot
    # of a caller that had stopped taking frames (a cancelled build hung in `parse_batches`' clean-up).
    try:
        for _ in range(CHUNKS_AHEAD):
            await send_next()
        while True:
            async with asyncio.timeout_at(deadline):
                header = await proc.stdout.read(_LENGTH.size)
                if not header:
                    break  # the child closed its output
                if len(header) < _LENGTH.size:
                    header += await proc.stdout.readexactly(_LENGTH.size - len(header))
                (length,) = _LENGTH.unpack(header)
                frame = await proc.stdout.readexactly(length)
            batch = pickle.loads(frame)
            if not (isinstance(batch, list) and held and [pair[0] for pair in batch] == held[0]):
                raise RuntimeError("parse process returned a malformed frame")
            held.popleft()
            await send_next()  # before the caller takes this frame: the process never waits on it
            yield batch  # outside the timeout scopes: the caller's time with the frame is not the child's
        if held:
            raise RuntimeError(f"parse process ended with {sum(map(len, held))} files unanswered")
        async with asyncio.timeout_at(deadline):
            await proc.wait()
    finally:
        _running.pop(proc.pid, None)
        if proc.returncode is None:  # timed out, failed or cancelled: the whole group goes
            await reap(proc, group=True)
    if proc.returncode != 0:
        raise RuntimeError(f"parse process exited with {proc.returncode}")
