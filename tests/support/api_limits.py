"""A model with the Messages API's limits: a 400 "prompt is too long" when a request's real token count passes the
window, a 413 when the request passes 32 MB; what it answers comes from a strict script."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx

from agents.llm import prompts
from tests.scripted import say

WINDOW = 200_000  # the orchestrator's and workers' model (claude-sonnet-4-6): 200k tokens
REQUEST_MAX_BYTES = 32 * 1024 * 1024  # the Messages API refuses a larger request with 413 request_too_large
TOO_LONG = "prompt is too long: {} tokens > {} maximum"
SUMMARY = "Summary: the user and the bot talked at length."


def _request() -> httpx.Request:
    return httpx.Request("POST", "https://api.anthropic.com/v1/messages")


def too_long(tokens: int, window: int = WINDOW) -> anthropic.BadRequestError:
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": TOO_LONG.format(tokens, window)}}
    return anthropic.BadRequestError(
        f"Error code: 400 - {json.dumps(body)}", response=httpx.Response(400, request=_request()), body=body
    )


def too_large() -> anthropic.APIStatusError:
    body = {"type": "error", "error": {"type": "request_too_large", "message": "Request exceeds the maximum size"}}
    return anthropic.APIStatusError(
        f"Error code: 413 - {json.dumps(body)}", response=httpx.Response(413, request=_request()), body=body
    )


def text_tokens(text: str) -> int:
    """The API's count, roughly: an ASCII character about 2/7 of a token (3.5 characters a token, as code), a CJK
    character about one token (Claude's tokenizer gives Chinese and Japanese about a token a character)."""
    wide = sum(1 for ch in text if ord(ch) > 0x2E7F)
    return wide + (len(text) - wide) * 2 // 7


def real_tokens(params: dict[str, Any], pdf_pages: dict[str, int]) -> int:
    """The request as the API counts it; a PDF by its real pages (`pdf_pages`: its base64 → pages), 2,300 each."""
    system = params.get("system")
    total = text_tokens(system if isinstance(system, str) else json.dumps(system, ensure_ascii=False))
    total += text_tokens(json.dumps(params.get("tools") or [], ensure_ascii=False))

    def block(b: Any) -> int:
        if isinstance(b, str):
            return text_tokens(b)
        kind = b.get("type")
        if kind == "text":
            return text_tokens(b["text"])
        if kind == "document":
            data = (b.get("source") or {}).get("data") or ""
            if data in pdf_pages:
                return pdf_pages[data] * 2_300
            return text_tokens(data) if (b.get("source") or {}).get("type") == "text" else 2_000
        if kind == "image":
            return 1_600
        if kind == "tool_result":
            inner = b.get("content")
            return sum(block(x) for x in ([inner] if isinstance(inner, str) else inner or []))
        return text_tokens(json.dumps(b, ensure_ascii=False))

    for m in params["messages"]:
        content = m["content"]
        total += text_tokens(content) if isinstance(content, str) else sum(block(b) for b in content)
    return total


class LimitedModel:
    """A `MessageModel` with the API's limits. A request within them is answered from `script` (a reply, or a
    callable of the request giving one), and its usage says its real input tokens, as the API's does; a request
    past the script fails the test. The compactor's requests (the COMPACTOR system prompt) get a summary."""

    def __init__(
        self,
        script: list[Any] | None = None,
        pdf_pages: dict[str, int] | None = None,
        window: int = WINDOW,
        request_max_bytes: int = REQUEST_MAX_BYTES,
    ) -> None:
        self.script = list(script or [])
        self.pdf_pages = pdf_pages or {}
        self.window = window
        self.request_max_bytes = request_max_bytes
        self.calls: list[dict[str, Any]] = []  # every request, the refused ones too
        self.answered: list[dict[str, Any]] = []  # the requests answered from the script
        self.refused: list[str] = []  # "413" or "too long", one for each refused request

    async def create(self, **params: Any) -> anthropic.types.Message:
        self.calls.append(params)
        if len(json.dumps(params, ensure_ascii=False).encode()) > self.request_max_bytes:
            self.refused.append("413")
            raise too_large()
        tokens = real_tokens(params, self.pdf_pages)
        if tokens > self.window:
            self.refused.append("too long")
            raise too_long(tokens, self.window)
        if params.get("system") == prompts.COMPACTOR:
            return say(SUMMARY, input_tokens=tokens)
        if not self.script:
            raise AssertionError(f"an unexpected request: {json.dumps(params['messages'])[-300:]}")
        self.answered.append(params)
        reply = self.script.pop(0)
        reply = reply(params) if callable(reply) else reply
        return reply.model_copy(update={"usage": reply.usage.model_copy(update={"input_tokens": tokens})})

    def stream(self, **params: Any) -> Any:
        raise AssertionError("a request streamed: these turns have no answer stream")
