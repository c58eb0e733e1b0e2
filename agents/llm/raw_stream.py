"""A streamed Messages API answer read from the SDK's raw response, its final `Message` gathered here.

Why not the SDK's `messages.stream()` helper: it builds a validated pydantic event (a union) for every server-sent
event and applies each to a pydantic snapshot, about 1.5 ms of event-loop CPU per call on top of the request itself
(3.4 vs 2.0 ms per call against the bench's fake in its own process, measured), paid by every streamed answer.
Why not `messages.create` either: before sending, it copies every container of the request in Python (the SDK's
`copy_tree`: about 600 dicts and lists in an orchestrator turn of tools and history, the largest part of the
bot's own time per answer after the helper was gone); the body is serialized here once, by the C JSON encoder, and
posted through the client's documented `post` with `content=` (bytes are sent as they are, again on a retry).

What stays the SDK's: the request, its headers, retries and timeouts, HTTP errors, the `APIStatusError` an `error`
event raises (as the helper raises it), and the final `Message`, built by the SDK's own lenient `construct` as for
a call that is not streamed. A timeout or a broken connection while the answer is being read is raised as the
SDK's `APITimeoutError` / `APIConnectionError`, as before the answer starts; so is a stream that ends before its
`message_stop` (a proxy or load balancer closing the connection cleanly mid-answer: what came is half an answer, with
no stop reason, never one to deliver as finished) and an event that cannot be read (garbled JSON, an event the
message so far cannot take): the answer is broken off either way, and the callers' handling of a lost connection
applies (the user's message is kept, the reply says Claude could not be reached). The gathering follows the SDK's
`accumulate_event` (anthropic/lib/streaming/_messages.py): text, tool input JSON, citations, thinking and its
signature, and the `message_delta` usage, whose counts are totals that overwrite.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anthropic
import httpx2 as httpx
import pydantic


async def stream_message(
    client: anthropic.AsyncAnthropic, params: dict[str, Any], on_text: Callable[[str], Awaitable[None]]
) -> anthropic.types.Message:
    """Send `params` (the keyword arguments of `messages.create`) as a streamed request; `on_text` gets each piece
    of answer text as it arrives."""
    params = dict(params)
    timeout = params.pop("timeout", None)
    options: dict[str, Any] = {"timeout": timeout} if timeout is not None else {}
    # the SDK hands back the raw response for cast_to=httpx.Response; its overloads want a stream_cls with stream=True
    response: httpx.Response = await client.post(  # type: ignore[call-overload]  # the overloads miss this use
        "/v1/messages", cast_to=httpx.Response, content=request_body(params), options=options, stream=True
    )
    try:
        return await _read(response, on_text)
    except httpx.TimeoutException as err:  # mid-answer: raised as the SDK raises it before the answer starts
        raise anthropic.APITimeoutError(request=response.request) from err
    except httpx.TransportError as err:
        raise anthropic.APIConnectionError(message=str(err) or type(err).__name__, request=response.request) from err
    finally:
        await response.aclose()


def request_body(params: dict[str, Any]) -> bytes:
    """The JSON body of a streamed Messages request. Serialized here, once, by the C encoder: the SDK's `create`
    first copies every container of a request (about 600 in an orchestrator turn's ~17 KB of tools and history) in
    Python. A block kept as an SDK model is dumped as the SDK sends it (`to_dict`)."""
    return json.dumps({**params, "stream": True}, ensure_ascii=False, separators=(",", ":"), default=_plain).encode()


def _plain(value: object) -> object:
    if isinstance(value, pydantic.BaseModel) and hasattr(value, "to_dict"):
        return value.to_dict()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


async def _sse_lines(response: httpx.Response) -> AsyncIterator[str]:
    """The stream's lines, ended by LF or CRLF only (what the API sends). httpx's `aiter_lines` also ends a line at
    U+2028, U+2029, U+0085 and the like (str.splitlines), which JSON leaves unescaped inside a string: a model's text
    or tool input holding one would cut its event in two and end the task."""
    pending = b""
    async for chunk in response.aiter_bytes():
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.removesuffix(b"\r").decode("utf-8", errors="replace")
    if pending:
        yield pending.decode("utf-8", errors="replace")


async def _read(response: httpx.Response, on_text: Callable[[str], Awaitable[None]]) -> anthropic.types.Message:
    gathered = _Gathered()
    event, data = "", []
    async for line in _sse_lines(response):
        if line:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
            continue
        if data and event not in ("ping", ""):  # a blank line ends an event
            body = "\n".join(data)
            if event == "error":
                raise anthropic.APIStatusError(_error_text(body), response=response, body=_json(body))
            try:
                text = gathered.apply(json.loads(body))
            except _UNREADABLE as err:
                raise _broken(response, f"an unreadable {event or 'unnamed'} event in the answer's stream") from err
            if text:
                await on_text(text)
        event, data = "", []
    if gathered.message is None:
        raise _broken(response, "the answer's stream ended before it started")
    if not gathered.stopped:  # ended cleanly mid-answer: what came is not the whole answer
        raise _broken(response, "the answer's stream ended before its message_stop")
    try:
        return anthropic.types.Message.construct(**gathered.finished())
    except _UNREADABLE as err:  # a tool call's input that is not JSON
        raise _broken(response, "an unreadable tool call in the answer's stream") from err


# what reading a garbled event raises: its JSON, or fields the message so far does not have (an index past its blocks,
# a field of the wrong type, an event before message_start)
_UNREADABLE = (ValueError, LookupError, TypeError, AttributeError, RuntimeError)


def _broken(response: httpx.Response, why: str) -> anthropic.APIConnectionError:
    """The answer's stream broke off: raised as a lost connection is (the answer is as incomplete)."""
    return anthropic.APIConnectionError(message=why, request=response.request)


class _Gathered:
    """The message so far, as the plain data the API sends."""

    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self.tool_json: dict[int, list[str]] = {}
        self.text: dict[int, list[str]] = {}  # a text block's pieces, joined at its end (not one copy per piece)
        self.stopped = False  # message_stop came: the answer is whole

    def apply(self, event: dict[str, Any]) -> str:
        """Apply one event; the text it adds to a text block ("" if none)."""
        kind = event.get("type")
        if kind == "message_start":
            self.message = dict(event["message"])
            self.message["content"] = list(self.message.get("content") or [])
            return ""
        message = self.message
        if message is None:
            raise RuntimeError(f'Unexpected event order, got {kind} before "message_start"')  # as the SDK's helper
        if kind == "message_stop":
            self.stopped = True
        elif kind == "content_block_start":
            message["content"].append(dict(event["content_block"]))
        elif kind == "content_block_delta":
            return self._delta(message["content"][event["index"]], event["index"], event["delta"])
        elif kind == "content_block_stop":
            self._close(event["index"])
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            for key in ("stop_reason", "stop_sequence", "stop_details"):
                if key in delta:
                    message[key] = delta[key]
            if delta.get("container") is not None:
                message["container"] = delta["container"]
            usage = message.setdefault("usage", {})
            for key, value in (event.get("usage") or {}).items():
                if value is not None or key == "output_tokens":
                    usage[key] = value
        return ""

    def _close(self, index: int) -> None:
        assert self.message is not None
        block = self.message["content"][index]
        if (pieces := self.text.pop(index, None)) is not None:
            block["text"] = block.get("text", "") + "".join(pieces)
        if (parts := self.tool_json.pop(index, None)) is not None:
            block["input"] = json.loads("".join(parts) or "{}")

    def finished(self) -> dict[str, Any]:
        """The message, with any block the stream left open closed."""
        assert self.message is not None
        for index in [*self.text, *self.tool_json]:
            self._close(index)
        return self.message

    def _delta(self, block: dict[str, Any], index: int, delta: dict[str, Any]) -> str:
        kind = delta.get("type")
        if kind == "text_delta" and block.get("type") == "text":
            self.text.setdefault(index, []).append(delta["text"])
            return str(delta["text"])
        if kind == "input_json_delta":
            self.tool_json.setdefault(index, []).append(delta.get("partial_json", ""))
        elif kind == "citations_delta" and block.get("type") == "text":
            block["citations"] = [*(block.get("citations") or []), delta["citation"]]
        elif kind == "thinking_delta" and block.get("type") == "thinking":
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
        elif kind == "signature_delta" and block.get("type") == "thinking":
            block["signature"] = delta["signature"]
        return ""


def _json(body: str) -> object:
    try:
        return json.loads(body)
    except ValueError:
        return body


def _error_text(body: str) -> str:
    parsed = _json(body)
    return f"{parsed}" if not isinstance(parsed, str) else (body or "an error event in the answer's stream")
