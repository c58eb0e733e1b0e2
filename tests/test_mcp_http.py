"""A `url` MCP server (streamable HTTP) is reached by the bot itself: its tools become mcp__<name>__<tool>,
calls go through, and a server that goes away mid-task is one sentence to the model."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

from agents.core.errors import ToolError
from agents.sandbox.task_limits import TaskBounds
from agents.tools.mcp_config import parse_entry
from agents.tools.mcp_tasks import McpTimeouts, Planned, connector, open_task_servers

DEMO = Path(__file__).parent / "mcp_servers" / "demo_server.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_url_server_is_reached_by_the_bot(tmp_path: Path) -> None:
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        sys.executable, str(DEMO), "--http", str(port), stderr=asyncio.subprocess.DEVNULL
    )
    bounds = TaskBounds("http", 1 << 30, 64)
    try:
        for _ in range(200):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        config = parse_entry("docs", {"url": f"http://127.0.0.1:{port}/mcp", "headers": {"X-Owner": "yes"}})

        async def gate(tool: str, arguments: dict, asks: bool) -> None:
            return None

        async def pictures(found: list) -> None:
            return None

        tools = await open_task_servers(
            [Planned(config, connector(config, None, bounds), gate)], bounds, pictures, McpTimeouts(20, 20)
        )
        by_name = {t.name: t for t in tools}
        assert "mcp__docs__add" in by_name and "mcp__docs__unavailable" not in by_name
        assert (await by_name["mcp__docs__add"].handler(a=20, b=22)).content == "the sum is 42"
        server.kill()
        await server.wait()
        try:
            said = await by_name["mcp__docs__add"].handler(a=1, b=2)
        except ToolError as err:
            said = str(err)
        assert "docs" in str(said) and "sum" not in str(said), said
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
        await bounds.close()
