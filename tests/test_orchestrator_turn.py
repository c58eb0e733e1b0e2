"""The orchestrator's turn as a unit: the scripted model in process, an in-memory store and the eval's
recording desk; no PTB, no SDK, no HTTP, milliseconds each.

The end-to-end tests keep one run per behaviour through the real PTB/SDK/fakes (test_bot_e2e: a direct answer is one
API call and is rendered; test_crew_memory_e2e: proposals and summaries in the history); these check the turn's
variations: what the model is sent, what the desk gets, what is stored, how a failure is answered.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from agents.chat.orchestrator import Orchestrator
from agents.core.models import InputMethod, Proposal, ProposalStatus, Role, Task, WorkerKind
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.evals.desk import RecordingDesk
from agents.evals.workspaces import make_eval_workspaces
from agents.store.database import Store
from agents.work.crew import Crew
from agents.work.task_queue import TaskQueue
from tests.scripted import RoleScript, call, calls, say

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
        database_path=tmp_path / "unused.db",
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
