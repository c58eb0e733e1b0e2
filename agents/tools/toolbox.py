"""Tools as the model sees them: a schema, a handler, and an audited call that turns failures (`ToolError`, whose
message is written for the model) into readable errors."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, overload

from agents.core.errors import ToolError
from agents.core.models import ToolCallRecord
from agents.core.secrets_filter import OFF_LOOP_CHARS, SecretsFilter
from agents.core.text import keep_head_and_tail
from agents.store.database import Store

log = logging.getLogger(__name__)


@overload
def masked(secrets: SecretsFilter, content: str) -> str: ...
@overload
def masked(secrets: SecretsFilter, content: list[dict[str, Any]]) -> list[dict[str, Any]]: ...
def masked(secrets: SecretsFilter, content: str | list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """`secrets.mask_json` of a tool result's or a user turn's content, typed as what it is: the filter keeps the
    shape it is given (a string stays a string, a list of content blocks a list of blocks)."""
    out = secrets.mask_json(content)
    if not isinstance(out, str | list):
        raise TypeError(f"mask_json changed a {type(content).__name__} into a {type(out).__name__}")
    return out


Handler = Callable[..., Awaitable[Any]]


MAX_RESULT_CHARS = 60_000  # a longer tool result keeps its head and tail (bounded worker context)
# A result of content blocks (an MCP tool's text beside pictures) is capped as a whole: its text together within the
# same limit as a plain result, and at most this many pictures of at most this much base64 together (a screenshot
# tool returns two; the API refuses a request over 32 MB).
MAX_RESULT_PICTURES = 4
MAX_RESULT_PICTURE_BASE64 = 12 * 1024 * 1024


@dataclass
class ToolResult:
    """What goes back to the model in a tool_result block."""

    content: str | list[dict[str, Any]]
    is_error: bool = False

    def block(self, tool_use_id: str) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": self.content}
        if self.is_error:
            block["is_error"] = True
        return block

    @property
    def size(self) -> int:
        return len(self.content) if isinstance(self.content, str) else len(json.dumps(self.content))


def cap_blocks(blocks: list[dict[str, Any]], max_chars: int, name: str) -> list[dict[str, Any]]:
    """Content blocks capped as a whole: their text (text blocks and any other non-picture block, measured as
    JSON) within `max_chars` together, the block that crosses it keeping its head and tail and later ones left out;
    pictures and documents within MAX_RESULT_PICTURES and MAX_RESULT_PICTURE_BASE64 together. What is left out is
    said in a text block."""
    kept: list[dict[str, Any]] = []
    chars_left, pictures, picture_bytes, dropped_text, dropped_pictures = max_chars, 0, 0, 0, 0
    for block in blocks:
        if block.get("type") in ("image", "document"):
            size = len(json.dumps(block.get("source", {})))
            if pictures < MAX_RESULT_PICTURES and picture_bytes + size <= MAX_RESULT_PICTURE_BASE64:
                pictures, picture_bytes = pictures + 1, picture_bytes + size
                kept.append(block)
            else:
                dropped_pictures += 1
            continue
        text = block.get("text") if block.get("type") == "text" else None
        size = len(text) if isinstance(text, str) else len(json.dumps(block))
        if size <= chars_left:
            chars_left -= size
            kept.append(block)
        elif isinstance(text, str) and chars_left >= 1_000:
            kept.append({**block, "text": keep_head_and_tail(text, chars_left, f"{name} result")})
            chars_left = 0
        else:
            dropped_text += size
    if dropped_text or dropped_pictures:
        left_out = []
        if dropped_text:
            left_out.append(f"{dropped_text:,} characters of text")
        if dropped_pictures:
            left_out.append(f"{dropped_pictures} picture(s)")
        kept.append(
            {
                "type": "text",
                "text": f"[{' and '.join(left_out)} of this {name} result left out: a result is capped as a whole "
                f"at {max_chars:,} characters of text and {MAX_RESULT_PICTURES} pictures]",
            }
        )
    return kept


@dataclass
class Tool:
    name: str
    description: str
    properties: dict[str, Any]
    handler: Handler
    required: list[str] = field(default_factory=list)
    schema: dict[str, Any] | None = None  # a whole input schema given from outside (an MCP server's tool)
    read_only: bool = False  # changes nothing: several such calls of one turn run at the same time (tool_loop.py)

    def spec(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.schema or {"type": "object", "properties": self.properties, "required": self.required},
        }


def prop(kind: str, description: str, **extra: Any) -> dict[str, Any]:
    """A JSON-schema property."""
    return {"type": kind, "description": description, **extra}


@dataclass
class Audit:
    """Who is calling: where tool calls are recorded."""

    store: Store | None
    agent: str
    chat_id: int | None = None
    task_id: int | None = None


def summarize_arguments(arguments: dict[str, Any], limit: int = 300) -> str:
    parts = []
    for key, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value)
        if len(text) > 80:
            text = f"{text[:77]}… ({len(text)} chars)"
        parts.append(f"{key}={text}")
    summary = ", ".join(parts)
    return summary if len(summary) <= limit else summary[: limit - 1] + "…"


class Toolbox:
    """A named set of tools; `call` runs one, records it, and never raises for a tool's own failure."""

    def __init__(
        self, tools: list[Tool], audit: Audit, secrets: SecretsFilter, max_result_chars: int = MAX_RESULT_CHARS
    ) -> None:
        """`secrets`: the process's output filter; every result and error a tool gives passes it."""
        self.tools = {t.name: t for t in tools}
        self.audit = audit
        self.secrets = secrets
        self.max_result_chars = max_result_chars

    def specs(self) -> list[dict[str, Any]]:
        return [t.spec() for t in self.tools.values()]

    async def call(
        self, name: str, arguments: dict[str, Any], recorded_after: asyncio.Event | None = None
    ) -> ToolResult:
        """Run tool `name` and record the call; `recorded_after`: calls of one turn that run at once are recorded in
        the order the model made them (each record waits for the one before it)."""
        started = time.monotonic()
        error: str | None = None
        tool = self.tools.get(name)
        try:
            if tool is None:
                raise ToolError(f"unknown tool {name!r}; available: {', '.join(self.tools)}")
            missing = [r for r in tool.required if r not in arguments]
            if missing:
                raise ToolError(f"missing argument(s): {', '.join(missing)}")
            value = await tool.handler(**arguments)
            result = value if isinstance(value, ToolResult) else ToolResult(str(value))
        except ToolError as err:
            error = str(err)
            result = ToolResult(f"Error: {err}", is_error=True)
        except (TypeError, ValueError) as err:  # unexpected/ill-typed arguments from the model
            error = str(err)
            result = ToolResult(f"Error: bad arguments for {name}: {err}", is_error=True)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # an unexpected failure is reported to the model, never a crashed turn or task
            log.exception("tool %s failed", name)
            error = f"{type(err).__name__}: {err}"
            result = ToolResult(f"Error: {name} failed: {error}", is_error=True)
        # the one output filter: nothing a tool returns reaches a model with a known secret in it
        if result.size > OFF_LOOP_CHARS:  # CPU work (5-9 ms per 64 KB, bench/secret_filter.py): off the loop
            result = dataclasses.replace(result, content=await asyncio.to_thread(masked, self.secrets, result.content))
        else:
            result = dataclasses.replace(result, content=masked(self.secrets, result.content))
        if isinstance(result.content, str) and len(result.content) > self.max_result_chars:
            result = ToolResult(
                keep_head_and_tail(result.content, self.max_result_chars, f"{name} result"), result.is_error
            )
        elif isinstance(result.content, list):
            result = ToolResult(cap_blocks(result.content, self.max_result_chars, name), result.is_error)
        duration_ms = int((time.monotonic() - started) * 1000)
        if result.is_error and error is None:
            error = result.content if isinstance(result.content, str) else "error"
        error = self.secrets.mask(error) if error else None
        if recorded_after is not None:
            await recorded_after.wait()
        if self.audit.store is not None:
            await self.audit.store.record_tool_call(
                ToolCallRecord(
                    chat_id=self.audit.chat_id,
                    task_id=self.audit.task_id,
                    agent=self.audit.agent,
                    tool=name,
                    arguments=summarize_arguments(arguments),
                    result_chars=result.size,
                    duration_ms=duration_ms,
                    error=error[:500] if error else None,
                )
            )
        log.info(
            "tool %s by %s (task %s) %dms%s",
            name,
            self.audit.agent,
            self.audit.task_id,
            duration_ms,
            f" error: {error[:120]}" if error else "",
        )
        return result
