"""The repo map in use: a worker's first turn carries it; the orchestrator knows where a code name is defined."""

from __future__ import annotations

import pytest

from tests.conftest import BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, last_user_text
from tests.support.tasks import final_summary, start_task


@pytest.mark.quick_tests  # the verdict is not what this test is about
async def test_worker_first_turn_carries_the_map_of_the_named_file(bot: BotHarness, workspace_root) -> None:
    model = RoleScript()
    bot.claude.handler = model
    model.add("orchestrator", start_task("calc", "Fix add() in calc.py: it subtracts."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("find_symbols_by_name", {"query": "add"}),
        claude_says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
        claude_says.text("Fixed."),
    )
    bot.say("fix add in calc.py")
    task, _ = await final_summary(bot, 1)
    first = last_user_text(model.requests["code"][0])
    assert "Repository map" in first
    map_part = first.split("Repository map", 1)[1]
    assert map_part.index("calc.py") < map_part.index("test_calc.py"), "the named file comes first"
    assert "def add(a, b)" in map_part
    lookup = model.requests["code"][1]["messages"][-1]["content"][0]["content"]
    assert lookup.startswith("calc.py:1 function def add(a, b)")
    await bot.runtime.engine.wait(1)
    assert await bot.runtime.store.repo_index.file_count("calc@task-1") == 0, (
        "the task's own index is dropped at the end"
    )


async def test_orchestrator_knows_where_a_name_is_defined_without_a_tool_call(bot: BotHarness, workspace_root) -> None:
    await bot.runtime.repo_map.refresh("calc", workspace_root / "calc")
    model = RoleScript()
    bot.claude.handler = model
    model.add("orchestrator", claude_says.text("`add` is defined in calc.py, line 1."))
    bot.say("where is add defined?")
    await bot.replies(1)
    context = model.requests["orchestrator"][0]["messages"][-1]["content"][-1]["text"]
    assert "calc: calc.py:1 function def add(a, b)" in context
    assert bot.claude.calls == 1 and len(model.requests["orchestrator"]) == 1
