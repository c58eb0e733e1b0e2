"""Keeping a tool loop's conversation (a worker's, a chat turn's) inside the model's context window.

`fit_messages` is pure: when the conversation nears the window, it returns a copy in which the oldest tool results
are replaced by short stubs (what was read or run, and how to get it again), and the long arguments of the oldest
tool calls (a file's content written whole) by a few words; the newest results and calls stay whole.
`create_within_window` applies it before a request and, when the API still answers "prompt is too long", stubs
harder and retries once; a second refusal goes up to the caller (explain_api_error says it truthfully).

How near the window a conversation is comes first from the API's own figures: the last answer's usage says how many
input tokens the request it answered had (system prompt, tools, pictures and documents all counted as the model
counts them); only what was added since is estimated here. Without such a figure (the first request) the whole
request is estimated: text by its length, a picture by its size in pixels as the API scales and bills it
(width × height / 750 tokens, after scaling to at most 1568 px on the long edge and about 1.15 megapixels), a PDF
by its pages (each page is billed as a picture plus its text).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anthropic

from agents.inputs.pdf_pages import pdf_pages

NEAR_WINDOW = 0.75  # start stubbing when the estimate passes this share of the window
TARGET = 0.5  # ... and stub until it is below this share
KEEP_RECENT = 4  # the newest tool results are never stubbed
STUB_MIN_CHARS = 400  # results shorter than this are not worth a stub
CHARS_PER_TOKEN = 3.5  # conservative: code and logs tokenise densely
IMAGE_MAX_EDGE = 1568  # the API scales a picture down to this long edge ...
IMAGE_MAX_PIXELS = 1_150_000  # ... and to about this many pixels
PIXELS_PER_TOKEN = 750
IMAGE_UNKNOWN_TOKENS = 1_600  # a picture whose size cannot be read (a URL source): the most one costs
PDF_PAGE_TOKENS = 2_000  # a page's picture (about 1,500) and a typical page's text
BLOCK_OVERHEAD_TOKENS = 5  # the few tokens each block's framing costs


def text_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def image_tokens(width: int, height: int) -> int:
    """What a picture of `width` × `height` pixels costs once the API has scaled it down to its limits."""
    if width <= 0 or height <= 0:
        return IMAGE_UNKNOWN_TOKENS
    scale = min(1.0, IMAGE_MAX_EDGE / max(width, height), math.sqrt(IMAGE_MAX_PIXELS / (width * height)))
    return max(1, math.ceil(width * scale * (height * scale) / PIXELS_PER_TOKEN))


def image_size(head: bytes) -> tuple[int, int] | None:
    """(width, height) from the first bytes of a PNG, GIF, JPEG or WebP file; None when they do not say."""
    if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24:
        return struct.unpack(">II", head[16:24])
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        return struct.unpack("<HH", head[6:10])
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP" and len(head) >= 30:
        chunk = head[12:16]
        if chunk == b"VP8X":
            return 1 + int.from_bytes(head[24:27], "little"), 1 + int.from_bytes(head[27:30], "little")
        if chunk == b"VP8L":
            bits = int.from_bytes(head[21:25], "little")
            return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
        if chunk == b"VP8 ":
            w, h = struct.unpack("<HH", head[26:30])
            return w & 0x3FFF, h & 0x3FFF
    if head.startswith(b"\xff\xd8"):
        return _jpeg_size(head)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill bytes before a marker
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame: height, then width
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        i += 2 + length
    return None


HEAD_BASE64_CHARS = 87_384  # the first 64 KB of a file: where a picture's size is written (a JPEG's after its EXIF)


def _decoded(data: str, whole: bool) -> bytes:
    try:
        return base64.b64decode(data if whole else data[:HEAD_BASE64_CHARS], validate=False)
    except (binascii.Error, ValueError):
        return b""


PDF_COUNTS_KEPT = 64
_pdf_counts: dict[tuple[int, int], int] = {}  # (length, hash) of a PDF's base64 → its pages


def _pdf_pages_of(data: str) -> int:
    """A base64 PDF's pages. Each request of a conversation is estimated again, with the same documents in it:
    their counts are kept (by the text's length and hash, which Python keeps with the string) so a document is
    decoded and read once, not once per request."""
    key = (len(data), hash(data))
    pages = _pdf_counts.get(key)
    if pages is None:
        pages = pdf_pages(_decoded(data, whole=True))
        if len(_pdf_counts) >= PDF_COUNTS_KEPT:
            _pdf_counts.pop(next(iter(_pdf_counts)))
        _pdf_counts[key] = pages
    return pages


def media_tokens(block: dict[str, Any]) -> int:
    """An image or document block at its cost to the model."""
    source = block.get("source") or {}
    if source.get("type") == "text":  # a plain-text document: its text
        return text_tokens(str(source.get("data") or ""))
    data = source.get("data") if source.get("type") == "base64" else None
    if block.get("type") == "image":
        size = image_size(_decoded(data, whole=False)) if isinstance(data, str) else None
        return image_tokens(*size) if size else IMAGE_UNKNOWN_TOKENS
    if isinstance(data, str) and source.get("media_type") == "application/pdf":
        return _pdf_pages_of(data) * PDF_PAGE_TOKENS
    if isinstance(data, str):  # a plain-text document
        return text_tokens(data)
    return PDF_PAGE_TOKENS


def block_tokens(block: Any) -> int:
    """One content block (text, tool call, tool result, thinking, picture, document) at its estimated cost."""
    if isinstance(block, str):
        return text_tokens(block)
    if not isinstance(block, dict):
        return text_tokens(json.dumps(block, ensure_ascii=False, default=str))
    kind = block.get("type")
    if kind == "text":
        return BLOCK_OVERHEAD_TOKENS + text_tokens(block.get("text", ""))
    if kind in ("image", "document"):
        return media_tokens(block)
    if kind == "tool_result":
        content = block.get("content", "")
        inner = [content] if isinstance(content, str) else list(content or [])
        return BLOCK_OVERHEAD_TOKENS + sum(block_tokens(b) for b in inner)
    if kind == "tool_use":
        return BLOCK_OVERHEAD_TOKENS + text_tokens(block.get("name", "") + json.dumps(block.get("input") or {}))
    if kind == "thinking":
        return BLOCK_OVERHEAD_TOKENS + text_tokens(block.get("thinking", ""))
    return BLOCK_OVERHEAD_TOKENS + text_tokens(json.dumps(block, ensure_ascii=False, default=str))


def messages_tokens(messages: list[dict[str, Any]]) -> int:
    total = 0
    for m in messages:
        content = m["content"]
        total += BLOCK_OVERHEAD_TOKENS + (
            text_tokens(content) if isinstance(content, str) else sum(block_tokens(b) for b in content)
        )
    return total


def fixed_tokens(system: str, tools: list[dict[str, Any]]) -> int:
    """The system prompt and the tools' definitions: sent with every request."""
    return text_tokens(system) + text_tokens(json.dumps(tools, ensure_ascii=False))


def estimate_request_tokens(
    messages: list[dict[str, Any]], fixed: int = 0, measured: tuple[int, int] | None = None
) -> int:
    """The request's input tokens: the API's count of the last request (`measured`: how many messages it had, its
    tokens) plus an estimate of the messages added since; without it, `fixed` (system and tools) and every message."""
    if measured is not None and 0 < measured[0] <= len(messages):
        return measured[1] + messages_tokens(messages[measured[0] :])
    return fixed + messages_tokens(messages)


def _calls(messages: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    """tool_use id → (tool name, arguments), from the assistant turns."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for m in messages:
        if m["role"] == "assistant" and isinstance(m["content"], list):
            for b in m["content"]:
                if b.get("type") == "tool_use":
                    calls[b["id"]] = (b.get("name", "?"), dict(b.get("input") or {}))
    return calls


def _size(content: Any) -> int:
    return len(content) if isinstance(content, str) else len(json.dumps(content, ensure_ascii=False))


def stub_for(name: str, arguments: dict[str, Any], size: int) -> str:
    """A few words standing in for a result: what it was, and how to get it again."""
    if name == "read_file":
        where = f"read_file {arguments.get('path', '?')}"
        if arguments.get("offset") or arguments.get("start_line"):
            where += f" from line {arguments.get('offset') or arguments.get('start_line')}"
        again = "read the file again if you need it (it may have changed since)"
    elif name == "run_command":
        where = f"run_command `{str(arguments.get('command', '?'))[:120]}`"
        again = "re-run it, or a narrower command, if you need the output"
    else:
        shown = ", ".join(f"{k}={str(v)[:60]}" for k, v in arguments.items())
        where = f"{name}({shown})"
        again = "call it again if you need it"
    return f"[result removed to save context: {where} returned {size:,} characters; {again}]"


INPUT_STUB_PREFIX = "[removed to save context:"


def _stub_inputs(value: Any) -> Any:
    """A tool call's arguments with each long string (a written file's content, an edit's new text) replaced by a
    few words; the other values, and the call's id and name, stay (its result still pairs with it)."""
    if isinstance(value, str) and len(value) >= STUB_MIN_CHARS:
        return f"{INPUT_STUB_PREFIX} {len(value):,} characters, already sent]"
    if isinstance(value, dict):
        return {k: _stub_inputs(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stub_inputs(v) for v in value]
    return value


def fit_messages(
    messages: list[dict[str, Any]],
    window_tokens: int,
    *,
    force: bool = False,
    fixed: int = 0,
    measured: tuple[int, int] | None = None,
) -> list[dict[str, Any]]:
    """`messages` as they are when they fit; else a copy with the oldest tool results and the long arguments of the
    oldest tool calls (a file written whole is as big as one read; the newest KEEP_RECENT of each stay) stubbed
    until the estimate is under TARGET of the window. `force` (the API said the prompt is too long) stubs to half
    that target, sparing only the newest of each. `fixed` and `measured`: as `estimate_request_tokens` takes them."""
    estimate = estimate_request_tokens(messages, fixed, measured)
    if not force and estimate <= window_tokens * NEAR_WINDOW:
        return messages
    calls = _calls(messages)
    results, uses = [], []
    for i, m in enumerate(messages):
        if not isinstance(m["content"], list):
            continue
        for j, b in enumerate(m["content"]):
            if m["role"] == "user" and b.get("type") == "tool_result":
                results.append((i, j))
            elif m["role"] == "assistant" and b.get("type") == "tool_use":
                uses.append((i, j))
    keep = 1 if force else KEEP_RECENT  # after a 'too long' refusal only the newest result and call stay whole
    older = [positions[:-keep] if len(positions) > keep else [] for positions in (results, uses)]
    out = [
        {"role": m["role"], "content": list(m["content"]) if isinstance(m["content"], list) else m["content"]}
        for m in messages
    ]
    target = window_tokens * (TARGET if not force else TARGET / 2)
    for i, j in sorted(older[0] + older[1]):  # oldest first
        if estimate <= target:
            break
        block = out[i]["content"][j]
        if block.get("type") == "tool_use":
            stubbed = {**block, "input": _stub_inputs(block.get("input") or {})}
            if stubbed["input"] == block.get("input"):
                continue
        else:
            size = _size(block.get("content", ""))
            if size < STUB_MIN_CHARS or str(block.get("content", "")).startswith("[result removed to save context"):
                continue
            name, arguments = calls.get(block.get("tool_use_id", ""), ("a tool", {}))
            stubbed = {**block, "content": stub_for(name, arguments, size)}
        out[i]["content"][j] = stubbed
        estimate -= block_tokens(block) - block_tokens(stubbed)
    return out


def is_prompt_too_long(err: BaseException) -> bool:
    return isinstance(err, anthropic.BadRequestError) and "prompt is too long" in str(err).lower()


def is_request_too_big(err: BaseException) -> bool:
    """The API refused the request for its size: too many tokens (400 "prompt is too long"), or too many bytes
    (413 request_too_large: past 32 MB, mostly photos and files). Neither passes by itself: only a smaller request."""
    return is_prompt_too_long(err) or (isinstance(err, anthropic.APIStatusError) and err.status_code == 413)


class HasConversation(Protocol):
    messages: list[dict[str, Any]]
    measured: tuple[int, int] | None  # the API's count of the last request: (its messages, its input tokens)


async def create_within_window(
    worker: HasConversation,
    window: int,
    request: Callable[[], Awaitable[anthropic.types.Message]],
    fixed: int = 0,
) -> anthropic.types.Message:
    """Fit the worker's conversation to its `window` (tokens), send `request()`; on 'prompt is too long', stub
    harder, retry once. `fixed`: the system prompt's and tools' tokens, for an estimate without the API's count."""
    worker.messages = fit_messages(worker.messages, window, fixed=fixed, measured=worker.measured)
    try:
        return await request()
    except anthropic.BadRequestError as err:
        if not is_prompt_too_long(err):
            raise
        worker.messages = fit_messages(worker.messages, window, force=True, fixed=fixed, measured=worker.measured)
        return await request()
