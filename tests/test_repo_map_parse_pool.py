"""A big batch is parsed in worker processes with the same outlines, in the same order, as in one thread."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from agents.repo_map import parse_child, parse_pool
from agents.repo_map.outline import FileOutline, SameContent, content_hash, parse_files


def _write_repo(root: Path, count: int) -> dict[str, tuple[int, int]]:
    states = {}
    for n in range(count):
        path = f"pkg/mod_{n:04d}.py"
        (root / "pkg").mkdir(exist_ok=True)
        text = f'"""Module {n}."""\n\nimport os\n\n\nclass Thing{n}:\n    def size(self, k: int = {n}) -> int:\n        return k\n'
        (root / path).write_text(text)
        states[path] = (n, len(text))
    return states


@pytest.mark.skipif(parse_pool.process_count() < 2, reason="one core: big batches are parsed in one thread")
def test_big_batch_in_processes_matches_one_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    states = _write_repo(tmp_path, parse_pool.PROCESS_MIN_FILES + 50)
    paths = sorted(states) + ["pkg/vanished.py"]
    states["pkg/vanished.py"] = (0, 0)
    same = paths[7]
    hashes = {same: content_hash((tmp_path / same).read_bytes())}

    async def no_thread(*args: object) -> list[object]:
        raise AssertionError("a big batch must be parsed in child processes")

    monkeypatch.setattr(parse_pool, "_in_thread", no_thread)
    in_processes = asyncio.run(parse_pool.parse_many(tmp_path, paths, states, hashes))
    in_thread = parse_files(tmp_path, paths, states, hashes)
    assert in_processes == in_thread
    assert in_processes[7] == SameContent(same, *states[same])
    assert in_processes[-1] is None
    first = in_processes[0]
    assert isinstance(first, FileOutline) and [s.name for s in first.symbols] == ["Thing0", "size"]


def test_small_batch_stays_in_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_child(*args: object) -> list[object]:
        raise AssertionError("a small batch must be parsed in this process")

    monkeypatch.setattr(parse_pool, "_in_child", no_child)
    states = _write_repo(tmp_path, 3)
    parsed = asyncio.run(parse_pool.parse_many(tmp_path, sorted(states), states, {}))
    assert [o.path for o in parsed if isinstance(o, FileOutline)] == sorted(states)


@pytest.mark.skipif(parse_pool.process_count() < 2, reason="one core: big batches are parsed in one thread")
def test_a_failing_child_falls_back_to_a_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    states = _write_repo(tmp_path, parse_pool.PROCESS_MIN_FILES)
    monkeypatch.setattr(parse_pool.sys, "executable", "/bin/false")  # every child exits 1 without answering
    parsed = asyncio.run(parse_pool.parse_many(tmp_path, sorted(states), states, {}))
    assert [o.path for o in parsed if isinstance(o, FileOutline)] == sorted(states)


@pytest.mark.skipif(parse_pool.process_count() < 2, reason="one core: big batches are parsed in one thread")
def test_children_answer_in_frames_so_each_can_be_stored_as_it_comes(tmp_path: Path) -> None:
    states = _write_repo(tmp_path, parse_pool.PROCESS_MIN_FILES + 50)

    async def frames() -> list[list[tuple[str, object]]]:
        return [batch async for batch in parse_pool.parse_batches(tmp_path, sorted(states), states, {})]

    got = asyncio.run(frames())
    assert len(got) > parse_pool.process_count(), "more than one frame per child"
    assert all(len(batch) <= parse_child.FRAME_FILES for batch in got)
    assert sorted(path for batch in got for path, _ in batch) == sorted(states)


def _niceness(pids: list[int]) -> list[int]:
    """The niceness of each process still running among `pids` (one that has just ended has none)."""
    found = []
    for pid in pids:
        try:
            found.append(os.getpriority(os.PRIO_PROCESS, pid))
        except ProcessLookupError:
            continue
    return found


def _group_niceness(pids: list[int]) -> list[int | None]:
    """The niceness of the autogroup of each process still running among `pids` (None: the kernel has none)."""
    found: list[int | None] = []
    for pid in pids:
        try:
            words = Path(f"/proc/{pid}/autogroup").read_text().split()  # "/autogroup-N nice K"
        except FileNotFoundError:
            if os.path.exists(f"/proc/{pid}"):  # running, in a kernel without autogroups
                found.append(None)
            continue
        # empty where the process's scheduling group is a cgroup's rather than an autogroup (in most containers)
        found.append(int(words[-1]) if words else None)
    return found


@pytest.mark.skipif(parse_pool.process_count() < 2, reason="one core: big batches are parsed in one thread")
def test_a_build_parses_at_a_lower_priority_unless_urgent_until_a_map_is_drawn(tmp_path: Path) -> None:
    # enough frames per child that, with the caller holding the frames, each child still has some to write
    states = _write_repo(tmp_path, parse_pool.PROCESS_MIN_FILES * 4)
    own = os.getpriority(os.PRIO_PROCESS, 0)
    background = max(own, parse_pool.CHILD_NICENESS)

    own_group = _group_niceness([os.getpid()])[0]
    # where the kernel shares the CPU by session (autogroups), the nice value alone would not yield to the bot
    background_group = None if own_group is None else max(own_group, parse_pool.CHILD_NICENESS)
    groups: dict[bool, list[int | None]] = {}

    async def niceness_while_running(urgent: bool) -> tuple[list[int], list[int]]:
        """The niceness of the running parse processes after the first frame, then after `lower_priority`."""
        batches = parse_pool.parse_batches(tmp_path, sorted(states), states, {}, urgent=urgent)
        try:
            await anext(batches)
            pids = sorted(parse_pool._running)
            before = _niceness(pids)
            parse_pool.lower_priority()
            groups[urgent] = _group_niceness(pids)
            return before, _niceness(pids)
        finally:
            await batches.aclose()  # the rest is not wanted: the processes are stopped

    urgent, lowered = asyncio.run(niceness_while_running(urgent=True))
    assert urgent and urgent == [own] * len(urgent)
    assert lowered == [background] * len(urgent)
    assert groups[True] == [background_group] * len(urgent)
    assert not parse_pool._running
    in_background, after = asyncio.run(niceness_while_running(urgent=False))
    assert in_background and in_background == after == [background] * len(in_background)
    assert groups[False] == [background_group] * len(in_background)


@pytest.mark.skipif(parse_pool.process_count() < 2, reason="one core: big batches are parsed in one thread")
def test_a_process_that_gets_no_cpu_leaves_its_work_to_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first parse process is stopped as soon as it starts (as if another process had its core): the others take
    # the work it has not been handed yet, so only the chunks it holds are left when they are done. Dealt into shares
    # at the start, half the files waited on it.
    states = _write_repo(tmp_path, parse_child.FRAME_FILES * 20)
    spawned: list[int] = []
    real_spawn = asyncio.create_subprocess_exec

    async def spawn_first_stopped(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        process = await real_spawn(*args, **kwargs)
        if not spawned:
            os.kill(process.pid, signal.SIGSTOP)
        spawned.append(process.pid)
        return process

    monkeypatch.setattr(parse_pool.asyncio, "create_subprocess_exec", spawn_first_stopped)

    async def files_before_and_after_the_others_end() -> tuple[int, int]:
        batches = parse_pool.parse_batches(tmp_path, sorted(states), states, {})
        pending = asyncio.ensure_future(anext(batches))
        before = after = 0
        try:
            while len(spawned) < 2 or any(pid in parse_pool._running for pid in spawned[1:]):
                done, _ = await asyncio.wait({pending}, timeout=0.01)  # the others ending is polled, not timed
                if done:
                    before += len(pending.result())
                    pending = asyncio.ensure_future(anext(batches))
            os.kill(spawned[0], signal.SIGCONT)
            with contextlib.suppress(StopAsyncIteration):
                while True:
                    after += len(await pending)
                    pending = asyncio.ensure_future(anext(batches))
            return before, after
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(spawned[0], signal.SIGCONT)
            pending.cancel()
            await batches.aclose()

    before, after = asyncio.run(files_before_and_after_the_others_end())
    assert before + after == len(states)
    # left after the others ended: the stopped one's chunks, and frames of the others not yet taken from the queue
    left_at_most = (parse_pool.CHUNKS_AHEAD + parse_pool.FRAMES_AHEAD * len(spawned)) * parse_child.FRAME_FILES
    assert after <= left_at_most < len(states) // 2


@pytest.mark.skipif(parse_pool.process_count() < 2, reason="one core: big batches are parsed in one thread")
def test_the_parse_processes_run_the_bots_own_code_whatever_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A working folder holding a package named like the bot's (a repository checked out there, say) is not where the
    # parse processes' code comes from: with `-m`, Python put the working folder first on the module path.
    impostor = tmp_path / "cwd" / "agents" / "repo_map"
    impostor.mkdir(parents=True)
    for package in (impostor.parent, impostor):
        (package / "__init__.py").write_text("")
    ran = tmp_path / "impostor-ran"
    (impostor / "parse_child.py").write_text(f"open({str(ran)!r}, 'w').close()\nraise SystemExit(1)\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    states = _write_repo(repo, parse_pool.PROCESS_MIN_FILES)
    monkeypatch.chdir(tmp_path / "cwd")

    async def no_thread(*args: object) -> list[object]:
        raise AssertionError("the parse processes must answer, not a thread")

    monkeypatch.setattr(parse_pool, "_in_thread", no_thread)
    parsed = asyncio.run(parse_pool.parse_many(repo, sorted(states), states, {}))
    assert not ran.exists()
    assert parsed == parse_files(repo, sorted(states), states, {})
