"""The shared tool loop and the worker on it, through the scripted model in process (no HTTP)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import anthropic
import pytest

from agents.core.secrets_filter import SecretsFilter
from agents.llm.tool_loop import TRUNCATED, Ending, Limits, ToolLoop
from agents.tools.toolbox import Audit, Tool, Toolbox, prop
from agents.work.worker import Ending, Worker
from tests.scripted import RoleScript, call, calls, say, spare


def toolbox(log: list[str]) -> Toolbox:
    async def read_file(path: str) -> str:
        log.append(path)
        return f"contents of {path}"

    async def slow(seconds: float = 1.0) -> str:
        await asyncio.sleep(seconds)
        return "slept"

    return Toolbox(
        [
            Tool("read_file", "read", {"path": prop("string", "p")}, read_file, ["path"]),
            Tool("slow", "sleep", {"seconds": prop("number", "s")}, slow),
        ],
        Audit(None, agent="test"),
        SecretsFilter(),
    )


def worker(model: RoleScript, log: list[str], **limits: Any) -> Worker:
    return Worker(client=model, model="m", system="sys", toolbox=toolbox(log), limits=Limits(**limits))


async def test_tool_calls_run_and_the_final_text_is_the_report() -> None:
    ran: list[str] = []
    model = RoleScript([call("read_file", {"path": "a.py"}), say("all good")])
    result = await worker(model, ran).run("do it")
    assert result.stop is Ending.FINISHED and result.report == "all good"
    assert ran == ["a.py"]
    second = model.calls[1]["messages"]
    assert second[-1]["content"][0]["type"] == "tool_result"
    assert second[-1]["content"][0]["content"] == "contents of a.py"


async def test_step_limit() -> None:
    ran: list[str] = []
    more = [
        spare(call("read_file", {"path": f"{i}.py"}), why="a model that never stops: the limit ends it") for i in (3, 4)
    ]
    model = RoleScript([*(call("read_file", {"path": f"{i}.py"}) for i in range(3)), *more])
    result = await worker(model, ran, max_steps=3).run("loop forever")
    assert result.stop is Ending.STEP_LIMIT and not result.finished and not result.blocked
    assert len(model.calls) == 3 and ran == ["0.py", "1.py", "2.py"]


async def test_time_limit_stops_a_slow_tool_and_leaves_a_valid_conversation() -> None:
    model = RoleScript([call("slow", {"seconds": 30}, text="waiting"), say("fixed")])
    w = worker(model, [], max_seconds=0.2)
    result = await w.run("go")
    assert result.stop is Ending.TIME_LIMIT and result.report == "waiting"
    # the cut tool call is answered, so a correction turn is a valid request
    assert w.messages[-1]["content"][0]["type"] == "tool_result" and w.messages[-1]["content"][0]["is_error"]
    w.limits = Limits()
    assert (await w.run("try again")).report == "fixed"
    assert model.calls[-1]["messages"][-1]["content"][-1]["text"] == "try again"


async def test_token_limit_counts_every_request() -> None:
    reading = call("read_file", {"path": "a"}, input_tokens=600, output_tokens=0)
    model = RoleScript([reading, reading, *[spare(reading, why="a model that never stops: the limit ends it")] * 2])
    result = await worker(model, [], max_tokens=1000).run("go")
    assert result.stop is Ending.TOKEN_LIMIT
    assert len(model.calls) == 2


async def test_a_tool_call_cut_off_at_max_tokens_is_not_run_nor_the_answer() -> None:
    ran: list[str] = []
    model = RoleScript([call("read_file", {"path": "huge.py"}, stop_reason="max_tokens"), say("done in pieces")])
    result = await worker(model, ran).run("write a big file")
    assert ran == []
    assert result.stop is Ending.FINISHED and result.report == "done in pieces"
    answer = model.calls[1]["messages"][-1]["content"][0]
    assert answer["is_error"] and answer["content"] == TRUNCATED


@pytest.mark.parametrize(
    ("reply", "stop"),
    [
        (say("I can't help with that.", stop_reason="refusal"), Ending.REFUSED),
        (say("", stop_reason="model_context_window_exceeded"), Ending.CONTEXT_FULL),
        (say("Half a report", stop_reason="max_tokens"), Ending.CUT_OFF),
        (say("BLOCKED: which database should I use?"), Ending.BLOCKED),
    ],
)
async def test_endings_that_block_the_task(reply: Any, stop: Ending) -> None:
    result = await worker(RoleScript([reply]), []).run("go")
    assert result.stop is stop and result.blocked and not result.finished


async def test_an_answer_without_a_stop_reason_is_never_the_finished_answer() -> None:
    """An answer that did not end (its stream cut short: no stop reason) is raised as a lost connection: neither the
    finished answer nor a tool call to run, and not kept in the conversation as the model's turn."""
    ran: list[str] = []
    cut_text = say("Delete the whole branch,").model_copy(update={"stop_reason": None})
    cut_call = call("read_file", {"path": "a.py"}).model_copy(update={"stop_reason": None})
    for cut in (cut_text, cut_call):
        loop = ToolLoop(model=RoleScript([cut]), model_name="m", system="s", toolbox=toolbox(ran))
        loop.add_user_turn([{"type": "text", "text": "how do I clean up?"}])
        with pytest.raises(anthropic.APIConnectionError):
            await loop.run(Limits(max_steps=3, max_seconds=math.inf))
        assert [m["role"] for m in loop.messages] == ["user"]
    assert ran == []


async def test_a_question_without_the_mark_is_a_report() -> None:
    result = await worker(RoleScript([say("Done. Should I also update the docs?")]), []).run("go")
    assert result.finished


async def test_moving_cache_breakpoint_is_on_the_newest_block_only() -> None:
    model = RoleScript([call("read_file", {"path": "a"}), say("ok")])
    await worker(model, []).run("go")
    marks = [
        (i, j)
        for i, m in enumerate(model.calls[1]["messages"])
        for j, b in enumerate(m["content"])
        if "cache_control" in b
    ]
    last = len(model.calls[1]["messages"]) - 1
    assert marks == [(last, len(model.calls[1]["messages"][last]["content"]) - 1)]


async def test_last_round_without_tools_for_the_orchestrator() -> None:
    model = RoleScript([call("read_file", {"path": "a"}), call("read_file", {"path": "b"}), say("answer")])
    loop = ToolLoop(model=model, model_name="m", system="s", toolbox=toolbox([]), tools_on_last_step=False)
    loop.add_user_turn([{"type": "text", "text": "q"}])
    result = await loop.run(Limits(max_steps=3, max_seconds=math.inf))
    assert result.ending is Ending.FINISHED and result.text == "answer"
    assert [r["tool_choice"]["type"] for r in model.calls] == ["auto", "auto", "none"]
    assert loop.tools_used == ["read_file", "read_file"]


class Sink:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    async def text(self, delta: str) -> None:
        self.events.append(("text", delta))

    async def activity(self, description: str) -> None:
        self.events.append(("activity", description))


async def test_streamed_turn_sends_text_then_activity_then_more_text() -> None:
    sink = Sink()
    model = RoleScript([calls(("read_file", {"path": "calc.py"}), text="Let me look."), say("It adds two numbers.")])
    loop = ToolLoop(model=model, model_name="m", system="s", toolbox=toolbox([]), answer=sink)
    loop.add_user_turn([{"type": "text", "text": "what does calc.py do?"}])
    result = await loop.run(Limits())
    assert result.text == "It adds two numbers."
    kinds = [k for k, _ in sink.events]
    assert kinds.index("activity") > kinds.index("text")
    assert ("activity", "reading calc.py") in sink.events
    assert "".join(t for k, t in sink.events if k == "text") == "Let me look.It adds two numbers."


async def test_read_only_calls_of_one_turn_run_together_and_their_results_keep_the_order() -> None:
    """Three look-ups wait for each other at a barrier: run one after another they would never pass it. A write
    between look-ups runs alone, after those before it."""
    barrier = asyncio.Barrier(3)
    events: list[str] = []

    async def look(path: str) -> str:
        events.append(f"start {path}")
        async with asyncio.timeout(10):  # a failure, not a hang, when they do not run together
            await barrier.wait()
        events.append(f"end {path}")
        return f"contents of {path}"

    async def write(path: str) -> str:
        events.append(f"write {path}")
        return "written"

    box = Toolbox(
        [
            Tool("look", "read", {"path": prop("string", "p")}, look, ["path"], read_only=True),
            Tool("write", "write", {"path": prop("string", "p")}, write, ["path"]),
        ],
        Audit(None, agent="test"),
        SecretsFilter(),
    )
    turn = calls(("look", {"path": "a"}), ("look", {"path": "b"}), ("look", {"path": "c"}), ("write", {"path": "d"}))
    model = RoleScript([turn, say("done")])
    loop = ToolLoop(model=model, model_name="m", system="sys", toolbox=box)
    loop.add_user_turn([{"type": "text", "text": "go"}])
    assert (await loop.run(Limits())).ending is Ending.FINISHED
    assert events[:3] == ["start a", "start b", "start c"] and events[-1] == "write d"
    results = model.calls[1]["messages"][-1]["content"]
    assert [r["content"] for r in results] == ["contents of a", "contents of b", "contents of c", "written"]
    assert [r["tool_use_id"] for r in results] == [b.id for b in turn.content]


async def test_a_warning_comes_a_few_steps_before_the_limit_and_the_wrap_up_asks_for_the_report() -> None:
    ran: list[str] = []
    model = RoleScript([call("read_file", {"path": f"{i}.py"}) for i in range(4)] + [say("Report: read four files.")])
    w = Worker(client=model, model="m", system="sys", toolbox=toolbox(ran), limits=Limits(max_steps=4), warn_steps=2)
    stopped = await w.run("read everything")
    assert stopped.stop is Ending.STEP_LIMIT
    texts = [b.get("text", "") for b in model.calls[2]["messages"][-1]["content"]]
    assert any("2 steps left before your step limit (4)" in t for t in texts), texts
    assert not any("steps left" in str(c["messages"][-1]) for c in model.calls[:2]), "not earlier"
    reported = await w.wrap_up(stopped)
    assert reported.stop is Ending.STEP_LIMIT and reported.report == "Report: read four files."
    assert model.calls[4]["tool_choice"] == {"type": "none"}
    finished = await Worker(
        client=RoleScript([say("done")]), model="m", system="s", toolbox=toolbox([]), limits=Limits()
    ).run("x")
    assert (await w.wrap_up(finished)) is finished, "only a step-limit stop is wrapped up"


async def test_no_report_is_asked_past_the_budget_or_the_token_limit() -> None:
    """A run ended by its steps gets one more request, for the worker's report; a run whose last step also spent the
    day's budget or passed WORKER_MAX_TOKENS ends on that limit instead (no request past it), and a budget spent
    between the run's end and the report leaves the report unasked."""

    model = RoleScript([call("read_file", {"path": "a.py"})])
    spent = False

    async def spending() -> str | None:
        return "the daily budget is spent" if spent or model.calls else None

    w = Worker(client=model, model="m", system="s", toolbox=toolbox([]), limits=Limits(max_steps=1), spending=spending)
    stopped = await w.run("go")
    assert stopped.stop is Ending.SPENT and (await w.wrap_up(stopped)) is stopped
    assert len(model.calls) == 1, "a request went out after the budget was spent"

    model = RoleScript([call("read_file", {"path": "a.py"}, input_tokens=5_000)])
    w = worker(model, [], max_steps=1, max_tokens=1_000)
    stopped = await w.run("go")
    assert stopped.stop is Ending.TOKEN_LIMIT and (await w.wrap_up(stopped)) is stopped
    assert len(model.calls) == 1, "a request went out after the token limit was passed"

    model = RoleScript([call("read_file", {"path": "a.py"})])

    async def later() -> str | None:
        return "the daily budget is spent" if spent else None

    w = Worker(client=model, model="m", system="s", toolbox=toolbox([]), limits=Limits(max_steps=1), spending=later)
    stopped = await w.run("go")
    assert stopped.stop is Ending.STEP_LIMIT
    spent = True  # another task spent the rest of the day's budget meanwhile
    assert (await w.wrap_up(stopped)).report == stopped.report
    assert len(model.calls) == 1, "the report was asked for past the budget"


async def test_a_long_wait_ahead_keeps_the_cache_for_an_hour() -> None:
    from agents.work.task_corrections import LONG_TEST_SECONDS, cache_ttl_for

    model = RoleScript([say("one"), say("two")])
    w = Worker(client=model, model="m", system="sys", toolbox=toolbox([]), limits=Limits())
    await w.run("first")
    assert model.calls[0]["system"][0]["cache_control"] == {"type": "ephemeral"}
    w.loop.cache_ttl = cache_ttl_for(LONG_TEST_SECONDS + 60)  # the bot's test run took longer than the cache lives
    await w.run("a correction")
    breakpoints = [
        model.calls[1]["system"][0]["cache_control"],
        model.calls[1]["messages"][-1]["content"][-1]["cache_control"],
    ]
    assert breakpoints == [{"type": "ephemeral", "ttl": "1h"}] * 2
    assert cache_ttl_for(30) == "5m"
