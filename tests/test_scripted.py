"""The scripted model is strict: a call nobody scripted fails the test and says which call it was, in process and
behind the fake Anthropic server (through the real SDK)."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from agents.llm import prompts
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.scripted import RoleScript, UnscriptedCall, say


def request(system: str, text: str) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 100, "system": system, "messages": [{"role": "user", "content": text}]}


def first_text(message: anthropic.types.Message) -> str:
    block = message.content[0]
    assert isinstance(block, anthropic.types.TextBlock), block
    return block.text


async def test_an_unscripted_call_in_process_fails_and_names_the_call() -> None:
    model = RoleScript([say("first answer")])
    model.add("code", say("the code worker's answer"))
    assert first_text(await model.create(**request(prompts.ORCHESTRATOR, "hello"))) == "first answer"
    with pytest.raises(UnscriptedCall) as caught:
        await model.create(**request(prompts.ORCHESTRATOR, "and again?"))
    said = str(caught.value)
    assert "orchestrator call #2" in said and "'and again?'" in said and "{'code': 1}" in said, said
    assert model.unexpected == [said]


async def test_a_role_takes_its_own_replies_first_then_the_shared_list() -> None:
    model = RoleScript([say("shared")]).add("code", claude_says.text("own"))
    code = request(prompts.CODE, "go")
    assert [first_text(await model.create(**code)) for _ in range(2)] == ["own", "shared"]
    assert len(model.requests["code"]) == 2 and len(model.calls) == 2


async def test_an_unscripted_call_through_the_fake_server_is_a_500_and_fails_the_test(
    fake_anthropic: FakeAnthropic,
) -> None:
    model = RoleScript().add("orchestrator", say("scripted"))  # an SDK message served by the fake as its JSON
    fake_anthropic.handler = model
    client = fake_anthropic.async_client()
    first = await client.messages.create(**request(prompts.ORCHESTRATOR, "hi"))
    assert first_text(first) == "scripted"
    with pytest.raises(anthropic.InternalServerError):
        await client.messages.create(**request(prompts.RESEARCH, "look around"))
    assert model.unexpected and "research call #1" in model.unexpected[0] and "'look around'" in model.unexpected[0]
    assert [type(e) for e in fake_anthropic.handler_errors] == [UnscriptedCall], "the fixture fails the test on it"
    fake_anthropic.handler_errors.clear()  # expected here: the fixture would fail this test
