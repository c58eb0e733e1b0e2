"""agents/llm/raw_stream.py through the real SDK against the fake Anthropic server: the same final message as the SDK's
own streaming helper, text handed on as it arrives, tool input gathered from its pieces, a mid-stream error raised
as the SDK raises it."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from agents.llm.raw_stream import stream_message
from tests.fakes.anthropic_server import (
    FakeAnthropic,
    fake_anthropic,  # noqa: F401 - pytest fixture
    overloaded,
    text,
    tool_uses,
)

MODEL = "claude-sonnet-4-6"
TOOL = {
    "name": "start_task",
    "description": "Start a task",
    "input_schema": {"type": "object", "properties": {"workspace": {"type": "string"}, "goal": {"type": "string"}}},
}
REPLIES = [
    text("Hello **there**, a few words\n\nand a second paragraph.", usage={"cache_read_input_tokens": 7}),
    tool_uses(
        [("start_task", {"workspace": "calc", "goal": 'Fix add() — it subtracts; "quoted" and ünïcode'}, "toolu_1")],
        text="Starting it.",
    ),
    text("cut", stop_reason="max_tokens"),
]


def params() -> dict[str, Any]:
    return dict(model=MODEL, max_tokens=200, messages=[{"role": "user", "content": "go"}], tools=[TOOL])


@pytest.mark.parametrize("reply", range(len(REPLIES)))
async def test_the_final_message_is_the_sdk_helpers(fake_anthropic: FakeAnthropic, reply: int) -> None:
    fake_anthropic.script(REPLIES[reply], REPLIES[reply])
    pieces: list[str] = []

    async def on_text(piece: str) -> None:
        pieces.append(piece)

    async with fake_anthropic.async_client() as client:
        async with client.messages.stream(**params()) as stream:
            helper_pieces = [event.text async for event in stream if event.type == "text"]
            expected = await stream.get_final_message()
        ours = await stream_message(client.messages, params(), on_text)
    assert isinstance(ours, anthropic.types.Message)
    assert ours.model_dump(exclude={"id"}) == expected.model_dump(exclude={"id"})
    assert pieces == helper_pieces and len(pieces) > 1 or reply == 2  # word by word
    if reply == 1:
        call = ours.content[1]
        assert call.type == "tool_use" and call.input["goal"].endswith("ünïcode")  # gathered from several pieces


async def test_an_error_event_mid_answer_raises_the_sdks_error(fake_anthropic: FakeAnthropic) -> None:
    failing = text("one two three")
    failing["stream_error"] = {"type": "overloaded_error", "message": "Overloaded"}
    fake_anthropic.script(failing)
    pieces: list[str] = []

    async def on_text(piece: str) -> None:
        pieces.append(piece)

    async with fake_anthropic.async_client() as client:
        with pytest.raises(anthropic.APIStatusError) as raised:
            await stream_message(client.messages, params(), on_text)
    assert "overloaded_error" in str(raised.value) and raised.value.body["error"]["type"] == "overloaded_error"
    assert pieces == ["one"]  # what came before the error was handed on


async def test_an_http_error_is_the_sdks_after_its_retries(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(overloaded(), text("after a retry"))

    async def on_text(piece: str) -> None:
        pass

    async with fake_anthropic.async_client(max_retries=1) as client:
        message = await stream_message(client.messages, params(), on_text)
    assert message.content[0].text == "after a retry"
    fake_anthropic.script(overloaded())
    async with fake_anthropic.async_client(max_retries=0) as client:
        with pytest.raises(anthropic.InternalServerError):
            await stream_message(client.messages, params(), on_text)
