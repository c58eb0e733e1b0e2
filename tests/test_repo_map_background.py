"""A workspace's index is built in the background when the workspace is first seen; a task waits on a cold build
only for its budget, then gets a map of what is indexed so far, and the whole map once the build is done."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from agents import runtime as runtime_module
from agents.core.models import Caller
from agents.core.protocols import ModelState
from agents.core.user_turns import UserTurns
from agents.repo_map import maps as maps_module
from agents.repo_map import parse_pool
from agents.repo_map.maps import RepoMap
from agents.store.database import Store
from tests.conftest import BotHarness, make_repo
from tests.fakes import anthropic_server as claude_says

FILES = parse_pool.THREAD_CHUNK + 50  # two thread hops (below the child-process threshold)
LATE = f"pkg/mod_{FILES - 1:04d}.py"  # in the second hop


def big_repo(root: Path) -> Path:
    files = {
        f"pkg/mod_{n:04d}.py": f'"""Module {n}."""\n\n\ndef compute_{n}(values: list[int]) -> int:\n    return sum(values)\n'
        for n in range(FILES)
    }
    make_repo(root, files)
    return root


def hold_late_files(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """The cold build's hop holding LATE waits until the returned event is set (the test's pause in the build)."""
    held = threading.Event()
    real_parse = parse_pool.parse_files

    def parse_files(base, paths, states, hashes):
        if LATE in paths:
            assert held.wait(60), "the test never released the build"
        return real_parse(base, paths, states, hashes)

    monkeypatch.setattr(parse_pool, "parse_files", parse_files)
    return held


async def test_a_cold_build_past_the_budget_gives_what_is_indexed_so_far_then_the_whole_map(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = big_repo(tmp_path / "big")
    held = hold_late_files(monkeypatch)
    repo_map = RepoMap(store)
    request = f"fix compute_{FILES - 1} in {LATE}"
    try:
        # a budget long enough for the first chunk to be indexed on a loaded machine, too short for the held files
        partial = await repo_map.task_map("big", root, request, 2000, wait_seconds=3.0)
        assert "still being built" in partial
        assert f"the {parse_pool.THREAD_CHUNK} files indexed so far" in partial
        assert LATE not in partial, "not parsed yet: not in the map"
        assert "pkg/mod_0000.py" in partial or "def compute_" in partial
        build = repo_map.building("big")
        assert build is not None and not build.done(), "the build goes on after the task stopped waiting"
    finally:
        held.set()
    assert await asyncio.wait_for(build, 30) is True
    whole = await repo_map.task_map("big", root, request, 2000, wait_seconds=5)
    assert "still being built" not in whole
    assert whole.split("\n")[1].startswith(LATE), "the named file comes first once it is indexed"
    assert f"Repository map of big: {FILES} files" in whole


async def test_the_wait_budget_leaves_the_time_to_draw_what_is_indexed(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The budget covers waiting and drawing: once drawing what is indexed would take the rest of it, the wait ends."""
    root = big_repo(tmp_path / "big")
    held = hold_late_files(monkeypatch)
    repo_map = RepoMap(store)
    repo_map.render_seconds_per_file = 0.2  # drawing the first hop's files would take 40 s: more than the 30
    loop = asyncio.get_running_loop()
    try:
        started = loop.time()
        partial = await repo_map.task_map("big", root, "fix compute_3", 2000, wait_seconds=30)
        assert loop.time() - started < 10, "the task did not wait out the budget"
        assert f"the {parse_pool.THREAD_CHUNK} files indexed so far" in partial
    finally:
        held.set()
        await repo_map.close()


async def test_a_task_map_with_a_ready_index_is_of_the_tasks_own_worktree_index(store: Store, tmp_path: Path) -> None:
    root = big_repo(tmp_path / "big")
    repo_map = RepoMap(store)
    await repo_map.refresh("big", root)
    text = await repo_map.task_map(
        "big", root, f"fix compute_3 in {LATE}", 2000, wait_seconds=5, task_index="big@task-1", task_root=root
    )
    assert "still being built" not in text and LATE in text
    assert await store.repo_index.file_count("big@task-1") == FILES, "the task's index is a copy, refreshed"


async def test_no_map_while_nothing_is_indexed_yet(store: Store, tmp_path: Path, monkeypatch) -> None:
    root = big_repo(tmp_path / "big")
    held = threading.Event()
    real_parse = parse_pool.parse_files

    def parse_files(base, paths, states, hashes):
        assert held.wait(30), "the test never released the build"
        return real_parse(base, paths, states, hashes)

    monkeypatch.setattr(parse_pool, "parse_files", parse_files)
    repo_map = RepoMap(store)
    try:
        assert await repo_map.task_map("big", root, "anything", 2000, wait_seconds=0.2) == ""
    finally:
        held.set()
        await repo_map.close()


async def test_a_new_workspace_is_indexed_in_the_background_at_once(bot: BotHarness) -> None:
    await bot.runtime.crew.binding.create(Caller(chat_id=bot.chat_id), "fresh")
    build = bot.runtime.repo_map.building("fresh")
    assert build is not None, "create_workspace starts indexing the new workspace"
    assert await asyncio.wait_for(build, 30) is True
    assert await bot.runtime.store.repo_index.info("fresh") is not None


@pytest.mark.settings(voice_preload=True)  # the start-up work starts the speech model too
async def test_the_bot_indexes_its_workspaces_after_start_up_without_a_message(
    short_grace: float, bot: BotHarness
) -> None:
    assert bot.runtime.start_up is not None
    await asyncio.wait_for(asyncio.shield(bot.runtime.start_up), 30)  # the grace period, then the work
    build = bot.runtime.repo_map.building("calc")
    assert build is not None, "no message needed: start-up work indexes every workspace"
    assert build.done() and build.result() is True
    assert await bot.runtime.store.repo_index.file_count("calc") > 0
    assert bot.runtime.transcriber is not None and bot.runtime.transcriber.state is ModelState.ready


@pytest.fixture
def short_grace(monkeypatch: pytest.MonkeyPatch) -> float:
    """Start-up work begins 0.3 s after the start when no message comes (set before the bot starts)."""
    monkeypatch.setattr(runtime_module, "START_UP_GRACE_SECONDS", 0.3)
    return 0.3


@pytest.mark.settings(voice_preload=True)  # the start-up work starts the speech model too
async def test_start_up_work_waits_until_the_first_turn_has_its_answer(short_grace: float, bot: BotHarness) -> None:
    """A message sent right after the start is answered before the speech model loads and the indexes build."""
    asked = threading.Event()
    answer = threading.Event()

    def slow_model(_body: dict) -> dict:
        asked.set()
        answer.wait(10)
        return claude_says.text("hello")

    bot.claude.handler = slow_model
    bot.say("hi")
    assert await asyncio.to_thread(asked.wait, 10)
    await asyncio.sleep(3 * short_grace)  # past the grace period: a turn in flight holds the start-up work still
    assert bot.runtime.repo_map.building("calc") is None, "no index is built while the first turn waits"
    assert bot.runtime.transcriber is not None and bot.runtime.transcriber.state is ModelState.not_loaded
    answer.set()
    await bot.replies(1)
    await asyncio.wait_for(asyncio.shield(bot.runtime.start_up), 30)
    assert bot.runtime.repo_map.building("calc") is not None
    assert bot.runtime.transcriber.state is ModelState.ready


async def test_an_index_build_stores_nothing_while_a_turn_is_in_flight(store: Store, tmp_path: Path) -> None:
    root = make_repo(tmp_path / "small", {"a.py": "def f():\n    pass\n", "b.py": "def g():\n    pass\n"})
    turns = UserTurns()
    repo_map = RepoMap(store, turns)
    try:
        with turns.turn():
            build = repo_map.index_in_background("small", root)
            await asyncio.sleep(0.5)
            assert not build.done(), "the build waits for the turn's answer"
            assert await store.repo_index.file_count("small") == 0
        assert await asyncio.wait_for(build, 30) is True
        assert await store.repo_index.file_count("small") == 2
    finally:
        await repo_map.close()


async def test_a_build_someone_waits_on_parses_at_the_bots_priority_until_a_map_is_drawn(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = big_repo(tmp_path / "big")
    urgent: list[bool] = []
    lowered: list[str] = []
    real_parse_batches = maps_module.parse_batches

    def parse_batches(*args: Any, **kwargs: Any) -> Any:
        urgent.append(kwargs["urgent"])
        return real_parse_batches(*args, **kwargs)

    monkeypatch.setattr(maps_module, "parse_batches", parse_batches)
    monkeypatch.setattr(maps_module, "lower_priority", lambda: lowered.append("drawing"))
    repo_map = RepoMap(store)
    assert await repo_map.index_in_background("unwatched", root)  # nobody waits on it: in the background
    await repo_map.refresh("asked", root)  # its caller waits on it
    repo_map.index_in_background("waited", root)
    text = await repo_map.task_map("waited", root, "fix compute_3", 2000, wait_seconds=60.0)
    assert text.startswith("Repository map of waited") and urgent == [False, True, True]
    assert lowered == ["drawing"]  # the map, once drawn, comes before any build's parse processes
