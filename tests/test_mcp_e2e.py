"""The owner's MCP servers, played through the real bot: a stdio server the tests ship
(tests/mcp_servers/demo_server.py, the `mcp` SDK's server side) configured in MCP_CONFIG is started inside the task's
sandbox and called by a code worker; its text and picture go back to the model and the picture to the chat; a tool
under `approve` is denied, then allowed once, with the whole call shown; a server that crashes mid-task is one
sentence to the model and the task still finishes; nothing of it outlives the task."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from agents.core.models import TaskStatus
from tests.conftest import USER_ID, BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.support.processes import host_pids
from tests.support.questions import DEMO, answer_id, mcp_bot, mcp_call, mcp_question, mcp_task, utf16_slice  # noqa: F401  (mcp_bot: a fixture)
from tests.support.tasks import ended, tool_results

# untested_calc: these tests look at neither the verdict nor the task's end, so calc has no tests (tests/conftest.py)
pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None or shutil.which("nsenter") is None or not sys.platform.startswith("linux"),
        reason="bubblewrap (bwrap) or nsenter is not installed: scripts/install-system-deps.sh",
    ),
    pytest.mark.untested_calc,
]


@pytest.mark.mcp_entry(roles=["code"])
async def test_a_code_worker_calls_the_owners_stdio_server_in_its_sandbox(mcp_bot: BotHarness) -> None:
    bot = mcp_bot
    model = mcp_task(
        bot,
        mcp_call("add", a=2, b=5),
        mcp_call("note"),
        mcp_call("picture"),
        mcp_call("fail"),
        claude_says.text("Done."),
    )
    task = await ended(bot, 1, timeout=90)
    assert task.status is not TaskStatus.FAILED, task.error
    tools = {t["name"]: t for t in model.requests["code"][0]["tools"]}
    assert tools["mcp__demo__add"]["input_schema"]["properties"].keys() == {"a", "b"}
    assert tools["mcp__demo__add"]["input_schema"]["required"] == ["a", "b"]
    assert "mcp__demo__delete_everything" in tools and "read_file" in tools
    assert not any(name.startswith("mcp__") for t in model.requests["orchestrator"] for name in map(_name, t["tools"]))
    results = tool_results(model)
    assert any("the sum is 7" in r for r in results), results
    note = next(r for r in results if "note:" in r)
    assert "NOTE-FROM-A-READ-PATH-51" in note and "home: /home/agent" in note, note  # ran in the task's sandbox
    picture = next(r for r in results if '"image"' in r)
    assert '"media_type": "image/png"' in picture
    failed = [
        b
        for body in model.requests["code"]
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result" and b.get("is_error")
    ]
    assert any("Error executing tool fail" in json.dumps(b) for b in failed), failed
    photos = [m for m in bot.tg.messages(USER_ID) if m.kind == "photo"]
    assert photos and "mcp__demo__picture" in (photos[0].caption or "") and photos[0].data.startswith(b"\x89PNG")
    await bot.tg.await_for(lambda: not host_pids(str(DEMO)), timeout=10)


def _name(tool: dict) -> str:
    return tool["name"]


@pytest.mark.mcp_entry(approve=["delete_everything"])
async def test_an_approve_tool_is_denied_then_allowed_once_then_for_the_task(mcp_bot: BotHarness) -> None:
    bot = mcp_bot
    where = "/srv/data\n```\n<b>Safe to allow</b> </code>"
    model = mcp_task(
        bot,
        mcp_call("delete_everything", where=where),
        mcp_call("delete_everything", where=where),
        mcp_call("add", a=1, b=1),  # not under approve: runs without a question
        mcp_call("delete_everything", where="/a"),
        mcp_call("delete_everything", where="/b"),  # allowed for the task: not asked again
        claude_says.text("Done."),
    )
    first = await mcp_question(bot)
    shown = first.history[0]
    code = [e for e in shown.entities if e["type"] == "pre"]
    assert len(code) == 1, shown.entities  # the call, whole, in one block nothing in it closed
    whole = utf16_slice(shown.text, code[0]["offset"], code[0]["length"])
    assert "mcp__demo__delete_everything" in whole and json.dumps(where)[1:-1] in whole, whole
    assert "Safe to allow" not in shown.text.replace(whole, "")
    bot.tg.press_button(USER_ID, first.message_id, f"net:deny:{answer_id(first)}")
    second = await mcp_question(bot, after=first.message_id)
    bot.tg.press_button(USER_ID, second.message_id, f"net:once:{answer_id(second)}")
    third = await mcp_question(bot, after=second.message_id)
    assert '"where": "/a"' in third.text
    bot.tg.press_button(USER_ID, third.message_id, f"net:task:{answer_id(third)}")
    task = await ended(bot, 1, timeout=90)
    assert task.status is not TaskStatus.FAILED, task.error
    results = tool_results(model)
    assert "owner denied this call" in results[0] and "deleted everything" not in results[0], results
    assert "deleted everything in /srv/data" in results[1], results
    assert "the sum is 2" in results[2]
    assert "deleted everything in /a" in results[3] and "deleted everything in /b" in results[4], results
    assert "denied by the owner" in (first.text or "") and "allowed once by the owner" in (second.text or "")
    questions = [m for m in bot.tg.messages(USER_ID) if "asks to call" in (m.history[0].text or "")]
    assert len(questions) == 3, "a tool not under approve, or one allowed for the task, asked again"
    events = [e.detail for e in await bot.runtime.store.task_events(task.id) if e.kind == "network"]
    assert any("allowed for this task earlier" in e for e in events), events


@pytest.mark.mcp_entry(approve=["delete_everything"])
async def test_a_call_json_cannot_carry_is_refused_before_any_question(mcp_bot: BotHarness) -> None:
    """The model's `1e400` reaches the bot as infinity: shown, it reads `Infinity`; sent, the MCP library writes
    `null` in its place, another call than the one the owner would allow. It is refused at once: no question, no
    call; the same call with plain values is asked about as usual."""
    bot = mcp_bot
    model = mcp_task(
        bot,
        mcp_call("delete_everything", where="/srv/data", keep_days=float("inf")),
        mcp_call("delete_everything", where="/srv/data", keep_days=float("nan")),
        mcp_call("delete_everything", where="/srv/data"),
        claude_says.text("Done."),
    )
    question = await mcp_question(bot)
    assert "keep_days" not in question.text, "a refused call was asked about"
    bot.tg.press_button(USER_ID, question.message_id, f"net:deny:{answer_id(question)}")
    await ended(bot, 1, timeout=90)
    results = tool_results(model)  # each text once: the two refusals read the same
    assert "JSON cannot carry" in results[0] and "owner denied" in results[1], results
    assert not any("deleted everything" in r for r in results), "the server ran a call"
    asked = [m for m in bot.tg.messages(USER_ID) if "asks to call" in (m.history[0].text or "")]
    assert len(asked) == 1, "a call refused for its values was asked about"


async def test_a_server_that_crashes_mid_task_is_one_sentence_and_the_task_finishes(mcp_bot: BotHarness) -> None:
    bot = mcp_bot
    model = mcp_task(bot, mcp_call("crash"), mcp_call("add", a=3, b=4), claude_says.text("Done despite the crash."))
    task = await ended(bot, 1, timeout=90)
    assert task.status is not TaskStatus.FAILED, task.error
    results = tool_results(model)
    crashed = next(r for r in results if "crash" in r)
    assert "stopped during crash" in crashed and "exited with code 3" in crashed, crashed
    assert crashed.count(". ") <= 1, "one sentence"
    assert any("the sum is 7" in r for r in results), "the server is started again at the next call"
    summary = await bot.tg.await_for(
        lambda: next((m for m in bot.tg.messages(USER_ID) if "Done despite the crash" in (m.text or "")), None)
    )
    assert summary is not None
    await bot.tg.await_for(lambda: not host_pids(str(DEMO)), timeout=10)


@pytest.mark.mcp_entry(command="/nonexistent/mcp-server", args=[])
async def test_a_server_that_does_not_start_is_one_stand_in_tool(mcp_bot: BotHarness) -> None:
    bot = mcp_bot
    model = mcp_task(bot, mcp_call("unavailable"), claude_says.text("Done without it."))
    task = await ended(bot, 1, timeout=90)
    assert task.status is not TaskStatus.FAILED, task.error
    tools = [t["name"] for t in model.requests["code"][0]["tools"]]
    assert [t for t in tools if t.startswith("mcp__")] == ["mcp__demo__unavailable"]
    results = tool_results(model)
    assert "could not start" in results[0], results


@pytest.mark.parametrize(
    "typo",
    [
        pytest.param(False, marks=pytest.mark.mcp_entry(approve=["mcp__demo__delete_everything"]), id="as-shown"),
        pytest.param(False, marks=pytest.mark.mcp_entry(approve=["Delete_Everything"]), id="in-another-case"),
        pytest.param(True, marks=pytest.mark.mcp_entry(approve=["delete_everythin"]), id="a-typo-gates-every-tool"),
    ],
)
async def test_an_approve_entry_gates_its_tool_however_the_owner_wrote_it(mcp_bot: BotHarness, typo: bool) -> None:
    """Every question names a tool as the chat shows it (`mcp__demo__delete_everything`), so an owner writes that
    under `approve`, or the server's name in another case, or mistypes it: the call still waits for an Allow. An
    entry naming no tool of the server gates every tool of it (here `add` too), rather than none."""
    bot = mcp_bot
    model = mcp_task(
        bot,
        mcp_call("add", a=1, b=1),
        mcp_call("delete_everything", where="/srv/prod"),
        claude_says.text("Done."),
    )
    first = await mcp_question(bot)
    if typo:
        assert "mcp__demo__add" in first.text, "a typo in approve gates every tool of the server"
        bot.tg.press_button(USER_ID, first.message_id, f"net:once:{answer_id(first)}")
        first = await mcp_question(bot, after=first.message_id)
    assert "mcp__demo__delete_everything" in first.text
    bot.tg.press_button(USER_ID, first.message_id, f"net:deny:{answer_id(first)}")
    await ended(bot, 1, timeout=90)
    results = tool_results(model)
    assert "the sum is 2" in results[0]
    assert "owner denied this call" in results[1] and "deleted everything" not in results[1], results
