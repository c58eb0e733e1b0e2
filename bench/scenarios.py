"""Tokens and API calls per scenario, and the prompt-cache share of the orchestrator's input after the first message.

The real bot runs against the loopback fakes with a scripted model. Token counts are the fake Anthropic server's
estimates (about 4 characters a token, with prompt caching simulated by prefix hashing like the real API: prefixes
under 1,024 tokens are not cached). What they measure honestly is how much prompt agentlab itself sends (system
prompts, tool schemas, context, history, tool results) and how much of it a cache can serve; the model's own replies
are the short scripted ones, so output tokens say little.

Scenarios: a direct answer; research + approval (research worker → proposal → Approve button → code worker);
a code fix with one correction (the bot's test run fails once and the worker corrects).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tempfile  # noqa: E402

from agents.store.database import start_of_day
from agents.store.standing import StandingNote, StandingNotes
from bench._harness import agentlab_settings, emit_json, machine, parse_args, quiet_logging, running_fakes  # noqa: E402
from tests.conftest import CALC_BUGGY, USER_ID, make_repo, start_bot  # noqa: E402
from tests.fakes import anthropic_server as says  # noqa: E402
from tests.scripted import RoleScript  # noqa: E402

NOTE_TEXT = ("in calc we use pnpm for the web part", "never edit the migrations", "answer me in German")


def tokens(records) -> dict[str, int]:
    keys = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    return {k: sum(getattr(r, k) for r in records) for k in keys}


async def run_scenario(name: str, script, drive) -> dict:
    """Run one scenario on a fresh bot; returns its API calls and tokens by agent."""
    with running_fakes() as (tg, claude), tempfile.TemporaryDirectory(prefix="agentlab-scn-") as tmp:
        root = Path(tmp)
        (root / "workspaces").mkdir()
        make_repo(root / "workspaces" / "calc", CALC_BUGGY)
        make_repo(root / "workspaces" / "notes", {"notes.py": "def shout(text):\n    return text\n"})
        model = RoleScript()
        claude.handler = model
        script(model)
        bot = await start_bot(agentlab_settings(tg, claude, root), tg, claude)
        try:
            await drive(bot)
            records = await bot.runtime.store.usage_since(start_of_day())
        finally:
            from telegram_bot.app import stop_application

            await stop_application(bot.app)
    by_agent: dict[str, dict[str, int]] = {}
    for agent in sorted({r.agent for r in records}):
        mine = [r for r in records if r.agent == agent]
        by_agent[agent] = {"calls": len(mine), **tokens(mine)}
    return {"scenario": name, "api_calls": len(records), **tokens(records), "by_agent": by_agent}


async def task_done(bot, task_id: int, timeout: float = 120.0) -> None:
    await asyncio.wait_for(bot.runtime.engine.wait(task_id), timeout)


def direct_script(model: RoleScript) -> None:
    model.add(
        "orchestrator", says.text("`async def` makes a coroutine; `await` suspends it until the result is ready.")
    )


async def direct_drive(bot) -> None:
    bot.say("what's async/await in python?")
    await bot.replies(1)


def research_script(model: RoleScript) -> None:
    model.add(
        "orchestrator",
        says.tool_use("start_research", {"workspace": "notes", "request": "make shout() shout"}),
        says.text("Researching; a proposal will follow."),
    )
    model.add(
        "research",
        says.tool_use("glob", {"pattern": "**/*.py"}),
        says.tool_use("read_file", {"path": "notes.py"}),
        says.text(
            "## Summary\nshout() returns its input unchanged.\n## Current state\n`notes.py`.\n"
            "## Proposed changes\nReturn text.upper() + '!'.\n## Plan\n1. shout() upper-cases and adds '!'\n"
            "## Risks\nNone.\n## Effort\nsmall"
        ),
    )
    model.add(
        "code",
        says.tool_use("read_file", {"path": "notes.py"}),
        says.tool_use("edit_file", {"path": "notes.py", "old": "return text", "new": "return text.upper() + '!'"}),
        says.tool_use("verify_criterion", {"index": 1, "evidence": "notes.py returns text.upper() + '!'"}),
        says.text("shout() now upper-cases and adds '!'."),
    )


async def research_drive(bot) -> None:
    bot.say("improve shout in the notes project")
    shown = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if "Proposal #1" in (m.text or "")), None), timeout=60
    )
    bot.tg.press_button(USER_ID, shown.message_id, "proposal:approve:1")
    await task_done(bot, 2)


def correction_script(model: RoleScript) -> None:
    model.add(
        "orchestrator",
        says.tool_use(
            "start_task",
            {
                "workspace": "calc",
                "worker": "code",
                "background": True,
                "instructions": "Fix add() in calc.py; test_calc.py must pass.",
            },
        ),
        says.text("Started."),
    )
    model.add(
        "code",
        says.tool_use("read_file", {"path": "calc.py"}),
        says.tool_use("edit_file", {"path": "calc.py", "old": "a - b", "new": "a * b"}),
        says.text("Fixed add()."),
        says.tool_use("edit_file", {"path": "calc.py", "old": "a * b", "new": "a + b"}),
        says.text("Really fixed add() now."),
    )


async def correction_drive(bot) -> None:
    bot.say("fix the bug in calc")
    await task_done(bot, 1)


async def cache_share(messages: int = 10, notes: int = 0) -> dict:
    """Orchestrator input tokens served from the cache for messages 2..N of one chat (direct answers).

    `notes`: standing notes of the user kept before the first message, and one more remembered half-way (they sit in
    each turn's context, after the cached prefix)."""
    with running_fakes() as (tg, claude), tempfile.TemporaryDirectory(prefix="agentlab-cache-") as tmp:
        root = Path(tmp)
        (root / "workspaces").mkdir()
        make_repo(root / "workspaces" / "calc", CALC_BUGGY)
        model = RoleScript()
        claude.handler = model
        for i in range(messages):
            model.add("orchestrator", says.text(f"Answer {i}: " + "a reasonably detailed explanation. " * 8))
        bot = await start_bot(agentlab_settings(tg, claude, root), tg, claude)
        kept = StandingNotes(bot.runtime.store)
        for n in range(notes):
            await kept.add(StandingNote(user_id=USER_ID, workspace="calc" if n % 2 else None, text=NOTE_TEXT[n % 3]))
        try:
            for i in range(messages):
                if notes and i == messages // 2:
                    await kept.add(StandingNote(user_id=USER_ID, text="from now on answer in short sentences"))
                bot.say(f"question number {i} about python")
                await bot.replies(i + 1)
            records = [r for r in await bot.runtime.store.usage_since(start_of_day()) if r.agent == "orchestrator"]
        finally:
            from telegram_bot.app import stop_application

            await stop_application(bot.app)
    later = records[1:]
    total_input = sum(r.input_tokens + r.cache_read_input_tokens + r.cache_creation_input_tokens for r in later)
    read = sum(r.cache_read_input_tokens for r in later)
    first = records[0]
    return {
        "messages": messages,
        "notes": notes,
        "share": read / total_input if total_input else 0.0,
        "first_message_input": first.input_tokens + first.cache_creation_input_tokens + first.cache_read_input_tokens,
        "later_cache_read": read,
        "later_input_total": total_input,
    }


async def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    quiet_logging()
    results = [
        await run_scenario("direct answer", direct_script, direct_drive),
        await run_scenario("research + approval", research_script, research_drive),
        await run_scenario("code fix with one correction", correction_script, correction_drive),
    ]
    cache = await cache_share()
    cache_notes = await cache_share(notes=6)
    print(f"machine: {machine()}")
    print("tokens as estimated by the fake server (≈4 chars/token); caching simulated like the real API\n")
    print(f"{'scenario':32} {'calls':>5} {'input':>8} {'cache read':>10} {'cache write':>11} {'output':>7}")
    for r in results:
        print(
            f"{r['scenario']:32} {r['api_calls']:5d} {r['input_tokens']:8,d} {r['cache_read_input_tokens']:10,d} "
            f"{r['cache_creation_input_tokens']:11,d} {r['output_tokens']:7,d}"
        )
        for agent, f in r["by_agent"].items():
            print(
                f"  {agent:30} {f['calls']:5d} {f['input_tokens']:8,d} {f['cache_read_input_tokens']:10,d} "
                f"{f['cache_creation_input_tokens']:11,d} {f['output_tokens']:7,d}"
            )
    met = "met" if cache["share"] >= 0.8 else "NOT met"
    print(
        f"\norchestrator input served from the prompt cache, messages 2..{cache['messages']} of one chat: "
        f"{cache['share']:.1%} (target ≥ 80%: {met}); first message: {cache['first_message_input']:,} input tokens"
    )
    met = "met" if cache_notes["share"] >= 0.8 else "NOT met"
    print(
        f"the same with {cache_notes['notes']} standing notes (and one more remembered half-way): "
        f"{cache_notes['share']:.1%} (target ≥ 80%: {met})"
    )
    if args.json:
        emit_json({"scenarios": results, "cache": cache, "cache_with_notes": cache_notes})


if __name__ == "__main__":
    asyncio.run(main())
