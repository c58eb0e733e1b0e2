"""End to end through the real bot: a second task on the same base commit reuses the first one's base run; a
changed lock file or `.agentlab.toml` in the workspace makes the next task run the base again."""

from __future__ import annotations

from pathlib import Path

from agents.core.models import TaskStatus
from tests.conftest import BotHarness, make_repo
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.tasks import final_summary, start_task

REUSED = "reused from an earlier run"


async def run_task(bot: BotHarness, model: RoleScript, number: int) -> str:
    """One harmless task on `shop` (a new file); its summary's text."""
    model.add("orchestrator", start_task("shop", f"Add note{number}.txt."), claude_says.text("started"))
    model.add(
        "code",
        claude_says.tool_use("write_file", {"path": f"note{number}.txt", "content": "hi\n"}),
        claude_says.text("Added."),
    )
    bot.say(f"add note{number} to shop")
    task, summary = await final_summary(bot, number, timeout=60)
    assert task.status is TaskStatus.COMPLETED, summary.text
    assert "1 passed" in summary.text
    return summary.text


async def test_second_task_reuses_the_base_run_until_a_lock_file_or_agentlab_toml_changes(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    repo = make_repo(
        workspace_root / "shop",
        {
            "price.py": "def total(a, b):\n    return a + b\n",
            "test_price.py": "from price import total\n\ndef test_total():\n    assert total(2, 3) == 5\n",
            "requirements.txt": "pytest\n",
        },
    )
    (repo / ".agentlab.toml").write_text('[tests]\ncommand = "python -m pytest -q -p no:cacheprovider"\n')

    assert REUSED not in await run_task(bot, model, 1), "the first task on the commit runs the base"
    assert REUSED in await run_task(bot, model, 2), "the second task on the same base reuses it"

    (repo / "requirements.txt").write_text("pytest\nrequests\n")  # the lock file changed in the workspace
    assert REUSED not in await run_task(bot, model, 3), "a changed lock file runs the base again"

    (repo / ".agentlab.toml").write_text('[tests]\ncommand = "python -m pytest -q -p no:cacheprovider"\ntimeout = 90\n')
    assert REUSED not in await run_task(bot, model, 4), "a changed .agentlab.toml runs the base again"
