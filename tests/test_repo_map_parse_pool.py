"""A big batch is parsed in worker processes with the same outlines, in the same order, as in one thread."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from agents.repo_map import parse_child, parse_pool
from agents.repo_map.outline import FileOutline, SameContent, content_hash, parse_files
from tests.support.sandbox import secret_environment, secrets_in  # noqa: F401  (fixture)


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
        # empty where the process is in the machine's first autogroup, or scheduled in a cgroup's group (containers)
        found.append(int(words[-1]) if words else None)
    return found


@functools.cache
def _background_group() -> int | None:
    """The autogroup niceness a background parse process gets, or None where this machine has no autogroups or
    refuses their changes (a security module's rule). It leads a session, so has an autogroup of its own wherever
    the kernel has them, even where this process's reads empty."""
    if not os.path.exists("/proc/self/autogroup"):
        return None
    probe = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        for _ in range(parse_pool.AUTOGROUP_TRIES):
            try:
                Path(f"/proc/{probe.pid}/autogroup").write_text("0")
                break
            except BlockingIOError:  # the kernel's rate: one change per tenth of a second without CAP_SYS_ADMIN
                time.sleep(parse_pool.AUTOGROUP_RETRY_S)
            except OSError:  # refused for good (a security module's rule, a read-only /proc)
                return None
        else:
            return None  # never taken: other processes change autogroups all the time here
    finally:
        probe.kill()
        probe.wait()
    return max(_group_niceness([os.getpid()])[0] or 0, parse_pool.CHILD_NICENESS)


async def _group_niceness_once_set(pids: list[int], expected: int | None) -> list[int | None]:
    """`_group_niceness(pids)` once it is `expected` for each, or after a few seconds: the bot sets an autogroup's
    niceness again later when the kernel refuses it for its rate."""
    deadline = asyncio.get_running_loop().time() + 5
    while (found := _group_niceness(pids)) != [expected] * len(found) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
    return found


@pytest.mark.skipif(parse_pool.process_count() < 2, reason="one core: big batches are parsed in one thread")
def test_a_build_parses_at_a_lower_priority_unless_urgent_until_a_map_is_drawn(tmp_path: Path) -> None:
    # enough frames per child that, with the caller holding the frames, each child still has some to write
    states = _write_repo(tmp_path, parse_pool.PROCESS_MIN_FILES * 4)
    own = os.getpriority(os.PRIO_PROCESS, 0)
    background = max(own, parse_pool.CHILD_NICENESS)

    # where the kernel shares the CPU by session (autogroups), the nice value alone would not yield to the bot
    background_group = _background_group()
    groups: dict[bool, list[int | None]] = {}

    async def niceness_while_running(urgent: bool) -> tuple[list[int], list[int]]:
        """The niceness of the running parse processes after the first frame, then after `lower_priority`."""
        batches = parse_pool.parse_batches(tmp_path, sorted(states), states, {}, urgent=urgent)
        try:
            await anext(batches)
            pids = sorted(parse_pool._running)
            before = _niceness(pids)
            parse_pool.lower_priority()
            groups[urgent] = await _group_niceness_once_set(pids, background_group)
            return before, _niceness(pids)
        finally:
            await batches.aclose()  # the rest is not wanted: the processes are stopped

    urgent, lowered = asyncio.run(niceness_while_running(urgent=True))
    assert urgent and urgent == [own] * len(urgent)
    assert lowered == [background] * len(urgent)
    if background_group is not None:
        assert groups[True] == [background_group] * len(urgent)
    assert not parse_pool._running
    in_background, after = asyncio.run(niceness_while_running(urgent=False))
    assert in_background and in_background == after == [background] * len(in_background)
    if background_group is not None:
        assert groups[False] == [background_group] * len(in_background)


@pytest.mark.skipif(parse_pool.process_count() < 2, reason="one core: big batches are parsed in one thread")
def test_a_build_closed_early_has_reaped_its_processes_when_its_close_returns(tmp_path: Path) -> None:
    states = _write_repo(tmp_path, parse_pool.PROCESS_MIN_FILES * 4)

    async def close_early() -> tuple[list[int], dict[int, bool]]:
        batches = parse_pool.parse_batches(tmp_path, sorted(states), states, {})
        await anext(batches)
        pids = sorted(parse_pool._running)
        # the caller takes no frame for a while: the children fill every slot, and the workers wait for one
        deadline = asyncio.get_running_loop().time() + 5
        while any(_state(pid) not in ("S", None) for pid in pids) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        await batches.aclose()
        return pids, {pid: state for pid in pids if (state := _state(pid)) is not None}

    pids, left = asyncio.run(close_early())
    assert pids and left == {}, f"parse processes not reaped when the build's close returned (pid: state): {left}"


def _state(pid: int) -> str | None:
    """The process's state letter in /proc (None: ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


RATE_LIMITED = """
import asyncio, subprocess, sys
from agents.repo_map import parse_pool

async def main():
    children = [subprocess.Popen(["sleep", "60"], start_new_session=True) for _ in range(3)]
    try:
        for child in children:
            parse_pool._running[child.pid] = True  # as an urgent build's parse processes
        parse_pool.lower_priority()  # a map is drawn: all three at once
        await asyncio.sleep(parse_pool.AUTOGROUP_RETRY_S * (len(children) + 4))
        print(" ".join(open(f"/proc/{child.pid}/autogroup").read().split()[-1] for child in children))
    finally:
        for child in children:
            child.kill()
            child.wait()

asyncio.run(main())
"""


def test_every_parse_process_has_its_autogroup_lowered_where_the_kernel_takes_one_change_per_tenth_of_a_second() -> (
    None
):
    # Without CAP_SYS_ADMIN (the bot as a user; root in most containers) the kernel refuses a second change of an
    # autogroup's niceness within a tenth of a second, machine-wide: the bot tries it again later.
    if _background_group() is None:
        pytest.skip("this machine has no autogroups, or refuses changes of their niceness")
    command = [sys.executable, "-c", RATE_LIMITED]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("root here, and no setpriv (util-linux) to run without CAP_SYS_ADMIN")
        dropped = [setpriv, "--inh-caps=-sys_admin", "--bounding-set=-sys_admin"]
        if subprocess.run([*dropped, "true"], capture_output=True, timeout=30).returncode != 0:
            pytest.skip("root here, and setpriv may not drop CAP_SYS_ADMIN on this machine")
        command = [*dropped, *command]
    package_parent = str(Path(parse_pool.__file__).resolve().parents[2])
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": package_parent}
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(_background_group())] * 3


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


def test_a_build_someone_waits_on_takes_one_more_process_per_other_busy_task() -> None:
    assert parse_pool.processes_for(2, 0, urgent=True) == 2
    assert parse_pool.processes_for(2, 1, urgent=True) == 3
    assert parse_pool.processes_for(2, 7, urgent=True) == 4  # at most one more per core
    assert parse_pool.processes_for(4, 1, urgent=True) == 5
    assert parse_pool.processes_for(2, 3, urgent=False) == 2  # a background build yields (nice 10): nothing more
    assert parse_pool.processes_for(1, 3, urgent=True) == 1  # one core: parsed in a thread of this process


@pytest.mark.skipif(not Path("/proc/loadavg").exists(), reason="no /proc/loadavg: the OS does not tell")
@pytest.mark.skipif(parse_pool.process_count() < 2, reason="one core: big batches are parsed in one thread")
def test_an_urgent_build_beside_a_busy_process_starts_more_parse_processes_than_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    states = _write_repo(tmp_path, parse_pool.PROCESS_MIN_FILES + 50)
    started: list[bool] = []
    real_spawn = asyncio.create_subprocess_exec

    async def counted(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        started.append(True)
        return await real_spawn(*args, **kwargs)

    monkeypatch.setattr(parse_pool.asyncio, "create_subprocess_exec", counted)

    async def build(urgent: bool) -> list[list[tuple[str, object]]]:
        return [batch async for batch in parse_pool.parse_batches(tmp_path, sorted(states), states, {}, urgent=urgent)]

    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # always runnable while it lives
    try:
        deadline = time.monotonic() + 10
        while asyncio.run(parse_pool.busy_elsewhere()) < 1:  # the kernel counts it once it has been scheduled
            assert time.monotonic() < deadline, "a spinning process was never seen runnable"
            time.sleep(0.01)
        urgent_frames = asyncio.run(build(urgent=True))
        urgent_started, started[:] = len(started), []
        background_frames = asyncio.run(build(urgent=False))
    finally:
        spinner.kill()
        spinner.wait()
    assert urgent_started > parse_pool.process_count()
    assert len(started) == parse_pool.process_count()
    for frames in (urgent_frames, background_frames):
        assert sorted(path for batch in frames for path, _ in batch) == sorted(states)


async def test_the_parse_processes_get_none_of_the_bots_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secret_environment: None
) -> None:
    """They read repository files outside the sandbox: the bot's environment without its keys, and the bot's own
    code on their module path."""
    seen: list[Any] = []

    class NotStarted(Exception):
        pass

    async def not_started(argv: Any, **options: Any) -> Any:
        seen.append(options.get("env"))
        raise NotStarted

    monkeypatch.setattr(parse_pool, "start_group", not_started)
    with pytest.raises(NotStarted):
        await parse_pool._in_child(tmp_path, deque([["a.py"]]), deque(), {}, {}).__anext__()
    assert seen and not secrets_in(seen[0]), secrets_in(seen[0])
    assert str(Path(parse_pool.__file__).resolve().parents[2]) in seen[0]["PYTHONPATH"].split(os.pathsep)
