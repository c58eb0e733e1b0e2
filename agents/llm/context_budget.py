"""Keeping a worker's conversation inside the model's context window.

`fit_messages` is pure: when the conversation nears the window, it returns a copy in which the oldest tool results
are replaced by short stubs (what was read or run, and how to get it again); the newest results stay whole.
`create_within_window` applies it before a request and, when the API still answers "prompt is too long", stubs
harder and retries once; a second refusal goes up to the caller (explain_api_error says it truthfully).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anthropic

NEAR_WINDOW = 0.75  # start stubbing when the estimate passes this share of the window
TARGET = 0.5  # ... and stub until it is below this share
KEEP_RECENT = 4  # the newest tool results are never stubbed
STUB_MIN_CHARS = 400  # results shorter than this are not worth a stub
CHARS_PER_TOKEN = 3.5  # conservative: JSON, code and logs tokenise densely


def estimate_request_tokens(messages: list[dict[str, Any]]) -> int:
    return int(len(json.dumps(messages, ensure_ascii=False)) / CHARS_PER_TOKEN)


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


def fit_messages(messages: list[dict[str, Any]], window_tokens: int, *, force: bool = False) -> list[dict[str, Any]]:
    """`messages` as they are when they fit; else a copy with the oldest tool results (but the newest
    KEEP_RECENT) stubbed until the estimate is under TARGET of the window. `force` (the API said the prompt is too
    long) stubs to half that target, sparing only the newest result."""
    estimate = estimate_request_tokens(messages)
    if not force and estimate <= window_tokens * NEAR_WINDOW:
        return messages
    calls = _calls(messages)
    positions = [
        (i, j)
        for i, m in enumerate(messages)
        if m["role"] == "user" and isinstance(m["content"], list)
        for j, b in enumerate(m["content"])
        if b.get("type") == "tool_result"
    ]
    keep = 1 if force else KEEP_RECENT  # after a 'too long' refusal only the newest result stays whole
    candidates = positions[:-keep] if len(positions) > keep else []
    out = [
        {"role": m["role"], "content": list(m["content"]) if isinstance(m["content"], list) else m["content"]}
        for m in messages
    ]
    target = window_tokens * (TARGET if not force else TARGET / 2)
    for i, j in candidates:
        if estimate <= target:
            break
        block = out[i]["content"][j]
        size = _size(block.get("content", ""))
        if size < STUB_MIN_CHARS or str(block.get("content", "")).startswith("[result removed to save context"):
            continue
        name, arguments = calls.get(block.get("tool_use_id", ""), ("a tool", {}))
        stub = stub_for(name, arguments, size)
        out[i]["content"][j] = {**block, "content": stub}
        estimate -= int((size - len(stub)) / CHARS_PER_TOKEN)
    return out


def is_prompt_too_long(err: BaseException) -> bool:
    return isinstance(err, anthropic.BadRequestError) and "prompt is too long" in str(err).lower()


class HasConversation(Protocol):
    messages: list[dict[str, Any]]


async def create_within_window(
    worker: HasConversation, window: int, request: Callable[[], Awaitable[anthropic.types.Message]]
) -> anthropic.types.Message:
    """Fit the worker's conversation to its `window` (tokens), send `request()`; on 'prompt is too long', stub
    harder, retry once."""
    worker.messages = fit_messages(worker.messages, window)
    try:
        return await request()
    except anthropic.BadRequestError as err:
        if not is_prompt_too_long(err):
            raise
        worker.messages = fit_messages(worker.messages, window, force=True)
        return await request()
