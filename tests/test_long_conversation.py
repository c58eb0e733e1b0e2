"""Long conversations are compacted under the budget; acceptance criteria are verified or reported unverified."""

from __future__ import annotations

import json

from agents.core.models import ChatMessage, Proposal, Role, TaskStatus
from agents.core.text import estimate_tokens
from tests.conftest import USER_ID, make_settings, start_bot
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript, last_user_text
from tests.support.tasks import final_summary


async def test_500_turns_are_compacted_and_the_pending_proposal_stays_visible(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    from telegram_bot.app import stop_application

    budget = 4000
    settings = make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root, history_token_budget=budget)
    bot = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        store = bot.runtime.store
        for i in range(500):
            role = Role.USER if i % 2 == 0 else Role.ASSISTANT
            text = f"turn {i}: " + "we discussed the calc module and its add function " * 3
            await store.add_message(ChatMessage(chat_id=USER_ID, role=role, content=text, tokens=estimate_tokens(text)))
        await store.add_proposal(
            Proposal(chat_id=USER_ID, workspace="calc", request="make add correct", body="## Summary\nFix add.")
        )
        model = RoleScript()
        bot.claude.handler = model
        model.add("compactor", claude_says.text("Earlier: we talked at length about calc.add."))
        model.add(
            "orchestrator",
            claude_says.text("We were on calc; proposal #1 is waiting."),
            claude_says.text("Still here."),
        )
        bot.say("where were we?")
        await bot.replies(1)
        [compaction] = model.requests["compactor"]
        assert (
            "turn 0:" in compaction["messages"][0]["content"]
            and "turn 498:" not in compaction["messages"][0]["content"]
        )
        request = model.requests["orchestrator"][0]
        history = request["messages"]
        assert history[0]["content"][0]["text"].startswith("[Summary of our earlier conversation]")
        history_tokens = sum(estimate_tokens(b.get("text", "")) for m in history[:-1] for b in m["content"])
        assert history_tokens <= budget
        assert "proposal #1 for calc" in history[-1]["content"][-1]["text"]
        assert estimate_tokens(json.dumps(request["messages"])) < budget + 1500
        notes = await store.latest_note(USER_ID)
        assert notes.summary == "Earlier: we talked at length about calc.add."

        bot.say("and now?")
        await bot.replies(2)
        assert len(model.requests["compactor"]) == 1, "the note is reused until the window fills again"
        assert len(await store.all_messages(USER_ID)) == 504, "the full history stays in the store"

        bot.tg.send_command(USER_ID, "/history")
        doc = await bot.tg.await_for(lambda: next((m for m in bot.tg.messages(USER_ID) if m.kind == "document"), None))
        assert b"turn 0:" in doc.data and b"and now?" in doc.data

        bot.tg.send_command(USER_ID, "/new")
        await bot.tg.await_for(lambda: any("Fresh start" in (m.text or "") for m in bot.tg.messages(USER_ID)))
        model.add("orchestrator", claude_says.text("Hello again."))
        bot.say("hi")
        await bot.tg.await_for(lambda: any(m.text == "Hello again." for m in bot.tg.messages(USER_ID)))
        fresh = model.requests["orchestrator"][-1]["messages"]
        assert len(fresh) == 1 and "proposal #1" in fresh[0]["content"][-1]["text"]
    finally:
        await stop_application(bot.app)


async def test_a_failed_compaction_keeps_the_pending_proposal_shown_whole(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    """A long conversation whose compaction call fails (the API refuses it): the turn goes on with the newest turns,
    and the proposal shown earlier, still pending, stays in the orchestrator's view whole, as it does when the
    compaction works (INTERFACE: proposals the bot showed stay in the orchestrator's view)."""
    from telegram_bot.app import stop_application

    settings = make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root, history_token_budget=4000)
    bot = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        store = bot.runtime.store
        proposal = await store.add_proposal(
            Proposal(chat_id=USER_ID, workspace="calc", request="make add correct", body="## Summary\nFix add.")
        )
        shown = "Proposal #1 for calc\n## Summary\nUSE-PLUS-NOT-MINUS in calc.add (the marker of the body)"
        await store.add_message(ChatMessage(chat_id=USER_ID, role=Role.USER, content="research calc.add"))
        await store.add_message(
            ChatMessage(
                chat_id=USER_ID,
                role=Role.ASSISTANT,
                content=shown,
                kind="proposal",
                ref_id=proposal.id,
                tokens=estimate_tokens(shown),
            )
        )
        for i in range(300):
            role = Role.USER if i % 2 == 0 else Role.ASSISTANT
            text = f"turn {i}: " + "we discussed the calc module and its add function " * 3
            await store.add_message(ChatMessage(chat_id=USER_ID, role=role, content=text, tokens=estimate_tokens(text)))
        model = RoleScript()
        bot.claude.handler = model
        model.add("compactor", claude_says.error(400, "invalid_request_error", "the compaction was refused"))
        model.add("orchestrator", claude_says.text("Proposal #1 is waiting."))
        bot.say("what did proposal 1 say exactly?")
        await bot.replies(1)
        request = model.requests["orchestrator"][0]
        seen = "\n".join(b.get("text", "") for m in request["messages"] for b in m["content"] if isinstance(b, dict))
        assert "USE-PLUS-NOT-MINUS" in seen, "the pending proposal the bot showed fell out of the orchestrator's view"
        first = request["messages"][0]["content"][0]["text"]
        assert first == "[Our earlier conversation is not shown: it could not be summarised]", first
        assert "turn 0:" not in seen and "turn 299:" in seen
    finally:
        await stop_application(bot.app)


async def test_unverified_criteria_are_reported_not_done(bot) -> None:
    model = RoleScript()
    bot.claude.handler = model
    model.add(
        "orchestrator",
        claude_says.tool_use(
            "start_task",
            {
                "workspace": "group-therapy",
                "worker": "code",
                "instructions": "Add a greet() function to app.py",
                "background": True,
                "acceptance_criteria": ["greet() exists in app.py", "greet() is documented in README.md"],
            },
        ),
        claude_says.text("Started."),
    )
    model.add(
        "code",
        claude_says.tool_use("write_file", {"path": "app.py", "content": "def greet():\n    return 'hi'\n"}),
        claude_says.tool_use("verify_criterion", {"index": 1, "evidence": "app.py defines greet"}),
        claude_says.tool_use("verify_criterion", {"index": 7, "evidence": "nonsense"}),
        claude_says.text("Added greet()."),
        claude_says.text("README.md is not mine to change, so greet() stays undocumented."),
    )
    bot.say("add greet to group therapy")
    task, summary = await final_summary(bot, 1)
    first_turn = model.requests["code"][0]["messages"][0]["content"][0]["text"]
    assert "1. greet() exists in app.py" in first_turn and "2. greet() is documented" in first_turn
    bad = model.requests["code"][3]["messages"][-1]["content"][0]
    assert bad["is_error"] and "numbered 1..2" in bad["content"]
    nudge = last_user_text(model.requests["code"][4])  # one turn to verify what is left, and only that
    assert "not verified yet" in nudge and "2. greet() is documented" in nudge and "1. greet()" not in nudge
    assert len(model.requests["code"]) == 5, "one nudge, no more"
    assert task.status is TaskStatus.BLOCKED
    assert "not done: 1 of 2 acceptance criteria unverified" in summary.text
    assert "1/2 verified" in summary.text and "✖ 2." in summary.text


GITHUB_TOKEN_SHAPED = "ghp_" + "Zq9Xw8Ve7Ut6Sr5Qp4On3Ml2Kj1IhGfEdCbA"
OWN_KEY = "Own-Key-Of-No-Shape-7741"


async def test_the_compactors_request_is_masked_as_every_turns_is(
    fake_telegram, fake_anthropic, tmp_path, workspace_root
) -> None:
    """Older turns are summarised by the model in a request of their own: it carried a user's GitHub token and the
    bot's own API key from the stored history unmasked, where the turn's own request masks them."""
    from telegram_bot.app import stop_application

    settings = make_settings(
        fake_telegram, fake_anthropic, tmp_path, workspace_root, history_token_budget=4000, anthropic_api_key=OWN_KEY
    )
    bot = await start_bot(settings, fake_telegram, fake_anthropic)
    try:
        store = bot.runtime.store
        first = f"turn 0: push with {GITHUB_TOKEN_SHAPED} and the key {OWN_KEY} please"
        await store.add_message(
            ChatMessage(chat_id=USER_ID, role=Role.USER, content=first, tokens=estimate_tokens(first))
        )
        for i in range(1, 300):
            text = f"turn {i}: " + "we discussed the calc module and its add function " * 3
            role = Role.USER if i % 2 == 0 else Role.ASSISTANT
            await store.add_message(ChatMessage(chat_id=USER_ID, role=role, content=text, tokens=estimate_tokens(text)))
        model = RoleScript()
        bot.claude.handler = model
        model.add("compactor", claude_says.text("Earlier: we talked about calc."))
        model.add("orchestrator", claude_says.text("We were on calc."))
        bot.say("where were we?")
        await bot.replies(1)
        [compaction] = model.requests["compactor"]
        sent = json.dumps(compaction["messages"])
        assert "turn 0:" in sent, "the first turn was summarised"
        assert GITHUB_TOKEN_SHAPED not in sent and OWN_KEY not in sent, sent[:600]
    finally:
        await stop_application(bot.app)
