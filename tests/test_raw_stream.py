"""agents/llm/raw_stream.py through the real SDK against the fake Anthropic server: the same final message as the SDK's
own streaming helper, text handed on as it arrives, tool input gathered from its pieces, a mid-stream error raised
as the SDK raises it, an answer that breaks off (cut before its end, or garbled) raised as a lost connection."""

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
    # JSON leaves these unescaped inside a string; only LF ends a line of the stream
    tool_uses(
        [("start_task", {"workspace": "calc", "goal": "one\u2028two\u2029three\u0085four\x0bfive"}, "toolu_2")],
        text="Lines\u2028apart, a few words.",
    ),
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
        ours = await stream_message(client, params(), on_text)
    assert isinstance(ours, anthropic.types.Message)
    assert ours.model_dump(exclude={"id"}) == expected.model_dump(exclude={"id"})
    assert pieces == helper_pieces and len(pieces) > 1 or reply == 2  # word by word
    if reply == 3:
        assert ours.content[1].input["goal"] == "one\u2028two\u2029three\u0085four\x0bfive"
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
            await stream_message(client, params(), on_text)
    assert "overloaded_error" in str(raised.value) and raised.value.body["error"]["type"] == "overloaded_error"
    assert pieces == ["one"]  # what came before the error was handed on


@pytest.mark.parametrize(
    ("break_off", "why"),
    [
        ("cut_after", "ended before its message_stop"),  # a proxy closing the connection cleanly mid-answer
        ("garbled_after", "unreadable content_block_delta event"),  # an event whose JSON is cut in the middle
    ],
)
async def test_an_answer_that_breaks_off_raises_a_lost_connection(
    fake_anthropic: FakeAnthropic, break_off: str, why: str
) -> None:
    """Half an answer is never returned as the whole: the stream that ends before `message_stop`, or one event that
    cannot be read, is raised as the SDK's lost connection (what the callers answer and keep the message for)."""
    fake_anthropic.script({**text("Delete the whole branch, then do not run anything else."), break_off: 4})
    pieces: list[str] = []

    async def on_text(piece: str) -> None:
        pieces.append(piece)

    async with fake_anthropic.async_client() as client:
        with pytest.raises(anthropic.APIConnectionError) as raised:
            await stream_message(client, params(), on_text)
    assert why in str(raised.value)
    assert "".join(pieces) == "Delete the whole branch,"  # what came before the break was handed on


async def test_an_http_error_is_the_sdks_after_its_retries(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(overloaded(), text("after a retry"))

    async def on_text(piece: str) -> None:
        pass

    async with fake_anthropic.async_client(max_retries=1) as client:
        message = await stream_message(client, params(), on_text)
    assert message.content[0].text == "after a retry"
    fake_anthropic.script(overloaded())
    async with fake_anthropic.async_client(max_retries=0) as client:
        with pytest.raises(anthropic.InternalServerError):
            await stream_message(client, params(), on_text)


async def test_the_body_sent_is_the_one_the_sdks_create_sends(fake_anthropic: FakeAnthropic) -> None:
    """The body is serialized here (not by the SDK's generic walk): the same JSON arrives as through `create`, a
    block kept as an SDK model is dumped as the SDK dumps it, `timeout` is the request's option, not a body field,
    and a retry sends the same bytes again."""
    tool_call = anthropic.types.ToolUseBlock(id="toolu_9", name="start_task", input={"goal": "ünï"}, type="tool_use")
    sent = dict(
        model=MODEL,
        max_tokens=200,
        system=[{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": [tool_call]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "started"}]},
        ],
        tools=[TOOL],
    )
    fake_anthropic.script(text("one"), overloaded(), text("two"))

    async def on_text(piece: str) -> None:
        pass

    async with fake_anthropic.async_client(max_retries=1) as client:
        async with client.messages.stream(**sent) as stream:
            await stream.get_final_message()
        await stream_message(client, {**sent, "timeout": 7.0}, on_text)
    by_sdk, ours, retried = (request.body for request in fake_anthropic.requests)
    assert ours == retried == by_sdk and ours["stream"] is True
    assert ours["messages"][1]["content"][0] == {
        "id": "toolu_9",
        "name": "start_task",
        "input": {"goal": "ünï"},
        "type": "tool_use",
    }
    assert "timeout" not in ours


async def test_the_timeout_given_is_the_requests(fake_anthropic: FakeAnthropic) -> None:
    late = text("late")
    late["delay"] = 3.0
    fake_anthropic.script(late)

    async def on_text(piece: str) -> None:
        pass

    async with fake_anthropic.async_client(max_retries=0) as client:
        with pytest.raises(anthropic.APITimeoutError):
            await stream_message(client, {**params(), "timeout": 0.3}, on_text)
