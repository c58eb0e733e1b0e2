"""Extended thinking and effort: the parameters settings ask for, worker calls streamed (so max_tokens may pass what
a non-streamed call allows), and thinking blocks kept whole across tool calls and through stubbing, as the API
requires. Through the real SDK against the fake API, which signs the thinking it sends and refuses it changed or
dropped."""

from __future__ import annotations

import anthropic
import pytest

from agents.core.secrets_filter import SecretsFilter
from agents.llm.reasoning import Reasoning
from agents.tools.toolbox import Audit, Tool, Toolbox, prop
from agents.work.task_workers import worker_reasoning
from agents.work.worker import Ending, Limits, Worker
from tests.conftest import BotHarness
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic, signature_of, with_thinking
from tests.scripted import RoleScript
from tests.support.settings import offline_settings


def test_the_thinking_parameters_follow_the_model_and_the_settings(tmp_path) -> None:
    assert Reasoning("adaptive", effort="high").params("claude-sonnet-4-6", 32_000) == {
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
    }
    older = Reasoning("adaptive", budget=8_000).params("claude-sonnet-4-5-20250929", 32_000)
    assert older == {"thinking": {"type": "enabled", "budget_tokens": 8_000}}, "a fixed budget where no adaptive"
    assert Reasoning("enabled", budget=8_000).params("claude-sonnet-4-6", 4_096) == {
        "thinking": {"type": "enabled", "budget_tokens": 3_072}
    }, "the budget stays below max_tokens"
    assert Reasoning("adaptive").params("claude-3-5-haiku-latest", 4_096) == {}, "a model that does not think"
    assert Reasoning("off", effort="").params("claude-sonnet-4-6", 4_096) == {}
    settings = offline_settings(
        tmp_path,
        worker_thinking="enabled",
        worker_thinking_budget=2048,
        worker_effort="medium",
    )
    assert worker_reasoning(settings) == Reasoning("enabled", 2048, "medium")


def reader() -> Toolbox:
    async def read_file(path: str) -> str:
        return f"{path}: " + "code " * 400

    return Toolbox(
        [Tool("read_file", "read", {"path": prop("string", "p")}, read_file, ["path"], read_only=True)],
        Audit(None, agent="test"),
        SecretsFilter(),
    )


async def test_thinking_blocks_go_back_whole_across_tool_calls_and_stubbing(fake_anthropic: FakeAnthropic) -> None:
    script = [
        with_thinking(claude_says.tool_use("read_file", {"path": f"f{i}.py"}), f"I should read f{i}.py next.")
        for i in range(7)
    ]
    fake_anthropic.script(*script, with_thinking(claude_says.text("All read."), "Everything is read."))
    worker = Worker(
        client=fake_anthropic.async_client(),
        model="claude-sonnet-4-6",
        system="sys",
        toolbox=reader(),
        limits=Limits(),
        max_output_tokens=64_000,  # past what the SDK lets a call that is not streamed ask for
        context_window=4_000,  # small: older results are stubbed on the way
        reasoning=Reasoning("adaptive", effort="high"),
    )
    result = await worker.run("read the files")
    assert result.stop is Ending.FINISHED and result.report == "All read.", result
    bodies = [r.body for r in fake_anthropic.requests]
    assert all(b.get("stream") is True and b["max_tokens"] == 64_000 for b in bodies), "streamed, max_tokens > 21k"
    assert all(b["thinking"] == {"type": "adaptive"} and b["output_config"] == {"effort": "high"} for b in bodies)
    last = bodies[-1]["messages"]
    turns = [m for m in last if m["role"] == "assistant"]
    assert len(turns) == 7 and all(m["content"][0]["type"] == "thinking" for m in turns)
    assert turns[3]["content"][0]["signature"] == signature_of("I should read f3.py next.")
    results = [b["content"] for m in last if m["role"] == "user" for b in m["content"] if b["type"] == "tool_result"]
    assert results[0].startswith("[result removed to save context"), "stubbed, and the thinking is still there"


async def test_the_fake_refuses_thinking_dropped_or_changed(fake_anthropic: FakeAnthropic) -> None:
    """The check the round trip above relies on: a conversation that lost its thinking block is refused."""
    fake_anthropic.script(with_thinking(claude_says.tool_use("read_file", {"path": "a.py"}, id="toolu_1"), "Read a."))
    client = fake_anthropic.async_client()
    base = {"model": "claude-sonnet-4-6", "max_tokens": 2000, "thinking": {"type": "adaptive"}}
    first = await client.messages.create(**base, messages=[{"role": "user", "content": "go"}])
    thought, use = (b.model_dump(exclude_none=True) for b in first.content)
    answer = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"}]}
    for sent in ([use], [{**thought, "thinking": "Read b."}, use]):
        with pytest.raises(anthropic.BadRequestError):
            await client.messages.create(
                **base, messages=[{"role": "user", "content": "go"}, {"role": "assistant", "content": sent}, answer]
            )


@pytest.mark.settings(orchestrator_thinking="adaptive", orchestrator_effort="low")
async def test_the_orchestrator_thinks_when_settings_ask(bot: BotHarness, model: RoleScript) -> None:
    model.add("orchestrator", with_thinking(claude_says.text("Hello!"), "A greeting; answer briefly."))
    bot.say("hi")
    await bot.tg.await_for(lambda: any("Hello!" in (m.text or "") for m in bot.tg.messages(bot.user_id)))
    request = model.requests["orchestrator"][0]
    assert request["thinking"] == {"type": "adaptive"} and request["output_config"] == {"effort": "low"}
