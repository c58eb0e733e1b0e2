"""A small MCP stdio server the tests ship: an owner's server as MCP_CONFIG would name it.

Tools: `add(a, b)`, `note()` (reads a file of SANDBOX_READ_PATHS named by $DEMO_NOTE), `picture()` (a PNG),
`fail()` (a tool error), `crash()` (the process dies mid-call), `delete_everything(where)` (harmless, for `approve`),
`env_value(name)` (a variable of its environment, as a server that prints its own token would), `big(size)` (a text
of `size` characters beside a picture).
`demo_server.py --http PORT` serves the same tools over streamable HTTP (a `url` server).
"""

from __future__ import annotations

import base64
import os
import pathlib
import sys

from mcp.server.mcpserver import Image, MCPServer

# a 2×2 red PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP4z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg=="
)
server = MCPServer("demo")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return f"the sum is {a + b}"


@server.tool()
def note() -> str:
    """Read the note file the server was given ($DEMO_NOTE) and say where the server runs."""
    text = pathlib.Path(os.environ["DEMO_NOTE"]).read_text().strip()
    home = pathlib.Path.home()
    return f"note: {text}; home: {home}; cwd: {os.getcwd()}"


@server.tool()
def picture() -> Image:
    """A small picture."""
    return Image(data=PNG, format="png")


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("the demo tool failed on purpose")


@server.tool()
def crash() -> str:
    """The server dies in the middle of this call."""
    os._exit(3)


@server.tool()
def delete_everything(where: str) -> str:
    """A tool an owner puts under `approve` (it only says what it would do)."""
    return f"deleted everything in {where} (not really)"


@server.tool()
def env_value(name: str) -> str:
    """The value of one variable of the server's environment."""
    return f"{name}={os.environ.get(name, '')}"


@server.tool()
def big(size: int) -> list:
    """A long text beside a picture, in one result."""
    return ["x" * size, Image(data=PNG, format="png")]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:  # a `url` server: streamable HTTP on 127.0.0.1:PORT/mcp
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
