"""The fake Anthropic server, exercised through the real AsyncAnthropic SDK client."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import anthropic
import pytest

from tests.fakes.anthropic_server import (
    FakeAnthropic,
    error,
    fake_anthropic,  # noqa: F401 - pytest fixture
    overloaded,
    text,
    tool_use,
    tool_uses,
)
from tests.fakes.unserved import spare

MODEL = "claude-sonnet-4-6"
LONG_SYSTEM = "You are a meticulous assistant. " * 200  # ~6400 chars, well over 1024 estimated tokens
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


async def test_text_reply_is_parsed(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(text("Hello there"))
    async with fake_anthropic.async_client() as client:
        message = await client.messages.create(model=MODEL, max_tokens=100, messages=[user("Hi")])
    assert isinstance(message, anthropic.types.Message)
    assert message.content[0].type == "text" and message.content[0].text == "Hello there"
    assert message.stop_reason == "end_turn"
    assert message.model == MODEL
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert message.usage.cache_read_input_tokens == 0
    assert fake_anthropic.calls == 1
    recorded = fake_anthropic.requests[0]
    assert recorded.body["messages"] == [user("Hi")]
    assert "sk-ant-fake" in (
        recorded.headers.get("x-api-key"),
        recorded.headers.get("authorization", "").removeprefix("Bearer "),
    )
    assert recorded.status == 200


async def test_default_handler_and_callable_replies(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(lambda body: text(f"echo {body['messages'][-1]['content']}"))
    async with fake_anthropic.async_client() as client:
        first = await client.messages.create(model=MODEL, max_tokens=50, messages=[user("one")])
        with pytest.raises(anthropic.InternalServerError):  # queue empty, no handler: unexpected
            await client.messages.create(model=MODEL, max_tokens=50, messages=[user("two")])
        fake_anthropic.handler = lambda body: "from handler"
        third = await client.messages.create(model=MODEL, max_tokens=50, messages=[user("three")])
    assert first.content[0].text == "echo one"
    assert "unscripted request" in str(fake_anthropic.handler_errors.pop()), "the fixture fails a test on it"
    assert third.content[0].text == "from handler"
    assert fake_anthropic.pending == 0


async def test_tool_use_round_trip(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(
        tool_use("get_weather", {"city": "Oslo"}, text="Let me check."),
        lambda body: text(f"It is {body['messages'][-1]['content'][0]['content']}"),
    )
    async with fake_anthropic.async_client() as client:
        messages: list[dict[str, Any]] = [user("Weather in Oslo?")]
        first = await client.messages.create(model=MODEL, max_tokens=200, tools=[WEATHER_TOOL], messages=messages)
        assert first.stop_reason == "tool_use"
        assert [b.type for b in first.content] == ["text", "tool_use"]
        call = first.content[1]
        assert call.name == "get_weather" and call.input == {"city": "Oslo"} and call.id
        messages.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
        messages.append(user([{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}]))
        second = await client.messages.create(model=MODEL, max_tokens=200, tools=[WEATHER_TOOL], messages=messages)
    assert second.content[0].text == "It is sunny"
    assert fake_anthropic.requests[1].body["messages"][1]["content"][1]["id"] == call.id


async def test_several_tool_uses_get_distinct_ids(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(tool_uses([("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Rome"})]))
    async with fake_anthropic.async_client() as client:
        message = await client.messages.create(
            model=MODEL, max_tokens=200, tools=[WEATHER_TOOL], messages=[user("Both?")]
        )
    ids = [b.id for b in message.content if b.type == "tool_use"]
    assert len(ids) == 2 and len(set(ids)) == 2
    assert [b.input["city"] for b in message.content] == ["Oslo", "Rome"]


async def test_overloaded_then_success_is_retried(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(overloaded(), error(529, "overloaded_error", "Overloaded"), text("finally"))
    async with fake_anthropic.async_client(max_retries=2) as client:
        started = time.monotonic()
        message = await client.messages.create(model=MODEL, max_tokens=10, messages=[user("Hi")])
        elapsed = time.monotonic() - started
    assert message.content[0].text == "finally"
    assert fake_anthropic.calls == 3
    assert [r.status for r in fake_anthropic.requests] == [529, 529, 200]
    assert fake_anthropic.requests[2].headers.get("x-stainless-retry-count") == "2"
    assert elapsed < 1.0  # retry-after honoured, no 0.5 s+ backoff


async def test_overloaded_beyond_retries_raises(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(*[overloaded() for _ in range(3)], spare(text("too late"), why="past the retries: unserved"))
    async with fake_anthropic.async_client(max_retries=2) as client:
        with pytest.raises(anthropic.OverloadedError) as caught:
            await client.messages.create(model=MODEL, max_tokens=10, messages=[user("Hi")])
    assert caught.value.status_code == 529
    assert isinstance(caught.value, anthropic.InternalServerError)
    assert caught.value.type == "overloaded_error"
    assert caught.value.request_id and caught.value.request_id.startswith("req_fake_")
    assert fake_anthropic.calls == 3 and fake_anthropic.pending == 1


async def test_rate_limit_and_server_errors_map_to_sdk_classes(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(
        error(429, "rate_limit_error", "slow down"),
        error(500, "api_error", "boom"),
    )
    async with fake_anthropic.async_client(max_retries=0) as client:
        with pytest.raises(anthropic.RateLimitError) as rate_limited:
            await client.messages.create(model=MODEL, max_tokens=10, messages=[user("Hi")])
        with pytest.raises(anthropic.InternalServerError) as internal:
            await client.messages.create(model=MODEL, max_tokens=10, messages=[user("Hi")])
    assert rate_limited.value.status_code == 429 and rate_limited.value.api_message == "slow down"
    assert internal.value.status_code == 500 and not isinstance(internal.value, anthropic.OverloadedError)


async def test_prompt_cache_simulation(fake_anthropic: FakeAnthropic) -> None:
    system = [{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}]
    fake_anthropic.handler = lambda _body: text("ok")  # any answer: these tests read its usage
    async with fake_anthropic.async_client() as client:
        first = await client.messages.create(model=MODEL, max_tokens=10, system=system, messages=[user("Q1")])
        second = await client.messages.create(model=MODEL, max_tokens=10, system=system, messages=[user("Q2 differs")])
        other_model = await client.messages.create(
            model="claude-haiku-4-5", max_tokens=10, system=system, messages=[user("Q1")]
        )
        count = await client.messages.count_tokens(model=MODEL, system=system, messages=[user("Q2 differs")])
    assert first.usage.cache_creation_input_tokens >= 1024
    assert first.usage.cache_read_input_tokens == 0
    assert first.usage.cache_creation.ephemeral_5m_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.cache_creation_input_tokens == 0
    assert second.usage.input_tokens > 0  # the uncached user turn
    assert other_model.usage.cache_read_input_tokens == 0  # caches are per model
    total_second = (
        second.usage.input_tokens + second.usage.cache_read_input_tokens + second.usage.cache_creation_input_tokens
    )
    assert count.input_tokens == total_second


async def test_cache_breakpoint_moving_forward_reads_earlier_prefix(fake_anthropic: FakeAnthropic) -> None:
    """The usual incremental pattern: the breakpoint moves to the newest turn each call."""
    history = [
        user([{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}]),
    ]
    fake_anthropic.handler = lambda _body: text("ok")  # any answer: these tests read its usage
    async with fake_anthropic.async_client() as client:
        first = await client.messages.create(model=MODEL, max_tokens=10, messages=history)
        history = [
            user([{"type": "text", "text": LONG_SYSTEM}]),
            {"role": "assistant", "content": "Noted."},
            user([{"type": "text", "text": "And now? " * 50, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]),
        ]
        second = await client.messages.create(model=MODEL, max_tokens=10, messages=history)
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens > 0
    assert second.usage.cache_creation_input_tokens > 0  # the new tail is written
    assert second.usage.cache_creation.ephemeral_1h_input_tokens == second.usage.cache_creation_input_tokens
    assert second.usage.input_tokens == 0


async def test_small_prefixes_are_not_cached(fake_anthropic: FakeAnthropic) -> None:
    system = [{"type": "text", "text": "Short system prompt.", "cache_control": {"type": "ephemeral"}}]
    fake_anthropic.handler = lambda _body: text("ok")  # any answer: these tests read its usage
    async with fake_anthropic.async_client() as client:
        for _ in range(2):
            message = await client.messages.create(model=MODEL, max_tokens=10, system=system, messages=[user("Hi")])
            assert message.usage.cache_creation_input_tokens == 0
            assert message.usage.cache_read_input_tokens == 0


async def test_unanswered_tool_use_is_rejected(fake_anthropic: FakeAnthropic) -> None:
    messages = [
        user("Weather?"),
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}]},
        user([{"type": "tool_result", "tool_use_id": "toolu_other", "content": "sunny"}]),
    ]
    fake_anthropic.script(spare(text("never served"), why="an invalid request consumes no reply"))
    async with fake_anthropic.async_client(max_retries=2) as client:
        with pytest.raises(anthropic.BadRequestError) as caught:
            await client.messages.create(model=MODEL, max_tokens=10, tools=[WEATHER_TOOL], messages=messages)
    assert caught.value.status_code == 400
    assert caught.value.type == "invalid_request_error"
    assert "toolu_1" in caught.value.api_message
    assert fake_anthropic.calls == 1  # 400 is not retried
    assert fake_anthropic.pending == 1  # invalid requests do not consume the script


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ([{"role": "assistant", "content": "hi"}], 'first message must use the "user" role'),
        ([user("a"), user("b")], "roles must alternate"),
        ([user("")], "non-empty content"),
        ([user([{"type": "text", "text": ""}])], "text content blocks must be non-empty"),
        (
            [user("q"), {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]}],
            "without `tool_result`",
        ),
        ([user([{"type": "tool_result", "tool_use_id": "t9", "content": "x"}])], "unexpected `tool_use_id`"),
        (
            [
                user("q"),
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
                user([{"type": "text", "text": "note"}, {"type": "tool_result", "tool_use_id": "t1", "content": "r"}]),
            ],
            "must come before",
        ),
    ],
)
async def test_invalid_conversations_are_rejected(
    fake_anthropic: FakeAnthropic, messages: list[dict[str, Any]], fragment: str
) -> None:
    async with fake_anthropic.async_client() as client:
        with pytest.raises(anthropic.BadRequestError) as caught:
            await client.messages.create(model=MODEL, max_tokens=10, messages=messages)
    assert fragment in caught.value.api_message


async def test_missing_max_tokens_and_too_many_breakpoints(fake_anthropic: FakeAnthropic) -> None:
    cached = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    async with fake_anthropic.async_client() as client:
        with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
            await client.post("/v1/messages", body={"model": MODEL, "messages": [user("Hi")]}, cast_to=object)
        with pytest.raises(anthropic.BadRequestError, match="maximum of 4 blocks"):
            await client.messages.create(model=MODEL, max_tokens=10, messages=[user([cached] * 5)])


async def test_count_tokens(fake_anthropic: FakeAnthropic) -> None:
    async with fake_anthropic.async_client() as client:
        short = await client.messages.count_tokens(model=MODEL, messages=[user("Hi")])
        long = await client.messages.count_tokens(model=MODEL, tools=[WEATHER_TOOL], messages=[user("Hi " * 400)])
    assert short.input_tokens >= 1
    assert long.input_tokens > short.input_tokens + 250
    assert fake_anthropic.calls == 0 and len(fake_anthropic.count_token_requests) == 2


async def test_unknown_path_is_404(fake_anthropic: FakeAnthropic) -> None:
    async with fake_anthropic.async_client() as client:
        with pytest.raises(anthropic.NotFoundError):
            await client.models.list()


async def test_streaming_matches_non_streaming(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(tool_use("get_weather", {"city": "Oslo"}, text="Checking the weather."))
    async with fake_anthropic.async_client() as client:
        async with client.messages.stream(
            model=MODEL, max_tokens=100, tools=[WEATHER_TOOL], messages=[user("Weather?")]
        ) as stream:
            streamed_text = "".join([chunk async for chunk in stream.text_stream])
            final = await stream.get_final_message()
    assert streamed_text == "Checking the weather."
    assert final.stop_reason == "tool_use"
    assert final.content[1].type == "tool_use" and final.content[1].input == {"city": "Oslo"}
    assert final.usage.output_tokens > 1 and final.usage.input_tokens > 0


async def test_streaming_is_paced_word_by_word(fake_anthropic: FakeAnthropic) -> None:
    received: list[str] = []
    at_last_token: list[list[str]] = []

    def client_has_three_words() -> None:  # runs in the server thread; the client reads on the test's loop
        deadline = time.monotonic() + 5
        while len(received) < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        at_last_token.append(list(received))

    reply = {**text("one two three four"), "token_delay": 0.01, "before_last_token": client_has_three_words}
    fake_anthropic.script(reply)
    async with fake_anthropic.async_client() as client:
        async with client.messages.stream(model=MODEL, max_tokens=100, messages=[user("count")]) as stream:
            async for chunk in stream.text_stream:
                received.append(chunk)
    assert received == ["one", " two", " three", " four"]
    assert at_last_token == [["one", " two", " three"]], "the client had the first words before the last was written"
    record = fake_anthropic.requests[0]
    assert record.first_token_at is not None and record.last_token_at > record.first_token_at


async def test_delay_and_await_requests(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(text("slow", delay=0.3), text("fast"))
    async with fake_anthropic.async_client() as client:
        slow = asyncio.create_task(client.messages.create(model=MODEL, max_tokens=10, messages=[user("1")]))
        arrived = await fake_anthropic.await_requests(1, timeout=2)
        assert arrived[0].status is None and not slow.done()  # still being answered
        fast = await client.messages.create(model=MODEL, max_tokens=10, messages=[user("2")])
        assert fast.content[0].text == "fast" and not slow.done()  # server answers concurrently
        assert (await slow).content[0].text == "slow"
    with pytest.raises(TimeoutError):
        await fake_anthropic.await_requests(3, timeout=0.05)


async def test_usage_override(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(text("hi", usage={"output_tokens": 777, "input_tokens": 5}))
    async with fake_anthropic.async_client() as client:
        message = await client.messages.create(model=MODEL, max_tokens=10, messages=[user("Hi")])
    assert message.usage.output_tokens == 777 and message.usage.input_tokens == 5


async def test_raising_reply_callable_fails_fast_and_is_recorded() -> None:
    def broken(_body: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("script bug")

    with FakeAnthropic() as fake:
        fake.script(broken)
        async with fake.async_client(max_retries=3) as client:
            with pytest.raises(anthropic.InternalServerError, match="script bug"):
                await client.messages.create(model=MODEL, max_tokens=10, messages=[user("Hi")])
        assert fake.calls == 1  # x-should-retry: false
        assert isinstance(fake.handler_errors[0], ValueError)


async def test_malformed_scripted_reply_fails_fast_and_is_recorded() -> None:
    with FakeAnthropic() as fake:
        fake.script({"content": "not a list of blocks"}, {"stop_reason": "end_turn"})
        async with fake.async_client(max_retries=3) as client:
            for _ in range(2):
                with pytest.raises(anthropic.InternalServerError):
                    await client.messages.create(model=MODEL, max_tokens=10, messages=[user("Hi")])
        assert fake.calls == 2
        assert len(fake.handler_errors) == 2
