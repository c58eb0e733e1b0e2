"""Per-test verdicts end to end: the three verdicts (✔ seen passing, ✗ broken or not fixed, ⚠ unverified) through the real
bot: scripted model, fake Telegram, real pytest, real bwrap, workspaces built here."""

from __future__ import annotations

from pathlib import Path

from agents.core.models import Caller, TaskStatus
from tests.conftest import USER_ID, BotHarness, make_repo
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.tasks import corrections, edit, final_summary, start_task, write_file


async def run_task(
    bot: BotHarness, model: RoleScript, workspace: str, instructions: str, *worker_turns: dict, timeout: float = 90
):
    """Ask for a code task on `workspace`, the worker playing `worker_turns`; the ended task and its summary."""
    model.add("orchestrator", start_task(workspace, instructions), claude_says.text("started"))
    model.add("code", *worker_turns)
    bot.say(f"please: {instructions}")
    task, summary = await final_summary(bot, 1, timeout=timeout)
    print(f"\nFIRST LINE [{workspace}]: {summary.text.splitlines()[0]}")  # for the before/after note
    return task, summary


def first_line(summary) -> str:
    return summary.text.splitlines()[0]


def merge_label(summary) -> str:
    rows = (summary.reply_markup or {}).get("inline_keyboard", [])
    return next(b["text"] for row in rows for b in row if "Merge" in b["text"])


async def test_collection_error_at_the_base_is_never_done(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """pytest exit 2 (a collection error, 0 tests run) at the base and after: a change that breaks url_for is
    ⚠ unverified, saying why, never ✔."""
    make_repo(
        workspace_root / "web",
        {
            "routes.py": "def url_for(name):\n    return '/' + name\n",
            "test_routes.py": "from routes import url_for\n\ndef test_url_for():\n    assert url_for('a') == '/a'\n",
            "test_legacy.py": "import no_such_module_anywhere\n\ndef test_old():\n    pass\n",
        },
    )
    task, summary = await run_task(
        bot,
        model,
        "web",
        "Make url_for() shorter.",
        edit("routes.py", "'/' + name", "name"),
        claude_says.text("Shorter."),
    )
    assert task.status is TaskStatus.UNVERIFIED
    assert first_line(summary).startswith("⚠"), first_line(summary)
    assert "unverified" in first_line(summary) and "collection" in first_line(summary)
    assert "at the base and now" in first_line(summary)
    assert corrections(model) == [], "nothing seen failing: nothing to send back"
    assert "✔" not in first_line(summary) and "done" not in first_line(summary)
    assert merge_label(summary) == "⚠ Merge unverified"
    print(summary.text)
    bot.tg.send_command(USER_ID, "/task 1")  # the task in detail, then its summary again from the outbox
    detail = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if "Tool calls:" in (m.text or "")), None)
    )
    assert "· unverified ·" in detail.text and "Reason: ⚠ Task #1 needs a look" in detail.text
    again = await bot.tg.await_for(lambda: [m for m in bot.tg.messages(USER_ID) if m.text == summary.text][1:] or None)
    assert merge_label(again[0]) == "⚠ Merge unverified"


async def test_whole_suite_red_before_and_after_is_unverified(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    """A script that only fails or passes as a whole, red at the base and after: the bot cannot tell → ⚠."""
    make_repo(
        workspace_root / "script",
        {
            ".agentlab.toml": '[tests]\ncommand = "sh check.sh"\n',
            "check.sh": 'test "$(cat value)" = 1 && test "$(cat other)" = 1\n',
            "value": "1\n",
            "other": "0\n",
        },
    )
    task, summary = await run_task(
        bot, model, "script", "Set value to 2.", write_file("value", "2\n"), claude_says.text("Set.")
    )
    assert task.status is TaskStatus.UNVERIFIED
    assert first_line(summary).startswith("⚠") and "as a whole" in first_line(summary), first_line(summary)
    assert corrections(model) == []
    bot.tg.send_command(USER_ID, "/tasks")
    listing = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if "Recent tasks" in (m.text or "")), None)
    )
    assert "[unverified]" in listing.text
    shown = await bot.runtime.crew.lookups.get_task(Caller(chat_id=USER_ID), 1)
    assert "[unverified]" in shown and "as a whole" in shown


async def test_fix_task_with_a_non_fix_is_sent_back_naming_its_target(bot: BotHarness, model: RoleScript) -> None:
    """calc's test_add fails at the base; "fix the bug in calc.py" with a change that does not fix it is corrected
    naming test_add (the task's target), and only the real fix is ✔."""
    task, summary = await run_task(
        bot,
        model,
        "calc",
        "Fix the bug in calc.py.",
        edit("calc.py", "a - b", "a * b"),
        claude_says.text("Fixed the bug."),
        edit("calc.py", "a * b", "a + b"),
        claude_says.text("Now really fixed."),
    )
    [correction] = corrections(model)
    assert "test_calc.py::test_add" in correction and "assert 6 == 5" in correction
    assert correction.index("test_calc.py::test_add") < correction.index("assert 6 == 5"), "names first"
    assert "1 failed" in correction, "the counts"
    assert task.status is TaskStatus.COMPLETED
    assert first_line(summary).startswith("✔") and "1 fixed" in summary.text


async def test_unrelated_change_on_a_red_base_is_done_with_the_old_failure_listed(
    bot: BotHarness, model: RoleScript
) -> None:
    task, summary = await run_task(
        bot,
        model,
        "calc",
        "Add a module greet.py with hello() returning 'hi'.",
        write_file("greet.py", "def hello():\n    return 'hi'\n"),
        claude_says.text("Added greet.py."),
    )
    assert task.status is TaskStatus.COMPLETED and corrections(model) == []
    assert first_line(summary).startswith("✔")
    assert "Failing before (pre-existing): test_calc.py::test_add" in summary.text
    assert merge_label(summary) == "Merge"


async def test_task_whose_net_change_is_nothing_says_so(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    make_repo(
        workspace_root / "shop",
        {
            "price.py": "def total(a, b):\n    return a + b\n",
            "test_price.py": "from price import total\n\ndef test_total():\n    assert total(2, 3) == 5\n",
        },
    )
    task, summary = await run_task(
        bot,
        model,
        "shop",
        "Make total() faster.",
        edit("price.py", "a + b", "a - b"),
        claude_says.text("Faster."),
        edit("price.py", "a - b", "a + b"),
        claude_says.text("Put it back."),
    )
    assert len(corrections(model)) == 1 and task.status is TaskStatus.COMPLETED
    files = next(line for line in summary.text.splitlines() if line.startswith("Files:"))
    assert files != "Files:" and "no net change" in files, files
