"""A scripted fake of the Anthropic Messages API, served over HTTP on loopback.

The real ``anthropic`` SDK talks to it (``base_url=fake.url``), so retries, error
classes and response parsing are exercised for real. Tests queue replies with
``fake.script(...)`` (built by :func:`text`, :func:`tool_use`, :func:`tool_uses`,
:func:`error`, or callables taking the request body), inspect ``fake.requests``,
and read realistic ``usage`` numbers, including a simulation of prompt caching. A request with nothing queued
and no ``handler`` set is unexpected: it fails the test; so does a scripted reply never served (``tests.fakes.unserved``),
unless marked ``unserved.spare(reply, why=...)``.

Requests are validated like the real API where that is cheap (required fields,
user/assistant alternation, tool_use/tool_result pairing, non-empty content, at
most four cache breakpoints); a violation gets a 400 ``invalid_request_error``
and does not consume a scripted reply.

Streamed requests (``stream: true``) are written event by event: the headers and
``message_start`` at once, then ``delay`` seconds to the first token, then one text
delta per word with ``token_delay`` seconds between words (``fake.token_delay`` or a
reply's own). Each record keeps when its first and last text token went out, and a
reply's ``before_last_token`` callable runs (in the server thread) just before the last
word is written, so tests can assert what the client did while it was still streaming.
A tool call's input is streamed in pieces of JSON, as the API sends it, and a reply with
``stream_error`` (an error object) sends that ``error`` event after its first word, and
nothing more, as the API does when it is overloaded mid-answer. A streamed reply can also break off the way a network
does: ``cut_after`` (a number of words) ends the stream cleanly once that many words are out, with no
``message_delta`` and no ``message_stop`` (a proxy or load balancer closing the connection); ``garbled_after`` sends,
once that many words are out, one event whose JSON is cut in the middle in place of the next word's, then goes on
with the rest. A reply's ``before_break`` callable runs (in the server thread) just before either break is written.

Thinking: a reply's `thinking` block (see :func:`with_thinking`) is served with a signature the fake can check,
streamed as thinking and signature deltas. A request that sends a thinking block back changed, or that sends the
assistant turn of a tool call the fake answered with thinking without that thinking block first, gets the API's
400 (stricter than the API, which asks it of the last such turn only). The `thinking` parameter is checked as the API
checks it (a budget of at least 1,024 below max_tokens; no forced tool choice).

Token counts (``usage.input_tokens``, count_tokens) count text at four characters a token, and pictures and PDFs as
the API bills them: a picture by its pixels (width × height / 750 after scaling to 1568 px and 1.15 megapixels),
a PDF page by the picture of its page (from its MediaBox) plus the text it shows.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import itertools
import json
import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import pytest

from . import unserved
from .serve_loop import serve_in_thread, stop_serving

if TYPE_CHECKING:
    import anthropic

Reply = dict[str, Any]
ReplyFn = Callable[[dict[str, Any]], "Reply | str"]
_HttpAnswer = tuple[int, bytes, str, dict[str, str]]  # status, payload, content type, headers

MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
MAX_CACHE_BREAKPOINTS = 4
CACHE_LOOKBACK_BLOCKS = 20
DEFAULT_MIN_CACHEABLE_TOKENS = 1024


# --------------------------------------------------------------------------- reply helpers


def _with_extras(reply: Reply, delay: float, usage: dict[str, Any] | None) -> Reply:
    if delay:
        reply["delay"] = delay
    if usage:
        reply["usage"] = dict(usage)
    return reply


def text(
    text: str,
    stop_reason: str = "end_turn",
    *,
    delay: float = 0.0,
    usage: dict[str, Any] | None = None,
) -> Reply:
    """A reply whose content is a single text block."""
    return _with_extras({"content": [{"type": "text", "text": text}], "stop_reason": stop_reason}, delay, usage)


def tool_uses(
    calls: list[tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str]],
    text: str | None = None,
    *,
    delay: float = 0.0,
    usage: dict[str, Any] | None = None,
) -> Reply:
    """A reply calling several tools; each call is ``(name, input)`` or ``(name, input, id)``.

    Calls without an id get a fresh ``toolu_fake_…`` id when the reply is served.
    """
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    for call in calls:
        name, tool_input = call[0], call[1]
        block: dict[str, Any] = {"type": "tool_use", "name": name, "input": dict(tool_input)}
        if len(call) > 2 and call[2]:
            block["id"] = call[2]
        content.append(block)
    return _with_extras({"content": content, "stop_reason": "tool_use"}, delay, usage)


def tool_use(
    name: str,
    input: dict[str, Any],  # noqa: A002 - mirrors the API field name
    text: str | None = None,
    id: str | None = None,  # noqa: A002 - mirrors the API field name
    *,
    delay: float = 0.0,
    usage: dict[str, Any] | None = None,
) -> Reply:
    """A reply calling one tool, optionally preceded by a text block."""
    call: tuple[str, dict[str, Any], str] = (name, input, id or "")
    return tool_uses([call], text=text, delay=delay, usage=usage)


def with_thinking(reply: Reply, thought: str) -> Reply:
    """`reply` with a thinking block before its content, as a model thinking first answers (signed when served)."""
    return {**reply, "content": [{"type": "thinking", "thinking": thought}, *reply["content"]]}


def signature_of(thought: str) -> str:
    """The signature the fake gives a thinking block: a request may send the block back only unchanged."""
    return "sig-" + hashlib.sha256(thought.encode()).hexdigest()[:32]


def error(
    status: int,
    type: str,  # noqa: A002 - mirrors the API field name
    message: str,
    retry_after: str | None = "0.01",
    *,
    should_retry: bool | None = None,
    delay: float = 0.0,
) -> Reply:
    """An error reply, e.g. ``error(529, "overloaded_error", "Overloaded")``.

    ``retry_after`` is sent as the ``retry-after`` header. Keep it small and
    positive: the SDK sleeps exactly that long, while ``"0"`` (or no header) makes
    it fall back to its own exponential backoff (0.5 s and up).
    ``should_retry`` sets ``x-should-retry`` when not None.
    """
    err: dict[str, Any] = {"status": status, "type": type, "message": message}
    if retry_after is not None:
        err["retry_after"] = retry_after
    if should_retry is not None:
        err["should_retry"] = should_retry
    return _with_extras({"error": err}, delay, None)


def overloaded(**kwargs: Any) -> Reply:
    """A 529 ``overloaded_error`` reply."""
    return error(529, "overloaded_error", "Overloaded", **kwargs)


def rate_limited(**kwargs: Any) -> Reply:
    """A 429 ``rate_limit_error`` reply."""
    return error(429, "rate_limit_error", "Number of request tokens has exceeded your rate limit", **kwargs)


def server_error(**kwargs: Any) -> Reply:
    """A 500 ``api_error`` reply."""
    return error(500, "api_error", "Internal server error", **kwargs)


def unscripted(body: dict[str, Any]) -> Reply:
    """The default handler: nothing was queued and no handler set, so the request was not expected. It fails the test
    (recorded in ``handler_errors``, which the ``fake_anthropic`` fixture checks) and the client gets a 500."""
    messages = body.get("messages") or [{}]
    raise AssertionError(
        f"unscripted request to the fake Anthropic API (nothing queued, no handler set); "
        f"last message: {str(messages[-1])[:300]}"
    )


# --------------------------------------------------------------------------- records


@dataclass
class RecordedRequest:
    """One request as the fake received it; ``status`` is set once it is answered."""

    path: str
    body: Any
    headers: dict[str, str]
    status: int | None = None
    first_token_at: float | None = None  # time.monotonic() when a streamed reply's first/last word went out
    last_token_at: float | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []


class ApiError(Exception):
    """An error answer: HTTP status plus the API's error type and message."""

    def __init__(self, status: int, type_: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(f"{status} {type_}: {message}")
        self.status = status
        self.type = type_
        self.message = message
        self.headers = headers or {}


def _invalid(message: str) -> ApiError:
    return ApiError(400, "invalid_request_error", message)


IMAGE_MAGIC = {
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}
MAX_IMAGE_BASE64_BYTES = 5 * 1024 * 1024


def _base64_source(where: str, block: dict[str, Any]) -> tuple[str, bytes]:
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64":
        raise _invalid(f"{where}.source: this fake takes base64 sources only")
    data = source.get("data")
    if not isinstance(data, str) or not data:
        raise _invalid(f"{where}.source.data: Field required")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise _invalid(f"{where}.source.data: invalid base64 data") from None
    return str(source.get("media_type")), raw


def _validate_media(where: str, role: str, block: dict[str, Any]) -> None:
    """Image and document blocks as the API checks them: user turns only, a known type that matches the bytes (a
    plain-text document: text/plain, some text)."""
    if role != "user":
        raise _invalid(f"{where}: `{block['type']}` blocks are only allowed in user messages")
    if block["type"] == "image":
        media_type, raw = _base64_source(where, block)
        if media_type not in IMAGE_MAGIC:
            raise _invalid(
                f"{where}.source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
            )
        if len(block["source"]["data"]) > MAX_IMAGE_BASE64_BYTES:
            raise _invalid(f"{where}.source.base64: image exceeds 5 MB maximum")
        if not raw.startswith(IMAGE_MAGIC[media_type]):
            raise _invalid(f"{where}.source: Image does not match the provided media type {media_type}")
    elif (block.get("source") or {}).get("type") == "text":  # a plain-text document
        source = block["source"]
        if source.get("media_type") != "text/plain":
            raise _invalid(f"{where}.source.media_type: Input should be 'text/plain'")
        if not isinstance(source.get("data"), str) or not source["data"]:
            raise _invalid(f"{where}.source.data: a text document must be non-empty")
    else:
        media_type, raw = _base64_source(where, block)
        if media_type != "application/pdf" or not raw.startswith(b"%PDF-"):
            raise _invalid(f"{where}.source: a base64 document must be a PDF (application/pdf)")


# --------------------------------------------------------------------------- validation


def _validate_blocks(i: int, role: str, blocks: list[Any]) -> None:
    for j, block in enumerate(blocks):
        where = f"messages.{i}.content.{j}"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise _invalid(f"{where}.type: Field required")
        kind = block["type"]
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise _invalid(f"{where}.text: Field required")
            if not block["text"]:
                raise _invalid(f"{where}.text: text content blocks must be non-empty")
        elif kind == "tool_use":
            if role != "assistant":
                raise _invalid(f"{where}: `tool_use` blocks are only allowed in assistant messages")
            if not isinstance(block.get("id"), str) or not block["id"]:
                raise _invalid(f"{where}.id: Field required")
            if not isinstance(block.get("name"), str) or not block["name"]:
                raise _invalid(f"{where}.name: Field required")
            if not isinstance(block.get("input"), dict):
                raise _invalid(f"{where}.input: Input should be a valid dictionary")
        elif kind in ("image", "document"):
            _validate_media(where, role, block)
        elif kind == "thinking":
            if role != "assistant":
                raise _invalid(f"{where}: `thinking` blocks are only allowed in assistant messages")
            if block.get("signature") != signature_of(str(block.get("thinking", ""))):
                raise _invalid(f"{where}: Invalid `signature` in `thinking` block")
        elif kind == "tool_result":
            if role != "user":
                raise _invalid(f"{where}: `tool_result` blocks are only allowed in user messages")
            if not isinstance(block.get("tool_use_id"), str) or not block["tool_use_id"]:
                raise _invalid(f"{where}.tool_use_id: Field required")


def _validate_tool_pairing(messages: list[dict[str, Any]]) -> None:
    seen_tool_use_ids: set[str] = set()
    for i, message in enumerate(messages):
        blocks = message["content"] if isinstance(message["content"], list) else []
        if message["role"] == "assistant":
            ids = [b["id"] for b in blocks if b["type"] == "tool_use"]
            for tool_use_id in ids:
                if tool_use_id in seen_tool_use_ids:
                    raise _invalid(f"messages.{i}: `tool_use` ids must be unique; duplicate: {tool_use_id}")
                seen_tool_use_ids.add(tool_use_id)
            if not ids:
                continue
            following = messages[i + 1] if i + 1 < len(messages) else None
            following_blocks = following["content"] if following and isinstance(following["content"], list) else []
            answered = {b["tool_use_id"] for b in following_blocks if b["type"] == "tool_result"}
            missing = [tool_use_id for tool_use_id in ids if tool_use_id not in answered]
            if missing:
                raise _invalid(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
                    f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                    "`tool_result` block in the next message."
                )
        else:
            previous = messages[i - 1] if i > 0 else None
            previous_blocks = previous["content"] if previous and isinstance(previous["content"], list) else []
            asked = {b["id"] for b in previous_blocks if b["type"] == "tool_use"}
            answered_here: set[str] = set()
            seen_other_block = False
            for j, block in enumerate(blocks):
                if block["type"] != "tool_result":
                    seen_other_block = True
                    continue
                tool_use_id = block["tool_use_id"]
                if tool_use_id not in asked:
                    raise _invalid(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                        f"blocks: {tool_use_id}. Each `tool_result` block must have a corresponding "
                        "`tool_use` block in the previous message."
                    )
                if tool_use_id in answered_here:
                    raise _invalid(f"messages.{i}.content.{j}: duplicate `tool_result` for tool_use_id {tool_use_id}")
                if seen_other_block:
                    raise _invalid(
                        f"messages.{i}.content.{j}: `tool_result` blocks must come before any other "
                        "content in the user message that answers a `tool_use`."
                    )
                answered_here.add(tool_use_id)


def _count_cache_breakpoints(body: dict[str, Any]) -> int:
    count = 0
    for tool in body.get("tools") or []:
        count += isinstance(tool, dict) and bool(tool.get("cache_control"))
    system = body.get("system")
    if isinstance(system, list):
        count += sum(isinstance(b, dict) and bool(b.get("cache_control")) for b in system)
    for message in body.get("messages", []):
        if isinstance(message.get("content"), list):
            count += sum(isinstance(b, dict) and bool(b.get("cache_control")) for b in message["content"])
    return count


def validate_count_tokens_request(body: Any) -> None:
    """Raise :class:`ApiError` (400) unless ``body`` is a well-formed token-count request."""
    if not isinstance(body, dict):
        raise _invalid("Request body must be a JSON object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _invalid("model: Field required")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise _invalid("messages: Field required")
    if not messages:
        raise _invalid("messages: at least one message is required")

    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise _invalid("tools: Input should be a valid list")
        names: set[str] = set()
        for k, tool in enumerate(tools):
            if not isinstance(tool, dict):
                raise _invalid(f"tools.{k}: Input should be a valid dictionary")
            if tool.get("type") in (None, "custom"):
                if not isinstance(tool.get("name"), str) or not tool["name"]:
                    raise _invalid(f"tools.{k}.name: Field required")
                if not isinstance(tool.get("input_schema"), dict):
                    raise _invalid(f"tools.{k}.input_schema: Field required")
            name = tool.get("name")
            if name in names:
                raise _invalid("tools: Tool names must be unique.")
            names.add(name)

    system = body.get("system")
    if system is not None and not isinstance(system, str):
        if not isinstance(system, list) or not all(
            isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) for b in system
        ):
            raise _invalid("system: Input should be a valid string or a list of text blocks")
        if any(not b["text"] for b in system):
            raise _invalid("system: text content blocks must be non-empty")

    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _invalid(f"messages.{i}: Input should be a valid dictionary")
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise _invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if i == 0 and role != "user":
            raise _invalid('messages: first message must use the "user" role')
        if i > 0 and role == messages[i - 1].get("role"):
            raise _invalid(
                f'messages.{i}: roles must alternate between "user" and "assistant", '
                f'but found multiple "{role}" roles in a row'
            )
        content = message.get("content")
        if not isinstance(content, (str, list)):
            raise _invalid(f"messages.{i}.content: Field required")
        is_final_assistant = role == "assistant" and i == len(messages) - 1
        if not content and not is_final_assistant:
            raise _invalid(
                f"messages.{i}: all messages must have non-empty content except for the optional "
                "final assistant message"
            )
        if isinstance(content, list):
            _validate_blocks(i, role, content)

    _validate_tool_pairing(messages)

    breakpoints = _count_cache_breakpoints(body)
    if breakpoints > MAX_CACHE_BREAKPOINTS:
        raise _invalid(
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found {breakpoints}."
        )


def validate_messages_request(body: Any) -> None:
    """Raise :class:`ApiError` (400) unless ``body`` is a well-formed Messages request."""
    if isinstance(body, dict) and isinstance(body.get("model"), str) and body["model"]:
        if "max_tokens" not in body:
            raise _invalid("max_tokens: Field required")
        max_tokens = body["max_tokens"]
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise _invalid("max_tokens: Input should be an integer greater than or equal to 1")
        _validate_thinking(body)
    validate_count_tokens_request(body)


def thinks(body: dict[str, Any]) -> bool:
    return (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")


def _validate_thinking(body: dict[str, Any]) -> None:
    thinking = body.get("thinking")
    if thinking is None:
        return
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind not in ("enabled", "adaptive", "disabled"):
        raise _invalid("thinking.type: Input should be 'enabled', 'adaptive' or 'disabled'")
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            raise _invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
        if budget >= body["max_tokens"]:
            raise _invalid("`max_tokens` must be greater than `thinking.budget_tokens`")
    if kind != "disabled" and (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
        raise _invalid("Thinking may not be enabled when tool_choice forces tool use.")


# --------------------------------------------------------------------------- token estimation and caching


# one encoder for every call: `json.dumps` with options builds a new one each time (the cache simulation encodes
# every block of every request)
_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
_json_string = json.encoder.encode_basestring  # a str as _canonical writes it (ensure_ascii=False)


def estimate_tokens(obj: Any) -> int:
    """Rough token estimate: one token per four characters of compact JSON (at least 1)."""
    serialized = obj if isinstance(obj, str) else _canonical(obj)
    return max(1, math.ceil(len(serialized) / 4))


def _picture_tokens(width: float, height: float) -> int:
    """The API's documented cost of a picture: scaled to 1568 px on its long edge and 1.15 megapixels, then / 750."""
    scale = min(1.0, 1568 / max(width, height), math.sqrt(1_150_000 / (width * height)))
    return math.ceil((width * scale) * (height * scale) / 750)


def _png_or_jpeg_size(raw: bytes) -> tuple[int, int] | None:
    if raw.startswith(b"\x89PNG"):
        width, height = int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")
        return width, height
    for match in re.finditer(rb"\xff[\xc0-\xc3\xc5-\xc7\xc9-\xcb\xcd-\xcf]..\x08(..)(..)", raw[:200_000], re.S):
        return int.from_bytes(match.group(2), "big"), int.from_bytes(match.group(1), "big")
    return None


_PAGE_OBJECT = re.compile(
    rb"/Type\s*/Page\b(?!s)[^>]{0,300}?/MediaBox\s*\[\s*([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", re.S
)
_SHOWN_TEXT = re.compile(rb"\(((?:[^()\\]|\\.)*)\)\s*Tj", re.S)  # a string shown by Tj


def media_tokens(block: dict[str, Any]) -> int:
    """An image or PDF block at the API's cost: a picture by its pixels, a PDF page by its picture and its text
    (pages from their MediaBox at 150 dpi; the text the page shows with Tj, four characters a token)."""
    raw = base64.b64decode(block["source"]["data"])
    if block["type"] == "image":
        size = _png_or_jpeg_size(raw)
        return _picture_tokens(*size) if size else 1_600
    pages = [tuple(float(x) for x in m.groups()) for m in _PAGE_OBJECT.finditer(raw)]
    pictures = sum(_picture_tokens((x1 - x0) * 150 / 72, (y1 - y0) * 150 / 72) for x0, y0, x1, y1 in pages)
    shown = sum(len(m.group(1)) for m in _SHOWN_TEXT.finditer(raw))
    return pictures + math.ceil(shown / 4)


def _without_media(item: Any) -> tuple[Any, int]:
    """`item` with the data of its pictures and PDFs left out, and what those cost."""
    if isinstance(item, list):
        pairs = [_without_media(x) for x in item]
        return [p for p, _ in pairs], sum(t for _, t in pairs)
    if not isinstance(item, dict):
        return item, 0
    if item.get("type") in ("image", "document") and (item.get("source") or {}).get("type") == "base64":
        if item["type"] == "image" or item["source"].get("media_type") == "application/pdf":
            return {**item, "source": {**item["source"], "data": ""}}, media_tokens(item)
    if item.get("type") == "tool_result" and isinstance(item.get("content"), list):
        content, cost = _without_media(item["content"])
        return {**item, "content": content}, cost
    return item, 0


@dataclass(frozen=True)
class PromptSegment:
    """One cacheable unit of a prompt: a tool, a system block or a message content block."""

    serialized: str  # canonical JSON without cache_control
    tokens: int
    cache_control: dict[str, Any] | None


def prompt_segments(body: dict[str, Any]) -> list[PromptSegment]:
    """Split a request into segments in API cache order: tools, then system, then messages."""
    segments: list[PromptSegment] = []

    def add(kind: str, item: dict[str, Any]) -> None:
        cache_control = item.get("cache_control") or None
        text = item.get("text")
        if item.get("type") == "text" and isinstance(text, str) and len(item) == 2 + (cache_control is not None):
            # the usual block, written as _canonical writes it (the same string) without its generic walk
            serialized = f'["{kind}",{{"text":{_json_string(text)},"type":"text"}}]'
        else:
            serialized = _canonical([kind, {k: v for k, v in item.items() if k != "cache_control"}])
            bare, media = _without_media(item)
            if media:  # pictures and PDFs at their own cost, not their base64's length
                textual = _canonical([kind, {k: v for k, v in bare.items() if k != "cache_control"}])
                segments.append(PromptSegment(serialized, estimate_tokens(textual) + media, cache_control))
                return
        segments.append(PromptSegment(serialized, estimate_tokens(serialized), cache_control))

    for tool in body.get("tools") or []:
        add("tool", tool)
    system = body.get("system")
    if isinstance(system, str) and system:
        add("system", {"type": "text", "text": system})
    elif isinstance(system, list):
        for block in system:
            add("system", block)
    for message in body.get("messages", []):
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            add(message["role"], block)

    top_level = body.get("cache_control")
    if top_level and segments and segments[-1].cache_control is None:
        last = segments[-1]
        segments[-1] = PromptSegment(last.serialized, last.tokens, top_level)
    return segments


@dataclass
class CacheUsage:
    """How a request's input tokens split between fresh, cache-write and cache-read."""

    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    ephemeral_5m_input_tokens: int = 0
    ephemeral_1h_input_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens


class PromptCacheSimulator:
    """Session-long prompt cache keyed by hashes of prompt prefixes ending at breakpoints.

    Like the real API: a prefix is written at each ``cache_control`` breakpoint whose
    prefix reaches ``min_tokens``; a read looks for the longest previously written
    prefix ending at a breakpoint or up to 20 blocks before it. Caches are per model.
    Entries never expire (tests are far shorter than the 5-minute TTL).
    """

    def __init__(self, min_tokens: int = DEFAULT_MIN_CACHEABLE_TOKENS) -> None:
        self.min_tokens = min_tokens
        self._written: set[bytes] = set()
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._written.clear()

    def account(self, body: dict[str, Any]) -> CacheUsage:
        segments = prompt_segments(body)
        digests: list[bytes] = []
        cumulative: list[int] = []
        digest = hashlib.sha256(_canonical(["model", body.get("model")]).encode()).digest()
        running = 0
        for segment in segments:
            digest = hashlib.sha256(digest + segment.serialized.encode()).digest()
            running += segment.tokens
            digests.append(digest)
            cumulative.append(running)
        total = running
        breakpoints = [i for i, s in enumerate(segments) if s.cache_control]

        with self._lock:
            read_end = -1  # index of the last segment served from cache
            for b in breakpoints:
                for j in range(b, max(-1, b - CACHE_LOOKBACK_BLOCKS), -1):
                    if digests[j] in self._written:
                        read_end = max(read_end, j)
                        break
            writable = [b for b in breakpoints if cumulative[b] >= self.min_tokens]
            for b in writable:
                self._written.add(digests[b])

        read_tokens = cumulative[read_end] if read_end >= 0 else 0
        by_ttl = {"5m": 0, "1h": 0}
        boundary = read_tokens
        for b in writable:
            if cumulative[b] > boundary:
                ttl = (segments[b].cache_control or {}).get("ttl", "5m")
                by_ttl["1h" if ttl == "1h" else "5m"] += cumulative[b] - boundary
                boundary = cumulative[b]
        created = by_ttl["5m"] + by_ttl["1h"]
        return CacheUsage(
            input_tokens=total - read_tokens - created,
            cache_creation_input_tokens=created,
            cache_read_input_tokens=read_tokens,
            ephemeral_5m_input_tokens=by_ttl["5m"],
            ephemeral_1h_input_tokens=by_ttl["1h"],
        )


def count_input_tokens(body: dict[str, Any]) -> int:
    """Estimated input tokens of a request (what count_tokens reports)."""
    return max(1, sum(segment.tokens for segment in prompt_segments(body)))


# --------------------------------------------------------------------------- the server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # no 40 ms delayed-ACK stall between a reply's header and body writes
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _send(self, status: int, payload: bytes | Iterator[bytes], content_type: str, headers: dict[str, str]) -> None:
        if not isinstance(payload, bytes):
            self._send_chunked(status, payload, content_type, headers)
            return
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def _send_chunked(self, status: int, parts: Iterator[bytes], content_type: str, headers: dict[str, str]) -> None:
        """A streamed answer: each part is written (and flushed) as soon as it is produced."""
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("transfer-encoding", "chunked")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        try:
            for part in parts:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client went away mid-stream
            self.close_connection = True

    def _not_found(self) -> None:
        self._drain_body()
        fake = self.server.fake
        request_id = fake._next_id("req_fake_")
        body = {"type": "error", "error": {"type": "not_found_error", "message": f"Not found: {self.path}"}}
        self._send(404, _canonical(body).encode(), "application/json", {"request-id": request_id})

    def _drain_body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    do_GET = do_PUT = do_DELETE = do_PATCH = _not_found  # noqa: N815 - stdlib naming

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        path = self.path.split("?", 1)[0].rstrip("/")
        if path not in (MESSAGES_PATH, COUNT_TOKENS_PATH):
            self._not_found()
            return
        raw = self._drain_body()
        status, payload, content_type, headers = self.server.fake._answer(path, raw, dict(self.headers))
        self._send(status, payload, content_type, headers)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeAnthropic


class FakeAnthropic:
    """The fake API server. Use as a context manager or via the ``fake_anthropic`` fixture."""

    def __init__(self, *, min_cacheable_tokens: int = DEFAULT_MIN_CACHEABLE_TOKENS) -> None:
        self.handler: ReplyFn = unscripted  # set it (e.g. to a tests.scripted.RoleScript) or queue replies
        self.token_delay = 0.0  # seconds between the words of a streamed reply (a reply's own value wins)
        self.requests: list[RecordedRequest] = []
        self.count_token_requests: list[RecordedRequest] = []
        self.handler_errors: list[BaseException] = []
        self.cache = PromptCacheSimulator(min_cacheable_tokens)
        self.api_keys: set[str] | None = None  # when set, any other x-api-key is refused (401), as the real API does
        self._queue: deque[Reply | ReplyFn | unserved.Spare] = deque()
        self._thought_calls: set[str] = set()  # ids of the tool calls served after a thinking block
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        unserved.track(self)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeAnthropic:
        if self._server is not None:
            return self
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._server = server
        self._stopping.clear()
        self._thread = serve_in_thread(server, "fake-anthropic")
        return self

    def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()  # wakes replies sleeping on `delay`
        stop_serving(server)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        """Base URL to pass as ``base_url`` to the SDK client."""
        if self._server is None:
            raise RuntimeError("FakeAnthropic is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def async_client(self, *, max_retries: int = 0, **kwargs: Any) -> anthropic.AsyncAnthropic:
        """A real ``AsyncAnthropic`` pointed at this fake."""
        import anthropic

        from agents.core.tls import client_tls

        kwargs.setdefault("http_client", anthropic.DefaultAsyncHttpxClient(verify=client_tls()))  # one CA load
        return anthropic.AsyncAnthropic(
            api_key=kwargs.pop("api_key", "sk-ant-fake"), base_url=self.url, max_retries=max_retries, **kwargs
        )

    # ------------------------------------------------------------------ scripting and records

    def script(self, *replies: Reply | ReplyFn | unserved.Spare) -> FakeAnthropic:
        """Queue replies, served in order to successive valid /v1/messages requests; one still queued when the test
        ends fails it, unless marked `unserved.spare(reply, why=...)`."""
        with self._lock:
            self._queue.extend(replies)
        return self

    def unserved(self) -> list[str]:
        """The queued replies not served and not marked spare (`tests.fakes.unserved`), one line each."""
        with self._lock:
            return unserved.leftovers("the fake Anthropic server's queue", self._queue)

    @property
    def pending(self) -> int:
        """Scripted replies not yet served."""
        with self._lock:
            return len(self._queue)

    @property
    def calls(self) -> int:
        """Number of /v1/messages requests received (valid or not)."""
        return len(self.requests)

    def reset(self) -> None:
        """Forget script, records and cache contents."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.count_token_requests.clear()
            self.handler_errors.clear()
            self._thought_calls.clear()
        self.cache.clear()

    async def await_requests(self, n: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Wait until at least ``n`` /v1/messages requests have arrived; return the first ``n``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self.requests) < n:
            if loop.time() >= deadline:
                got = len(self.requests)
                raise TimeoutError(f"expected {n} requests to the fake Anthropic API, got {got}")
            await asyncio.sleep(0.005)
        return self.requests[:n]

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"

    # ------------------------------------------------------------------ answering (server threads)

    def _answer(self, path: str, raw: bytes, headers: dict[str, str]) -> _HttpAnswer:
        request_id = self._next_id("req_fake_")
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        record = RecordedRequest(path=path, body=body, headers={k.lower(): v for k, v in headers.items()})
        with self._lock:
            (self.requests if path == MESSAGES_PATH else self.count_token_requests).append(record)
        try:
            self._check_headers(record.headers)
            if self.api_keys is not None and record.headers.get("x-api-key") not in self.api_keys:
                raise ApiError(401, "authentication_error", "invalid x-api-key")
            if not isinstance(body, dict):
                raise _invalid("Request body must be a JSON object")
            if path == COUNT_TOKENS_PATH:
                validate_count_tokens_request(body)
                payload = _canonical({"input_tokens": count_input_tokens(body)}).encode()
                status, content_type = 200, "application/json"
                extra: dict[str, str] = {}
            else:
                status, payload, content_type, extra = self._answer_messages(body, record)
        except Exception as exc:
            if not isinstance(exc, ApiError):  # a bug in a scripted reply or in the fake itself
                with self._lock:
                    self.handler_errors.append(exc)
                exc = ApiError(500, "api_error", f"fake server failed: {exc!r}", {"x-should-retry": "false"})
            status = exc.status
            content_type = "application/json"
            error_info = {"type": exc.type, "message": exc.message}
            payload = _canonical({"type": "error", "error": error_info, "request_id": request_id}).encode()
            extra = exc.headers
        record.status = status
        return status, payload, content_type, {"request-id": request_id, **extra}

    @staticmethod
    def _check_headers(headers: dict[str, str]) -> None:
        if not headers.get("x-api-key") and not headers.get("authorization"):
            raise ApiError(401, "authentication_error", "x-api-key header is required")
        if not headers.get("anthropic-version"):
            raise _invalid("anthropic-version: header is required")

    def _check_thinking_kept(self, body: dict[str, Any]) -> None:
        """With thinking on, an assistant turn whose tool calls the fake answered with thinking starts with it."""
        if not thinks(body):
            return
        with self._lock:
            thought = set(self._thought_calls)
        for i, message in enumerate(body["messages"]):
            blocks = message["content"] if isinstance(message["content"], list) else []
            if message["role"] != "assistant" or not any(b.get("id") in thought for b in blocks):
                continue
            first = blocks[0].get("type")
            if first not in ("thinking", "redacted_thinking"):
                raise _invalid(
                    f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. "
                    "When `thinking` is enabled, a final `assistant` message must start with a thinking block "
                    "(preceeding the lastmost set of `tool_use` and `tool_result` blocks)."
                )

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            item: Reply | ReplyFn = unserved.unwrap(self._queue.popleft()) if self._queue else self.handler
        try:
            reply = item(body) if callable(item) else item
            if isinstance(reply, str):
                reply = text(reply)
            if not isinstance(reply, dict) or not ("content" in reply or "error" in reply):
                raise TypeError(f"a fake reply must be a dict with 'content' or 'error', got {reply!r}")
        except Exception as exc:
            with self._lock:
                self.handler_errors.append(exc)
            raise ApiError(500, "api_error", f"fake reply failed: {exc!r}", {"x-should-retry": "false"}) from exc
        return reply

    def _answer_messages(self, body: dict[str, Any], record: RecordedRequest) -> _HttpAnswer:
        validate_messages_request(body)
        self._check_thinking_kept(body)
        reply = self._next_reply(body)
        delay = float(reply.get("delay") or 0)
        if body.get("stream") and "error" not in reply:
            message = self._build_message(body, reply)
            sse_type = "text/event-stream; charset=utf-8"
            return 200, self._paced_stream(message, reply, record, delay), sse_type, {"cache-control": "no-cache"}
        if delay and self._stopping.wait(delay):
            raise ApiError(503, "api_error", "fake server shutting down")
        if "error" in reply:
            err = reply["error"]
            headers: dict[str, str] = {}
            if err.get("retry_after") is not None:
                headers["retry-after"] = str(err["retry_after"])
            if err.get("should_retry") is not None:
                headers["x-should-retry"] = "true" if err["should_retry"] else "false"
            raise ApiError(int(err["status"]), str(err["type"]), str(err["message"]), headers)

        message = self._build_message(body, reply)
        words = sum(len(_words(b["text"])) for b in message["content"] if b["type"] == "text")
        token_delay = float(reply.get("token_delay", self.token_delay) or 0)
        if words and token_delay:  # the same model, unstreamed: its words are written before anything is sent
            record.first_token_at = time.monotonic()
            if self._stopping.wait(token_delay * (words - 1)):
                raise ApiError(503, "api_error", "fake server shutting down")
            record.last_token_at = time.monotonic()
        return 200, _canonical(message).encode(), "application/json", {}

    def _paced_stream(
        self, message: dict[str, Any], reply: Reply, record: RecordedRequest, delay: float
    ) -> Iterator[bytes]:
        """The SSE events of `message`, written as a model would produce them: word by word, with delays."""
        token_delay = float(reply.get("token_delay", self.token_delay) or 0)
        before_last = reply.get("before_last_token")
        before_break = reply.get("before_break")
        cut_after, garbled_after = reply.get("cut_after"), reply.get("garbled_after")
        words = sum(len(_words(b["text"])) for b in message["content"] if b["type"] == "text")
        written = 0
        for index, event in enumerate(_sse_events(message)):
            if index == 2 and delay and self._stopping.wait(delay):  # after message_start and ping: time to first token
                return
            delta = event[1].get("delta") if event[0] == "content_block_delta" else None
            if delta and delta.get("type") == "text_delta":
                if written and token_delay and self._stopping.wait(token_delay):
                    return
                if written and reply.get("stream_error"):
                    yield _sse_event("error", error=reply["stream_error"]).encode()
                    return
                if written in (cut_after, garbled_after) and callable(before_break):
                    before_break()
                if written == cut_after:  # the connection closes cleanly: no message_delta, no message_stop
                    return
                if written == garbled_after:  # this word's event, its JSON cut in the middle
                    garbled_after = None
                    yield _sse_event(event[0], **event[1])[:-12].encode() + b"\n\n"
                    written += 1
                    continue
                written += 1
                if written == words and callable(before_last):
                    before_last()
                now = time.monotonic()
                record.first_token_at = record.first_token_at or now
                record.last_token_at = now
            yield _sse_event(event[0], **event[1]).encode()

    def _build_message(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for block in reply["content"]:
            block = dict(block)
            if block.get("type") == "tool_use" and not block.get("id"):
                block["id"] = self._next_id("toolu_fake_")
            if block.get("type") == "thinking":
                block["signature"] = signature_of(block["thinking"])
            content.append(block)
        if content and content[0].get("type") == "thinking":  # its tool calls' turn must come back with it
            with self._lock:
                self._thought_calls.update(b["id"] for b in content if b.get("type") == "tool_use")
        cache = self.cache.account(body)
        usage: dict[str, Any] = {
            "input_tokens": cache.input_tokens,
            "cache_creation_input_tokens": cache.cache_creation_input_tokens,
            "cache_read_input_tokens": cache.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": cache.ephemeral_5m_input_tokens,
                "ephemeral_1h_input_tokens": cache.ephemeral_1h_input_tokens,
            },
            "output_tokens": estimate_tokens(content) if content else 1,
            "service_tier": "standard",
        }
        usage.update(reply.get("usage") or {})
        return {
            "id": self._next_id("msg_fake_"),
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": reply.get("stop_reason", "end_turn"),
            "stop_sequence": reply.get("stop_sequence"),
            "usage": usage,
        }


def _sse_event(event_type: str, **fields: Any) -> str:
    return f"event: {event_type}\ndata: {_canonical({'type': event_type, **fields})}\n\n"


def _words(text: str) -> list[str]:
    """A text as the model's tokens: one word (with the spaces before it) at a time."""
    return re.findall(r"\s*\S+|\s+", text)


def _block_deltas(block: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A content block as streamed: its empty starting form and the deltas that fill it."""
    if block["type"] == "text":
        return {**block, "text": ""}, [{"type": "text_delta", "text": word} for word in _words(block["text"])]
    if block["type"] == "thinking":
        pieces = _words(block["thinking"]) or [""]
        deltas = [{"type": "thinking_delta", "thinking": piece} for piece in pieces]
        return {"type": "thinking", "thinking": "", "signature": ""}, [
            *deltas,
            {"type": "signature_delta", "signature": block["signature"]},
        ]
    if block["type"] == "tool_use":
        whole = _canonical(block["input"])  # in pieces, as the API streams it
        pieces = [whole[i : i + 16] for i in range(0, len(whole), 16)] or [""]
        return {**block, "input": {}}, [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
    return block, []


def _sse_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A finished message as the (event type, fields) sequence the streaming API sends."""
    usage = message["usage"]
    opening = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"message": {**opening, "usage": {**usage, "output_tokens": 1}}}),
        ("ping", {}),
    ]
    for index, block in enumerate(message["content"]):
        start_block, deltas = _block_deltas(block)
        events.append(("content_block_start", {"index": index, "content_block": start_block}))
        events.extend(("content_block_delta", {"index": index, "delta": delta}) for delta in deltas)
        events.append(("content_block_stop", {"index": index}))
    final_usage = {
        key: usage[key]
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
        if key in usage
    }
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]}
    events.append(("message_delta", {"delta": stop, "usage": final_usage}))
    events.append(("message_stop", {}))
    return events


# --------------------------------------------------------------------------- pytest fixture


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """A running :class:`FakeAnthropic`; fails the test if a scripted callable raised."""
    with FakeAnthropic() as fake:
        yield fake
        errors = list(fake.handler_errors)
    assert not errors, f"fake Anthropic reply callables raised: {errors!r}"
