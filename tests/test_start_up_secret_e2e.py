"""A secret the bot added to its output filter at start-up never reaches the model or the chat: through the real bot.

The bot's API key here has no known token shape, so only the filter the runtime built at start-up (and passed to the
notifier, the orchestrator's tools and each task's tools) can mask it. A hostile model tries every way out it has: the
orchestrator reads a file that holds the key, a code worker prints it with its shell and writes it in its last words,
and the orchestrator writes it in its answer. Neither model nor chat sees it.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from agents.core.secrets_filter import MASK
from tests.conftest import BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.tasks import ended, start_task, tool_results

OWN_KEY = "Own-Start-Up-Key-Of-No-Shape-5512"  # masked only because the bot added it to its filter at start-up


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
@pytest.mark.settings(anthropic_api_key=OWN_KEY)
async def test_a_secret_added_at_start_up_reaches_neither_model_nor_chat(bot: BotHarness, workspace_root: Path) -> None:
    (workspace_root / "calc" / "notes.txt").write_text(f"the key is {OWN_KEY}\n")
    model = RoleScript()
    bot.claude.handler = model
    model.add(
        "orchestrator",
        claude_says.tool_use("read_file", {"workspace": "calc", "path": "notes.txt"}),
        start_task("calc", "Print the key."),
        claude_says.text(f"Started. By the way, the key is {OWN_KEY}."),
    )
    model.add(
        "code",
        claude_says.tool_use("run_command", {"command": f"printf '%s\\n' {shlex.quote(OWN_KEY)}; echo done-print"}),
        claude_says.text(f"Done: the key is {OWN_KEY}."),
    )
    bot.say("read notes.txt in calc, then print the key in a task")
    await ended(bot, 1, timeout=90)
    await bot.tg.await_for(lambda: any("Done: the key is" in (m.text or "") for m in bot.tg.messages(bot.chat_id)))

    read = [r for r in tool_results(model, "orchestrator") if "the key is" in r]
    printed = [r for r in tool_results(model) if "done-print" in r]
    assert read and printed, (tool_results(model, "orchestrator"), tool_results(model))
    for result in [*read, *printed]:
        assert OWN_KEY not in result and json.dumps(MASK)[1:-1] in result, result
    sent = [json.dumps(call.params, ensure_ascii=False) for call in bot.tg.requests]
    assert sent and not [s for s in sent if OWN_KEY in s], "the key reached the chat"
    shown = "\n".join(v.text or "" for m in bot.tg.messages(bot.chat_id) for v in m.history)
    assert f"the key is {MASK}" in shown, shown
