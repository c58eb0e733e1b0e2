"""Workers cannot ask, and the orchestrator does not stop early: end to end through the real bot and SDK."""

from __future__ import annotations

import pytest

from agents.core.models import TaskStatus
from tests.conftest import USER_ID, BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.tasks import ended, start_task


@pytest.mark.quick_tests  # whether the tests ran is the point, not what ran them
@pytest.mark.parametrize(
    ("ending", "why"),
    [
        (claude_says.text("BLOCKED: should add() round floats or keep them exact? Nobody said."), "round floats"),
        pytest.param(  # a question without the mark is a report; no correction: one test run shows it was tested
            claude_says.text("Should I change add() or its test?"), None, marks=pytest.mark.settings(max_corrections=0)
        ),
        (claude_says.text("I won't do this.", stop_reason="refusal"), "refused"),
        (claude_says.text("Half of a rep", stop_reason="max_tokens"), "cut off"),
        (claude_says.text("x", stop_reason="model_context_window_exceeded"), "context window"),
    ],
)
async def test_a_worker_that_cannot_go_on_ends_the_task_blocked_without_a_test_run(
    bot: BotHarness, model: RoleScript, ending: dict, why: str | None
) -> None:
    model.add(
        "orchestrator",
        start_task("calc", "Fix add()"),
        claude_says.text("Started."),
    )
    model.add("code", claude_says.tool_use("read_file", {"path": "calc.py"}), ending)
    bot.say("fix add in calc")
    task = await ended(bot, 1)
    summary = await bot.tg.await_for(
        lambda: next(
            (m for m in bot.tg.messages(USER_ID) if "Task #1" in (m.text or "") and "Files:" in (m.text or "")), None
        )
    )
    if why is None:  # finished: the bot runs the tests (and they fail: add still subtracts)
        assert "Tests:" in summary.text and "not run" not in summary.text
        return
    assert task.status is TaskStatus.BLOCKED, task
    assert why in (task.error or "") and "blocked" in summary.text
    assert "not run" in summary.text, "a blocked worker's work is never tested nor reported done"
    assert "done" not in summary.text.split("\n")[0]


async def test_research_that_is_blocked_writes_no_proposal(bot: BotHarness, model: RoleScript) -> None:
    model.add(
        "orchestrator",
        claude_says.tool_use("start_research", {"workspace": "calc", "request": "make it fast"}),
        claude_says.text("Researching."),
    )
    model.add("research", claude_says.text("BLOCKED: which part is slow? The repository has no benchmarks."))
    bot.say("make calc fast")
    task = await ended(bot, 1)
    assert task.status is TaskStatus.BLOCKED and "which part is slow" in task.error
    assert await bot.runtime.store.pending_proposals(USER_ID) == []


async def test_orchestrator_retries_a_tool_call_cut_off_at_max_tokens(bot: BotHarness, model: RoleScript) -> None:
    cut = claude_says.tool_use("read_file", {"workspace": "calc", "path": "calc.py"}, text="Let me read")
    cut["stop_reason"] = "max_tokens"
    model.add(
        "orchestrator",
        cut,
        claude_says.tool_use("read_file", {"workspace": "calc", "path": "calc.py"}),
        claude_says.text("add() returns a - b."),
    )
    bot.say("what does add do?")
    [reply] = await bot.replies(1)
    assert reply.text == "add() returns a - b."
    retried = model.requests["orchestrator"][1]["messages"][-1]["content"][0]
    assert retried["is_error"] and "cut off" in retried["content"]


async def test_orchestrator_never_says_done_when_nothing_started(bot: BotHarness, model: RoleScript) -> None:
    empty = claude_says.text("")
    empty["content"] = []
    model.add("orchestrator", claude_says.tool_use("list_tasks", {}), empty)
    bot.say("anything running?")
    [reply] = await bot.replies(1)
    assert reply.text != "Done." and "list_tasks" in reply.text and "no answer" in reply.text
