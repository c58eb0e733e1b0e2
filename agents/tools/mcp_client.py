"""MCP servers in the tool loop: a worker's tools can come from MCP servers, through the official `mcp` SDK.

One `McpSession` is one server for one task. A stdio server is started inside the task's sandbox and network namespace
(`agents.sandbox.services.start_sandboxed_stdio`) and spoken to over its pipes (`process_transport`); a `url` server
(streamable HTTP) is reached by the bot itself. Its tools are offered as `mcp__<server>__<tool>` with their own input
schemas (`session_tools`); a call's text and images go back to the model, and the images also to the chat. A
session whose tools are known beforehand (`defer`: the browser's, as an earlier start listed them) starts its server
at the first call instead.

Nothing an MCP server does ends a task by itself: a server that does not start becomes one stand-in tool whose every
call answers why (one sentence); a tool's own error, a timeout or a server that dies mid-call is one sentence to the
model (ToolError), and a dead server is started again at the next call (at most `MAX_RESTARTS` times a task).
Every session of a task is closed with it (`TaskBounds.closers`): the stdio server's sandbox dies with the task anyway.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:  # the mcp SDK costs ~0.5 s to import: only a task with MCP servers (or the browser) loads it
    import mcp_types
    from mcp import Client
    from mcp.shared.message import SessionMessage

from agents.core.errors import ToolError
from agents.core.text import keep_head_and_tail
from agents.tools.mcp_config import McpServerConfig, tool_name
from agents.tools.toolbox import Tool, ToolResult

log = logging.getLogger(__name__)

MAX_RESTARTS = 2
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})  # what the Messages API takes
MAX_IMAGE_BASE64 = 5 * 1024 * 1024  # the API's limit for one image
DESCRIPTION_CHARS = 4000
_READ_CHUNK = 1 << 16

Target = Any  # what mcp.Client connects to: a transport (an async context manager of two streams) or a URL
Connector = Callable[[], Awaitable[tuple[Target, asyncio.subprocess.Process | None]]]
# before a call of (tool, arguments, asks): raises ToolError to refuse it; `asks`: the owner must allow the call
Gate = Callable[[str, dict[str, Any], bool], Awaitable[None]]
PictureSink = Callable[[list[tuple[str, bytes]]], Awaitable[None]]


@dataclass(frozen=True)
class KnownTool:
    """A server's tool as an earlier start listed it (what a worker's toolbox needs of an mcp Tool): offered before
    the server runs, without loading the SDK."""

    name: str
    input_schema: dict[str, Any]
    description: str | None = None
    title: str | None = None


@contextlib.asynccontextmanager
async def process_transport(process: asyncio.subprocess.Process) -> AsyncIterator[tuple[Any, Any]]:
    """The MCP stdio framing (one JSON-RPC message a line) over a process the bot started itself (in its sandbox)."""
    import mcp_types
    from mcp.shared.message import SessionMessage

    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        assert process.stdout is not None
        buffer = b""
        async with to_session:
            while chunk := await process.stdout.read(_READ_CHUNK):  # no line limit: a screenshot is one long line
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        try:
                            message: SessionMessage | Exception = SessionMessage(
                                mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                            )
                        except ValueError as err:
                            message = err
                        await to_session.send(message)

    async def writer() -> None:
        assert process.stdin is not None
        async with from_session:
            async for message in from_session:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                try:
                    process.stdin.write(data.encode())
                    await process.stdin.drain()
                except (ConnectionError, OSError):
                    await to_session.aclose()  # the server is gone: the session sees the end, no call hangs
                    return

    async with anyio.create_task_group() as group:
        group.start_soon(reader)
        group.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            group.cancel_scope.cancel()


class McpSession:
    """One MCP server for one task: `start` lists its tools, `call` runs one, `close` ends it (with the task)."""

    def __init__(self, name: str, connect: Connector, start_timeout: float, call_timeout: float) -> None:
        self.name, self._connect = name, connect
        self.start_timeout, self.call_timeout = start_timeout, call_timeout
        self.client: Client | None = None
        self.process: asyncio.subprocess.Process | None = None
        self.tools: list[mcp_types.Tool] | list[KnownTool] = []
        self.restarts = 0
        self.deferred = False  # its tools were known beforehand (`defer`): the server starts at the first call
        self._holder: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()
        self._starting = asyncio.Lock()

    def defer(self, tools: list[KnownTool]) -> None:
        """Offer `tools` (a listing the server gave before) without starting it: the first call starts it."""
        self.tools, self.deferred = tools, True

    async def start(self) -> list[mcp_types.Tool]:
        """Start the server and list its tools; raises ToolError (one sentence) when it cannot."""
        ready: asyncio.Future[list[mcp_types.Tool]] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._holder = asyncio.create_task(self._hold(ready), name=f"mcp-{self.name}")
        try:
            async with asyncio.timeout(self.start_timeout):
                self.tools = listed = await asyncio.shield(ready)
        except TimeoutError:
            await self.close()
            raise ToolError(
                f"the MCP server {self.name} did not answer within {self.start_timeout:g} s of starting"
                f"{self._exit_note()}"
            ) from None
        except BaseException:
            await self.close()
            raise
        return listed

    async def _hold(self, ready: asyncio.Future[list[mcp_types.Tool]]) -> None:
        """The session lives in this task (the SDK's task groups are entered and left in one task)."""
        try:
            target, self.process = await self._connect()
            from mcp import Client

            async with Client(target, mode="legacy", cache=None, read_timeout_seconds=self.call_timeout) as client:
                tools: list[mcp_types.Tool] = []
                cursor: str | None = None
                while True:
                    listing = await client.list_tools(cursor=cursor)
                    tools += listing.tools
                    if not (cursor := listing.next_cursor):
                        break
                self.client = client
                ready.set_result(tools)
                await self._closing.wait()
        except Exception as err:
            if not ready.done():
                why = str(err) if isinstance(err, ToolError) else _why(err)
                ready.set_exception(ToolError(f"the MCP server {self.name} could not start: {why}{self._exit_note()}"))
            else:
                log.info("MCP server %s ended: %s", self.name, _why(err))
        finally:
            self.client = None

    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """One tool call; every failure is a ToolError of one sentence (a dead server is restarted next time)."""
        async with self._starting:  # two calls at once start one server
            if self.client is None and self.deferred:
                self.deferred = False
                await self.start()
            elif self.client is None:
                if self.restarts >= MAX_RESTARTS:
                    raise ToolError(f"the MCP server {self.name} stopped and is not started again in this task")
                self.restarts += 1
                await self.close()
                await self.start()
        client = self.client
        assert client is not None
        try:
            return await client.call_tool(tool, arguments, read_timeout_seconds=self.call_timeout)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            if await self._dead(err):
                await self.close()
                again = (
                    "it is started again at your next call to one of its tools"
                    if self.restarts < MAX_RESTARTS
                    else "it is not started again in this task"
                )
                raise ToolError(
                    f"the MCP server {self.name} stopped during {tool}{self._exit_note()}; {again}"
                ) from None
            raise ToolError(f"{tool} of the MCP server {self.name} failed: {_why(err)}") from None

    async def _dead(self, err: Exception) -> bool:
        """Whether the call failed because the server is gone (its pipe closed first: its exit is waited for)."""
        closed = "connection closed" in str(err).lower()
        if self.process is not None and (closed or self.process.returncode is not None):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2):
                    await self.process.wait()
            return self.process.returncode is not None
        return closed or self._holder is None or self._holder.done() or self.client is None

    def _exit_note(self) -> str:
        code = self.process.returncode if self.process is not None else None
        return f" (it exited with code {code})" if code is not None else ""

    async def close(self) -> None:
        """End the session and its process (a stdio server's whole sandbox)."""
        self._closing.set()
        if self._holder is not None:
            with contextlib.suppress(BaseException):
                async with asyncio.timeout(3):
                    await asyncio.shield(self._holder)
            if not self._holder.done():
                self._holder.cancel()
                with contextlib.suppress(BaseException):
                    await self._holder
        if self.process is not None:
            if self.process.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.process.pid, signal.SIGKILL)  # started in a session of its own: its group
                with contextlib.suppress(BaseException):
                    async with asyncio.timeout(5):
                        await self.process.wait()
            if self.process.stdin is not None:
                self.process.stdin.close()  # the pipe's transport is released now, not by the garbage collector
        self.client, self._holder = None, None


def _why(err: BaseException) -> str:
    """One line about an exception (an ExceptionGroup: its first leaf)."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def tool_result(result: mcp_types.CallToolResult, shown_as: str) -> tuple[ToolResult, list[tuple[str, bytes]]]:
    """An MCP tool result as a tool_result for the model (text and images) and the pictures for the chat."""
    import mcp_types  # loaded already: a result comes from a running server

    blocks: list[dict[str, Any]] = []
    pictures: list[tuple[str, bytes]] = []
    for item in result.content:
        if isinstance(item, mcp_types.TextContent):
            blocks.append({"type": "text", "text": item.text})
        elif isinstance(item, mcp_types.ImageContent):
            if item.mime_type in IMAGE_TYPES and len(item.data) <= MAX_IMAGE_BASE64:
                source = {"type": "base64", "media_type": item.mime_type, "data": item.data}
                blocks.append({"type": "image", "source": source})
                pictures.append((shown_as, base64.b64decode(item.data)))
            else:
                blocks.append(
                    {
                        "type": "text",
                        "text": f"[an image ({item.mime_type}, {len(item.data):,} base64 "
                        "characters) that cannot be shown: too large or of an unsupported type]",
                    }
                )
        elif isinstance(item, mcp_types.EmbeddedResource):
            resource = item.resource
            if isinstance(resource, mcp_types.TextResourceContents):
                shown = resource.text
            else:
                shown = f"[binary resource {resource.uri} ({resource.mime_type})]"
            blocks.append({"type": "text", "text": shown})
        elif isinstance(item, mcp_types.ResourceLink):
            blocks.append({"type": "text", "text": f"[resource: {item.uri} {item.name}]"})
        else:  # audio, or a kind newer than this client
            blocks.append({"type": "text", "text": f"[{getattr(item, 'type', None) or 'unknown'} content, not shown]"})
    if not blocks and result.structured_content is not None:
        blocks.append({"type": "text", "text": json.dumps(result.structured_content, ensure_ascii=False)})
    if all(b["type"] == "text" for b in blocks):
        text = "\n".join(b["text"] for b in blocks) or "(the tool returned nothing)"
        return ToolResult(text, is_error=bool(result.is_error)), []
    return ToolResult(blocks, is_error=bool(result.is_error)), pictures


def input_schema(tool: mcp_types.Tool | KnownTool) -> dict[str, Any]:
    schema = tool.input_schema
    if not isinstance(schema, dict):
        schema = schema.model_dump(by_alias=True, exclude_none=True)
    return {**{k: v for k, v in schema.items() if k != "$schema"}, "type": "object"}


@dataclass
class ServerTools:
    """What a worker's toolbox gets from one configured server for one task."""

    config: McpServerConfig
    session: McpSession
    gate: Gate  # approvals, the browser's outside URLs
    pictures: PictureSink
    notes: Callable[[], str] | None = None  # after each call: what the model should also know ('' for nothing)
    asks_all: bool = False  # set by `tools`: `approve` names a tool the server does not offer, so every call asks

    def tools(self) -> list[Tool]:
        """The server's tools; two whose names become the same `mcp__` name keep only the first (said in the log).
        An `approve` entry naming no tool of the server makes every call of it wait for an owner's Allow."""
        unmatched = self.config.unmatched_approvals([tool.name for tool in self.session.tools])
        if unmatched:
            log.warning(
                "MCP server %s: approve names %s, which it does not offer: every call of its tools waits for an "
                "owner's Allow",
                self.config.name,
                ", ".join(unmatched),
            )
        self.asks_all = bool(unmatched)
        tools: dict[str, Tool] = {}
        for tool in self.session.tools:
            made = self._tool(tool)
            if made.name in tools:
                log.warning(
                    "MCP server %s: tool %r left out (its name clashes as %s)", self.config.name, tool.name, made.name
                )
                continue
            tools[made.name] = made
        return list(tools.values())

    def _tool(self, tool: mcp_types.Tool | KnownTool) -> Tool:
        name = tool_name(self.config.name, tool.name)
        schema = input_schema(tool)
        asks = self.asks_all or self.config.needs_approval(tool.name)

        async def handler(**arguments: Any) -> ToolResult:
            arguments = wire_arguments(arguments)  # what the owner is shown is then exactly what the server gets
            await self.gate(tool.name, arguments, asks)
            result = await self.session.call(tool.name, arguments)
            answer, pictures = tool_result(result, name)
            if pictures:
                await self.pictures(pictures)
            note = self.notes() if self.notes is not None else ""
            if not note:
                return answer
            if isinstance(answer.content, str):
                return ToolResult(f"{answer.content}\n{note}", answer.is_error)
            return ToolResult([*answer.content, {"type": "text", "text": note}], answer.is_error)

        description = tool.description or tool.title or f"{tool.name} of the MCP server {self.config.name}"
        if asks:
            description += "\n(Each call waits for the owner's Allow in the chat; they may say no.)"
        return Tool(
            name,
            keep_head_and_tail(description, DESCRIPTION_CHARS, "description"),
            schema.get("properties", {}),
            handler,
            [r for r in schema.get("required", []) if isinstance(r, str)],
            schema=schema,
        )


def wire_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """A call's arguments as they travel to the server: plain JSON. A number JSON cannot carry (the SDK reads `1e400`
    as infinity) is refused rather than sent as the `null` the MCP library would write in its place, so a call the
    owner allowed (`"keep_days": Infinity`) is never another one (`"keep_days": null`: no limit, to many tools)."""
    try:
        return dict(json.loads(json.dumps(arguments, allow_nan=False)))
    except (TypeError, ValueError):
        raise ToolError(
            "the arguments hold a value JSON cannot carry (such as an infinite number or NaN); call again with plain "
            "JSON values"
        ) from None


def unavailable_tool(config: McpServerConfig, reason: str) -> Tool:
    """The stand-in for a server that did not start: the model sees why in its description and in every call."""

    async def handler(**_: Any) -> str:
        raise ToolError(reason)

    return Tool(
        tool_name(config.name, "unavailable"),
        f"The MCP server {config.name} is configured for you but did not start: {reason}. Its tools cannot be used "
        "in this task; work without them (calling this only repeats why).",
        {},
        handler,
    )
