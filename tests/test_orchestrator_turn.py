"""The orchestrator's turn as a unit: the scripted model in process (or one with the API's limits on a request's
tokens and bytes), an in-memory store and the eval's recording desk; no PTB, no SDK, no HTTP, milliseconds each.

The end-to-end tests keep one run per behaviour through the real PTB/SDK/fakes (test_bot_e2e: a direct answer is one
API call and is rendered; test_crew_memory_e2e: proposals and summaries in the history); these check the turn's
variations: what the model is sent, what the desk gets, what is stored, how a failure is answered.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from agents.chat.orchestrator import Orchestrator
from agents.chat.turn_context import ATTACHMENT_REQUEST_BYTES, sent_bytes
from agents.core.models import ChatMessage, InputMethod, Proposal, ProposalStatus, Role, Task, WorkerKind
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.core.text import estimate_tokens
from agents.evals.desk import RecordingDesk
from agents.evals.workspaces import make_eval_workspaces
from agents.store.database import Store
from agents.work.crew import Crew
from agents.work.task_queue import TaskQueue
from tests.scripted import RoleScript, call, calls, say
from tests.support.api_limits import SUMMARY, LimitedModel
from tests.support.attachments import compressed_pdf

CHAT = 77


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    store = await Store.open(":memory:")
    try:
        yield store
    finally:
        await store.close()


def settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = dict(
        telegram_bot_token="1:x",
        anthropic_api_key="sk-unit",
        allowed_user_ids=str(CHAT),
        workspace_path=tmp_path / "workspaces",
        database_path=tmp_path / "data" / "unused.db",  # the bot's data folder holds no workspace
    )
    values.update(overrides)
    return Settings(_env_file=None, **values)


def orchestrator(tmp_path: Path, store: Store, model: RoleScript) -> tuple[Orchestrator, RecordingDesk]:
    workspaces = make_eval_workspaces(tmp_path)
    desk = RecordingDesk(store, workspaces)
    return Orchestrator(settings(tmp_path), store, model, workspaces, desk, SecretsFilter()), desk


def texts(request: dict[str, Any]) -> str:
    return json.dumps(request["messages"])


async def test_a_direct_answer_is_one_call_and_both_turns_are_stored(tmp_path: Path, store: Store) -> None:
    model = RoleScript([say("2 + 2 is 4.")])
    bot, desk = orchestrator(tmp_path, store, model)
    reply = await bot.handle(CHAT, "what is 2 + 2?")
    assert reply.ok and reply.text == "2 + 2 is 4." and reply.api_calls == 1 and reply.tools_used == []
    assert len(model.calls) == 1 and desk.calls == []
    history = await store.all_messages(CHAT)
    assert [(m.role, m.content) for m in history][-2:] == [
        (Role.USER, "what is 2 + 2?"),
        (Role.ASSISTANT, "2 + 2 is 4."),
    ]


async def test_the_next_turn_carries_the_last_one(tmp_path: Path, store: Store) -> None:
    model = RoleScript([say("It is calc."), say("Yes, calc.")])
    bot, _ = orchestrator(tmp_path, store, model)
    await bot.handle(CHAT, "which workspace has the adder?")
    await bot.handle(CHAT, "are you sure?")
    second = texts(model.calls[1])
    assert "which workspace has the adder?" in second and "It is calc." in second and "are you sure?" in second


async def test_a_voice_note_is_said_to_be_one(tmp_path: Path, store: Store) -> None:
    model = RoleScript([say("On it.")])
    bot, _ = orchestrator(tmp_path, store, model)
    await bot.handle(CHAT, "fix the adder in calk", InputMethod.VOICE)
    sent = texts(model.calls[0])
    assert "input_method: voice" in sent and "speech transcript" in sent


async def test_a_work_tool_reaches_the_desk_with_the_chat_and_the_model_sees_its_answer(
    tmp_path: Path, store: Store
) -> None:
    start = {"workspace": "Calc", "worker": "code", "instructions": "Fix add().", "background": True}
    model = RoleScript([call("start_task", start), say("Started task #1.")])
    bot, desk = orchestrator(tmp_path, store, model)
    reply = await bot.handle(CHAT, "fix add in calc")
    assert reply.text == "Started task #1." and reply.tools_used == ["start_task"]
    assert [(c.name, c.input["workspace"], c.ok) for c in desk.calls] == [("start_task", "Calc", True)]
    result = model.calls[1]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and not result.get("is_error")


async def test_a_missing_argument_is_the_models_error_not_a_crash(tmp_path: Path, store: Store) -> None:
    model = RoleScript([call("start_task", {"workspace": "calc", "worker": "code"}), say("Sorry.")])
    bot, desk = orchestrator(tmp_path, store, model)
    reply = await bot.handle(CHAT, "do it")
    assert reply.ok and desk.calls == []
    result = model.calls[1]["messages"][-1]["content"][0]
    assert result["is_error"] and "missing argument(s): instructions, background" in json.dumps(result)


async def test_look_ups_read_the_workspace_and_nothing_outside_it(tmp_path: Path, store: Store) -> None:
    """Was test_bot_e2e's test_orchestrator_reads_files_confined_to_the_workspace (the same checks, no bot)."""
    (tmp_path / "outside.txt").write_text("OUTSIDE-SECRET\n")
    reads = [("read_file", {"workspace": "Calc", "path": "calc.py"})]
    reads.append(("read_file", {"workspace": "calc", "path": "../../outside.txt"}))
    model = RoleScript([calls(*reads), say("`add` subtracts: that's the bug.")])
    bot, _ = orchestrator(tmp_path, store, model)
    reply = await bot.handle(CHAT, "why does add fail in calc?")
    assert "subtracts" in reply.text
    good, bad = model.calls[1]["messages"][-1]["content"]
    assert "return a - b" in json.dumps(good) and not good.get("is_error")
    assert bad["is_error"] and "outside the workspace" in json.dumps(bad) and "OUTSIDE-SECRET" not in json.dumps(bad)
    audit = await store.tool_calls(chat_id=CHAT)
    assert [c.tool for c in audit] == ["read_file", "read_file"] and not audit[0].error and audit[1].error


async def test_a_pending_proposal_is_in_the_context(tmp_path: Path, store: Store) -> None:
    await store.add_proposal(
        Proposal(
            chat_id=CHAT, workspace="calc", request="speed it up", body="Cache results.", status=ProposalStatus.PENDING
        )
    )
    model = RoleScript([say("Approve it?")])
    bot, _ = orchestrator(tmp_path, store, model)
    await bot.handle(CHAT, "what is waiting?")
    assert "speed it up" in texts(model.calls[0])


async def test_an_api_outage_is_answered_in_a_sentence_and_the_message_is_kept(tmp_path: Path, store: Store) -> None:
    request = httpx.Request("POST", "https://api.anthropic.com/v1/messages")
    overloaded = anthropic.InternalServerError(
        "overloaded", response=httpx.Response(529, request=request), body={"error": {"type": "overloaded_error"}}
    )

    def fail(_: dict[str, Any]) -> anthropic.types.Message:
        raise overloaded

    bot, _ = orchestrator(tmp_path, store, RoleScript([fail]))
    reply = await bot.handle(CHAT, "please keep this message")
    assert not reply.ok and reply.text and "\n" not in reply.text.strip()
    assert any(m.content == "please keep this message" for m in await store.all_messages(CHAT))


class NoChat:
    """A strict Notifier: a turn that starts tasks in the background says nothing to the chat outside its answer."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected call of the notifier: {name}")


async def test_an_api_error_after_the_turn_started_work_says_what_was_started(tmp_path: Path, store: Store) -> None:
    """The turn starts a task and a research, then its next call fails (overloaded). "Try again in a minute" alone
    would have the user ask again, and start the same work twice: the reply names each one started, once."""
    workspaces = make_eval_workspaces(tmp_path)
    queue = TaskQueue(store, lambda task: pytest.fail(f"task #{task.id} ran"), 1)  # claims nothing: never started
    crew = Crew(settings(tmp_path), store, workspaces, queue, NoChat(), SecretsFilter())
    request = httpx.Request("POST", "https://api.anthropic.com/v1/messages")
    overloaded = anthropic.InternalServerError(
        "overloaded", response=httpx.Response(529, request=request), body={"error": {"type": "overloaded_error"}}
    )

    def fail(_: dict[str, Any]) -> anthropic.types.Message:
        raise overloaded

    work = [
        ("start_task", {"workspace": "calc", "worker": "code", "instructions": "Fix add().", "background": True}),
        ("start_research", {"workspace": "calc", "request": "How could calc be faster?"}),
    ]
    bot = Orchestrator(settings(tmp_path), store, RoleScript([calls(*work), fail]), workspaces, crew, SecretsFilter())
    reply = await bot.handle(CHAT, "fix add in calc and look into its speed", user_id=CHAT)
    assert not reply.ok and [t.id for t in reply.started] == [1, 2]
    assert reply.text.splitlines() == [
        "Claude is overloaded, try again in a minute.",
        "Task #1 was started before this error and goes on; no need to ask for it again.",
        "Research #2 was started before this error and goes on; no need to ask for it again.",
    ]
    assert any(m.content == "fix add in calc and look into its speed" for m in await store.all_messages(CHAT))
    failed = await Orchestrator(
        settings(tmp_path), store, RoleScript([fail]), workspaces, crew, SecretsFilter()
    ).handle(CHAT, "and now?", user_id=CHAT)
    assert failed.text == "Claude is overloaded, try again in a minute.", "only the turn's own tasks are named"


async def test_the_turn_returns_the_tasks_it_started_and_no_other(tmp_path: Path, store: Store) -> None:
    """The reply names the tasks the turn's tools stored (GitHub's inbox ties them to the thread that asked), not a
    task stored before the turn, nor those of another conversation's turn running at the same time."""
    workspaces = make_eval_workspaces(tmp_path)
    queue = TaskQueue(store, lambda task: pytest.fail(f"task #{task.id} ran"), 1)  # claims nothing: never started
    crew = Crew(
        settings(tmp_path, allowed_user_ids=f"{CHAT},{CHAT + 1}"), store, workspaces, queue, NoChat(), SecretsFilter()
    )
    earlier = await store.add_task(
        Task(chat_id=CHAT, workspace="calc", worker=WorkerKind.CODE, title="earlier", instructions="x", user_id=CHAT)
    )

    def starting(*instructions: str) -> Orchestrator:
        start = {"workspace": "calc", "worker": "code", "background": True}
        tools = [("start_task", start | {"instructions": text}) for text in instructions]
        script = RoleScript([calls(*tools), say("Started.")])
        return Orchestrator(settings(tmp_path), store, script, workspaces, crew, SecretsFilter())

    mine, theirs = await asyncio.gather(
        starting("Fix add().", "Document add().").handle(CHAT, "fix add and document it", user_id=CHAT),
        starting("Fix sub().").handle(CHAT + 1, "fix sub", user_id=CHAT + 1),
    )
    assert [(t.title, t.chat_id, t.user_id) for t in mine.started] == [
        ("Fix add().", CHAT, CHAT),
        ("Document add().", CHAT, CHAT),
    ]
    assert [(t.title, t.chat_id) for t in theirs.started] == [("Fix sub().", CHAT + 1)]
    assert earlier.id not in {t.id for t in mine.started}
    assert len(await store.list_tasks(CHAT)) == 3
    thanks = RoleScript([say("You're welcome.")])
    next_turn = Orchestrator(settings(tmp_path), store, thanks, workspaces, crew, SecretsFilter())
    assert (await next_turn.handle(CHAT, "thanks", user_id=CHAT)).started == []  # the next turn starts afresh


# --- a turn near the API's limits: the window (tokens) and the request's size (bytes) ------------------------------

CHINESE = "这是一个关于项目的很长的讨论内容。" * 235  # ~4,000 characters: about 4,000 tokens, 1,000 by the estimate


def limited(tmp_path: Path, store: Store, model: LimitedModel, **overrides: Any) -> Orchestrator:
    workspaces = make_eval_workspaces(tmp_path)
    desk = RecordingDesk(store, workspaces)
    return Orchestrator(settings(tmp_path, **overrides), store, model, workspaces, desk, SecretsFilter())


async def chat_in_chinese(store: Store, turns: int) -> None:
    for i in range(turns):
        for role in (Role.USER, Role.ASSISTANT):
            text = f"{i}: {CHINESE}"
            await store.add_message(ChatMessage(chat_id=CHAT, role=role, content=text, tokens=estimate_tokens(text)))


def documents(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for m in request["messages"] for b in m["content"] if b.get("type") == "document"]


async def test_a_history_too_long_for_the_window_is_halved_and_the_next_turns_fit(tmp_path: Path, store: Store) -> None:
    """A long conversation in Chinese: within HISTORY_TOKEN_BUDGET by the estimate (characters / 4), about four times
    that for the API. "Prompt is too long": the turn goes again with half the history (the older half summarised),
    and the summary keeps the next turns inside the window."""
    model = LimitedModel([say("好的，继续。"), say("你好！"), say("你好！")])
    bot = limited(tmp_path, store, model, history_token_budget=60_000)
    await chat_in_chinese(store, 28)  # 56,000 tokens by the estimate, about 224,000 really
    first = await bot.handle(CHAT, "继续")
    assert first.ok and first.text == "好的，继续。"
    assert model.refused and set(model.refused) == {"too long"}
    note = await store.latest_note(CHAT)
    assert note is not None and note.summary == SUMMARY, "the older half is summarised, for the next turns too"
    refusals = len(model.refused)
    for _ in range(2):
        assert (await bot.handle(CHAT, "你好？")).ok
    assert len(model.refused) == refusals, "the next turns fit at once"


async def test_a_history_the_window_never_holds_is_put_behind_a_note_and_the_next_turn_fits(
    tmp_path: Path, store: Store
) -> None:
    """HISTORY_TOKEN_BUDGET set past what the window holds for this script: even half the history is too long. The
    turn says so truly (no tool output was dropped), the conversation so far goes behind a summary, and the next
    message is answered."""
    model = LimitedModel([say("你好！")])
    bot = limited(tmp_path, store, model, history_token_budget=200_000)
    await chat_in_chinese(store, 50)  # 100,000 tokens by the estimate, about 400,000 really
    first = await bot.handle(CHAT, "继续")
    assert not first.ok and "context window" in first.text and "summarised our conversation" in first.text
    assert "tool output" not in first.text and "/new" in first.text
    later = await bot.handle(CHAT, "你好？")
    assert later.ok and later.text == "你好！"
    assert SUMMARY in texts(model.answered[-1]) and CHINESE not in texts(model.answered[-1])


async def test_a_pdf_too_big_for_the_window_is_left_out_and_the_words_answered(tmp_path: Path, store: Store) -> None:
    """A 95-page paper is about 220,000 tokens: too long with anything. The turn answers the words without it, says
    so, and the paper is left out of the later turns (marked refused in the store)."""
    data = compressed_pdf(95)
    model = LimitedModel([say("I can't read it whole."), say("4.")], pdf_pages={base64.b64encode(data).decode(): 95})
    bot = limited(tmp_path, store, model)
    paper = await bot.context.attachments.accept(CHAT, data, "paper.pdf")
    first = await bot.handle(CHAT, "summarise this paper", attachments=[paper])
    assert first.ok and "**paper.pdf** did not fit" in first.text and first.text.endswith("I can't read it whole.")
    assert model.refused and documents(model.answered[-1]) == []
    later = await bot.handle(CHAT, "never mind; what is 2 + 2?")
    assert later.ok and later.text == "4." and documents(model.answered[-1]) == []
    [stored] = [a for m in await store.messages_after(CHAT, 0) for a in m.attachments]
    assert stored.refused


async def test_scanned_pages_in_the_history_stay_within_the_request_size_limit(tmp_path: Path, store: Store) -> None:
    """Ten one-page scans of 3 MB each, sent over a conversation: little by tokens, 40 MB of base64 together. Each
    request carries the newest within ATTACHMENT_REQUEST_BYTES, the older ones by their labels."""
    model = LimitedModel([*(say(f"Page {page} noted.") for page in range(10)), say("4.")])
    bot = limited(tmp_path, store, model)
    scans = []
    for page in range(10):
        scans.append(await bot.context.attachments.accept(CHAT, compressed_pdf(1, 3_000_000), f"scan{page}.pdf"))
        assert (await bot.handle(CHAT, f"page {page} of the contract", attachments=[scans[-1]])).ok
    later = await bot.handle(CHAT, "thanks; what is 2 + 2?")
    assert later.ok and model.refused == []
    assert max(len(json.dumps(c).encode()) for c in model.calls) < ATTACHMENT_REQUEST_BYTES + 1_000_000
    last = model.calls[-1]
    assert len(documents(last)) == ATTACHMENT_REQUEST_BYTES // sent_bytes(scans[-1])
    assert "scan0.pdf (pdf) is not shown again here" in texts(last)


async def test_a_request_too_large_goes_again_without_the_historys_files(tmp_path: Path, store: Store) -> None:
    """A 413 (the request past the API's byte limit) is not temporary: the turn goes again at once without the
    history's files (by their labels), and is answered."""
    model = LimitedModel([say("First page noted."), say("Second page noted.")], request_max_bytes=3_000_000)
    bot = limited(tmp_path, store, model)
    for page in range(2):
        scan = await bot.context.attachments.accept(CHAT, compressed_pdf(1, 1_200_000), f"scan{page}.pdf")
        reply = await bot.handle(CHAT, f"page {page}", attachments=[scan])
        assert reply.ok
    assert model.refused == ["413"] and reply.text == "Second page noted."
    answered = model.answered[-1]
    assert len(documents(answered)) == 1 and "scan0.pdf (pdf) is not shown again here" in texts(answered)


async def test_a_turn_reading_many_big_files_stubs_its_oldest_results(tmp_path: Path, store: Store) -> None:
    """ "Compare these twelve modules": two rounds of six big reads pass the window within the turn. The turn's loop
    stubs the oldest results near it, as a worker's does, and answers."""
    reads = [("read_file", {"workspace": "calc", "path": f"big{i}.py"}) for i in range(12)]
    model = LimitedModel([calls(*reads[:6]), calls(*reads[6:]), say("They all define the same helpers.")])
    bot = limited(tmp_path, store, model)
    for i in range(12):
        lines = (f"def helper_{i}_{n}(x):  return x * {n}  # {'z' * 12}\n" for n in range(1900))
        (tmp_path / "workspaces" / "calc" / f"big{i}.py").write_text("".join(lines))
    reply = await bot.handle(CHAT, "compare big0.py … big11.py in calc")
    assert reply.ok and reply.text == "They all define the same helpers." and model.refused == []
    assert "[result removed to save context: read_file big0.py" in texts(model.calls[-1])
