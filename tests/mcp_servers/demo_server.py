"""A small MCP stdio server the tests ship: an owner's server as MCP_CONFIG would name it.

Tools: `add(a, b)`, `note()` (reads a file of SANDBOX_READ_PATHS named by $DEMO_NOTE), `picture()` (a PNG),
`fail()` (a tool error), `crash()` (the process dies mid-call), `delete_everything(where)` (harmless, for `approve`),
`env_value(name)` (a variable of its environment, as a server that prints its own token would), `big(size)` (a text
of `size` characters beside a picture).
`demo_server.py --http PORT` serves the same tools over streamable HTTP (a `url` server).

The stdio server is written by hand on the standard library alone: JSON-RPC 2.0, one message a line on stdin and
stdout, the way the MCP specification frames stdio (`initialize`, `notifications/initialized`, `ping`, `tools/list`,
`tools/call`). The suite starts it a few dozen times, mostly inside the bot's sandboxes, and importing the `mcp` SDK's
server side costs about a second of CPU per start where this costs a few hundredths. Its answers are the ones the
SDK's own server gives (checked against it): the same input and output schemas, `structuredContent` beside the text
of a text tool, a tool's failure as a result with `isError`. The bot's side stays the real SDK client, so the
protocol is still checked by a real peer. The HTTP mode (a `url` server) stays on the SDK: streamable HTTP with its
sessions is not worth writing by hand for one test module.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import sys
from collections.abc import Callable
from typing import Any

# a 2×2 red PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP4z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg=="
)
# the handshake-era protocol revisions this server speaks, oldest to newest: a client's offer among them is echoed,
# any other is answered with the newest (the client then decides whether it can go on)
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


# The tools: plain functions. A tool answers a text (`-> str`) or a list of texts and PNG pictures (`-> list`);
# its parameters (all required) and their annotations (`int`, `str`) make its input schema.


def add(a: int, b: int) -> str:
    """Add two integers."""
    return f"the sum is {a + b}"


def note() -> str:
    """Read the note file the server was given ($DEMO_NOTE) and say where the server runs."""
    text = pathlib.Path(os.environ["DEMO_NOTE"]).read_text().strip()
    home = pathlib.Path.home()
    return f"note: {text}; home: {home}; cwd: {os.getcwd()}"


def picture() -> list:
    """A small picture."""
    return [PNG]


def fail() -> str:
    """Always fails."""
    raise ValueError("the demo tool failed on purpose")


def crash() -> str:
    """The server dies in the middle of this call."""
    os._exit(3)


def delete_everything(where: str) -> str:
    """A tool an owner puts under `approve` (it only says what it would do)."""
    return f"deleted everything in {where} (not really)"


def env_value(name: str) -> str:
    """The value of one variable of the server's environment."""
    return f"{name}={os.environ.get(name, '')}"


def big(size: int) -> list:
    """A long text beside a picture, in one result."""
    return ["x" * size, PNG]


TOOLS: dict[str, Callable[..., Any]] = {
    f.__name__: f for f in (add, note, picture, fail, crash, delete_everything, env_value, big)
}
JSON_TYPES = {"int": "integer", "str": "string"}


def parameters(tool: Callable[..., Any]) -> list[tuple[str, str]]:
    """A tool's parameters in order, each with its annotation (`int`, `str`)."""
    code = tool.__code__
    return [(name, tool.__annotations__[name]) for name in code.co_varnames[: code.co_argcount]]


def listing(tool: Callable[..., Any]) -> dict[str, Any]:
    """A tool as `tools/list` describes it (the schemas the SDK's server derives from the same function)."""
    name = tool.__name__
    properties = {p: {"title": p.replace("_", " ").title(), "type": JSON_TYPES[kind]} for p, kind in parameters(tool)}
    schema: dict[str, Any] = {"properties": properties, "title": f"{name}Arguments", "type": "object"}
    if properties:
        schema["required"] = list(properties)
    described: dict[str, Any] = {"name": name, "description": tool.__doc__, "inputSchema": schema}
    if tool.__annotations__["return"] == "str":
        described["outputSchema"] = {
            "properties": {"result": {"title": "Result", "type": "string"}},
            "required": ["result"],
            "title": f"{name}Output",
            "type": "object",
        }
    return described


def arguments_for(tool: Callable[..., Any], given: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments checked against the tool's parameters (extra ones are dropped, as the SDK does);
    raises ValueError saying what is wrong."""
    checked: dict[str, Any] = {}
    for name, kind in parameters(tool):
        if name not in given:
            raise ValueError(f"{name}: field required")
        value = given[name]
        if kind == "int" and isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            value = int(value)  # the SDK's validation is lax the same way: "5" is 5
        if kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"{name}: input should be a valid integer, got {value!r}")
        if kind == "str" and not isinstance(value, str):
            raise ValueError(f"{name}: input should be a valid string, got {value!r}")
        checked[name] = value
    return checked


def call(name: str, given: dict[str, Any]) -> dict[str, Any]:
    """A `tools/call` result: the tool's content, or its failure as text with `isError` (never a protocol error)."""
    tool = TOOLS.get(name)
    if tool is None:
        return {"content": [{"type": "text", "text": f"Unknown tool: {name}"}], "isError": True}
    try:
        arguments = arguments_for(tool, given)
    except ValueError as err:
        text = f"Error executing tool {name}: 1 validation error for {name}Arguments\n{err}"
        return {"content": [{"type": "text", "text": text}], "isError": True}
    try:
        result = tool(**arguments)
    except Exception as err:
        return failed(name, err)
    if isinstance(result, str):
        return {
            "content": [{"type": "text", "text": result}],
            "isError": False,
            "structuredContent": {"result": result},
        }
    content = [
        {"type": "text", "text": item}
        if isinstance(item, str)
        else {"type": "image", "data": base64.b64encode(item).decode(), "mimeType": "image/png"}
        for item in result
    ]
    return {"content": content, "isError": False}


def failed(name: str, err: Exception) -> dict[str, Any]:
    """A tool that raised: the SDK's server says only that it failed (the reason goes to its stderr)."""
    print(f"tool {name!r} raised {type(err).__name__}: {err}", file=sys.stderr, flush=True)
    return {"content": [{"type": "text", "text": f"Error executing tool {name}"}], "isError": True}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The result or the JSON-RPC error for one request."""
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        offered = params.get("protocolVersion")
        return {
            "result": {
                "protocolVersion": offered if offered in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1],
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "demo", "version": "1.0"},
            }
        }
    if method == "ping":
        return {"result": {}}
    if method == "tools/list":
        return {"result": {"tools": [listing(tool) for tool in TOOLS.values()]}}
    if method == "tools/call":
        if not isinstance(params.get("name"), str) or not isinstance(params.get("arguments") or {}, dict):
            return {"error": {"code": -32602, "message": "Invalid params: a tool's name and an arguments object"}}
        return {"result": call(params["name"], params.get("arguments") or {})}
    return {"error": {"code": -32601, "message": f"Method not found: {method}"}}


def send(message: dict[str, Any]) -> None:
    sys.stdout.buffer.write(json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":")).encode() + b"\n")
    sys.stdout.buffer.flush()


def serve_stdio() -> None:
    """Answer each request on stdin in turn until stdin ends; notifications (and responses) need no answer."""
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            send({"id": None, "error": {"code": -32700, "message": "Parse error"}})
            continue
        if not isinstance(message, dict) or not isinstance(message.get("method", ""), str):
            send({"id": None, "error": {"code": -32600, "message": "Invalid Request"}})
        elif "method" in message and "id" in message:
            send({"id": message["id"], **answer(message)})


def serve_http(port: int) -> None:
    """The same tools on the SDK's streamable HTTP server at 127.0.0.1:PORT/mcp."""
    import functools

    from mcp.server.mcpserver import Image, MCPServer

    server = MCPServer("demo")
    for tool in TOOLS.values():

        @functools.wraps(tool)  # the SDK reads the tool's own signature and docstring through the wrapper
        def run(*args: Any, _tool: Callable[..., Any] = tool, **kwargs: Any) -> Any:
            result = _tool(*args, **kwargs)
            if isinstance(result, str):
                return result
            return [item if isinstance(item, str) else Image(data=item, format="png") for item in result]

        server.add_tool(run)
    server.run("streamable-http", host="127.0.0.1", port=port)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:  # a `url` server: streamable HTTP on 127.0.0.1:PORT/mcp
        serve_http(int(sys.argv[2]))
    else:
        serve_stdio()
