"""The parts of the frontend worker's browser below the bot: which URLs are outside a task, the egress proxy (only allowed hosts, never the
bot's machine), the set-up's pinned version, and `agentlab doctor`'s lines for the browser and each MCP server."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from agents import doctor as dr
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.sandbox import egress_proxy
from agents.sandbox.egress_proxy import EgressProxy
from agents.tools import browser
from agents.tools.screenshot import find_chromium
from tests.support.sandbox import PROBE
from tests.support.settings import offline_settings

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "tests" / "mcp_servers" / "demo_server.py"
needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None or not sys.platform.startswith("linux"), reason="bubblewrap (bwrap) is not installed"
)


def test_outside_urls_are_those_not_on_the_tasks_loopback() -> None:
    for local in (
        "http://localhost:5173/",
        "http://127.0.0.1:8000/x",
        "http://[::1]:3000",
        "about:blank",
        "file:///tmp/x.html",
        "data:text/html,hi",
        "http://app.localhost:8080/",
    ):
        assert browser.outside_url(local) is None, local
    assert browser.outside_url("https://example.com/page") == "example.com"
    assert browser.outside_url("http://10.0.0.5/") == "10.0.0.5"
    assert browser.outside_url("HTTPS://Reference.Example.COM") == "reference.example.com"


def test_the_set_up_installs_the_pinned_version() -> None:
    script = (ROOT / "scripts" / "install-browser.sh").read_text()
    assert re.search(r"^VERSION=(\S+)$", script, re.M).group(1) == browser.VERSION == "1.11.0"
    assert ".tools" in script and "-g" not in script.split()


@pytest.mark.skipif(browser.find(None, find_chromium())[0] is None, reason="chrome-devtools-mcp is not installed")
def test_the_browser_never_checks_npm_for_a_newer_version_of_itself() -> None:
    """At each start chrome-devtools-mcp would run a detached `npm config get registry` and ask the registry (half a
    second of CPU, no network in the sandbox, a cache in a home that is new for every task): the variable the
    installed version reads to skip it is set."""
    install, _ = browser.find(None, find_chromium())
    checker = install.entry.parents[1] / "utils" / "check-for-updates.js"  # beside build/src/bin/
    [variable] = browser.ENV
    assert f"process.env['{variable}']" in checker.read_text(), "the installed version reads another variable"
    for proxy in (False, True):
        assert browser.config(install, proxy=proxy).env == {variable: "1"}


async def _request(proxy: EgressProxy, head: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(proxy.socket_path))
    writer.write(head)
    await writer.drain()
    async with asyncio.timeout(10):
        answer = await reader.read()
    writer.close()
    return answer


async def test_the_proxy_sends_the_checked_host_and_one_request_only(tmp_path: Path) -> None:
    """A shared front (a CDN) routes by the Host header and serves pipelined requests: the client's own Host and a
    second request queued behind the first would reach sites the owner never allowed, the check having read only the
    request line. Another port of an allowed host (its SSH, its database) is not its web pages."""
    seen: list[bytes] = []

    async def origin(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = b""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.5):  # whatever the proxy sends, until it has sent nothing for a while
                while chunk := await reader.read(65536):
                    data += chunk
        seen.append(data)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(origin, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy = EgressProxy(tmp_path)
    proxy.address_ok = lambda address: True  # as if localhost were a public host
    proxy.allow("localhost", port)
    await proxy.start()
    try:
        post = (
            f"POST http://localhost:{port}/form HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 5\r\n\r\nhello"
            "GET /second HTTP/1.1\r\nHost: other-tenant.example\r\n\r\n"
        )
        answer = await _request(proxy, post.encode())
        chunked = await _request(
            proxy,
            f"POST http://localhost:{port}/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n".encode(),
        )
        other_port = await _request(proxy, b"CONNECT localhost:22 HTTP/1.1\r\nHost: localhost:22\r\n\r\n")
    finally:
        await proxy.close()
        server.close()
    assert answer.endswith(b"ok"), answer
    [sent] = seen  # the chunked request and the other port never reached the origin
    assert sent.startswith(b"POST /form HTTP/1.1\r\nHost: localhost:%d\r\n" % port), sent
    assert b"evil.example" not in sent and sent.endswith(b"\r\n\r\nhello"), sent
    assert b"second" not in sent and b"other-tenant" not in sent, "a pipelined request went unchecked"
    assert chunked.startswith(b"HTTP/1.1 400") and b"https" in chunked, chunked
    assert other_port.startswith(b"HTTP/1.1 403") and b"port 22 of localhost" in other_port, other_port


async def test_the_proxy_reaches_only_allowed_hosts_and_never_the_bots_machine(tmp_path: Path) -> None:
    async def origin(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        body = b"origin saw: " + head.split(b"\r\n")[0] + (b" close" if b"Connection: close" in head else b"")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(origin, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy = EgressProxy(tmp_path)
    await proxy.start()
    try:
        get = f"GET http://localhost:{port}/ref.html?q=1 HTTP/1.1\r\nHost: localhost\r\nProxy-Connection: keep-alive\r\n\r\n"
        refused = await _request(proxy, get.encode())
        assert refused.startswith(b"HTTP/1.1 403") and b"not allowed by the owner" in refused
        proxy.allow("localhost", port)
        private = await _request(proxy, get.encode())
        assert private.startswith(b"HTTP/1.1 403") and b"no public address" in private, "the bot's own loopback"
        proxy.address_ok = lambda address: True  # as if localhost were a public host
        allowed = await _request(proxy, get.encode())
        assert b"origin saw: GET /ref.html?q=1 HTTP/1.1 close" in allowed, allowed
        tunnel = await _request(proxy, b"CONNECT other.example:443 HTTP/1.1\r\nHost: other.example:443\r\n\r\n")
        assert tunnel.startswith(b"HTTP/1.1 403") and "other.example" in proxy.refused
    finally:
        await proxy.close()
        server.close()
    assert not egress_proxy.public("127.0.0.1") and not egress_proxy.public("192.168.1.4")
    assert proxy.allowed("localhost", 443) and not proxy.allowed("localhost", 22), "the web's ports and the page's"
    assert not egress_proxy.public("::ffff:10.0.0.1") and not egress_proxy.public("169.254.169.254")
    assert egress_proxy.public("93.184.215.14")


def _settings(tmp_path: Path, **values: object) -> Settings:
    return offline_settings(tmp_path, database_path=tmp_path / "db.sqlite", **values)


@needs_bwrap
async def test_doctor_lists_each_mcp_server_and_whether_it_starts(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    servers = {
        "demo": {"command": sys.executable, "args": [str(DEMO)], "roles": ["code"], "approve": ["delete_everything"]},
        "broken": {"command": "/nonexistent/server"},
        "odd": {"command": "x", "url": "https://a"},
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    checks = await dr.check_mcp_servers(_settings(tmp_path, mcp_config=config, sandbox_read_paths=(DEMO.parent,)))
    by_name = {c.name: c for c in checks}
    assert by_name["MCP demo"].level is dr.Level.ok, by_name["MCP demo"]
    assert "8 tools" in by_name["MCP demo"].detail and "approve: delete_everything" in by_name["MCP demo"].detail
    assert by_name["MCP broken"].level is dr.Level.warn and "does not start" in by_name["MCP broken"].detail
    assert by_name["MCP_CONFIG"].level is dr.Level.warn and "'odd'" in by_name["MCP_CONFIG"].detail


async def test_doctor_says_when_the_frontend_worker_has_no_browser(tmp_path: Path) -> None:
    check = await dr.check_browser(_settings(tmp_path, browser_tools_dir=tmp_path / "empty"))
    assert check.level is dr.Level.warn and "keeps only `screenshot`" in check.detail


@needs_bwrap
@pytest.mark.skipif(browser.find(None, find_chromium())[0] is None, reason="chrome-devtools-mcp is not installed")
async def test_doctor_starts_the_browser_in_a_sandbox(tmp_path: Path) -> None:
    check = await dr.check_browser(_settings(tmp_path, mcp_start_timeout_seconds=60))
    assert check.level is dr.Level.ok and "starts in a task's sandbox" in check.detail, check


async def test_without_the_browser_the_frontend_worker_gets_no_browser_tools(tmp_path: Path) -> None:
    from agents.core.models import WorkerKind
    from agents.sandbox.task_limits import TaskBounds
    from agents.tools.mcp_tasks import TaskMcp

    mcp = TaskMcp.from_settings(
        _settings(tmp_path, browser_tools_dir=tmp_path / "empty"), SecretsFilter(), find_chromium()
    )
    assert mcp.browser is None and "not installed" in mcp.browser_note
    bounds = TaskBounds("no-browser", 1 << 30, 64)

    async def nothing(*_args: object) -> None:
        return None

    try:
        tools = await mcp.open(WorkerKind.FRONTEND, None, bounds, None, nothing)
    finally:
        await bounds.close()
    assert tools == []  # the worker keeps `screenshot`; its prompt says what to do without the browser
    from agents.llm.prompts import FRONTEND

    assert "Without the mcp__browser__ tools" in FRONTEND and "screenshot(target)" in FRONTEND


@needs_bwrap
async def test_a_research_workers_server_gets_an_empty_folder_and_the_workspace_read_only(tmp_path: Path) -> None:
    import dataclasses

    from agents.core.models import WorkerKind
    from agents.sandbox.bwrap import spec_for
    from agents.sandbox.task_limits import TaskBounds
    from agents.tools.mcp_config import parse_entry
    from agents.tools.mcp_tasks import Gates, McpTimeouts, TaskMcp

    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "README.md").write_text("the workspace\n")
    entry = {"command": sys.executable, "args": [str(DEMO)], "env": {"DEMO_NOTE": str(workspace / "README.md")}}
    config = parse_entry("demo", {**entry, "roles": ["research"]})
    mcp = TaskMcp([config], McpTimeouts(20, 20))
    bounds = TaskBounds("research", 1 << 30, 64)
    sandbox = dataclasses.replace(
        spec_for(SecretsFilter(), PROBE, workspace, extra_read_only=[DEMO.parent]), task=bounds
    )

    async def nothing(*_args: object) -> None:
        return None

    gates = Gates(lambda _config: nothing, nothing, lambda: False)
    try:
        assert await mcp.open(WorkerKind.CODE, sandbox, bounds, gates, nothing) == []  # roles: research only
        tools = {t.name: t for t in await mcp.open(WorkerKind.RESEARCH, sandbox, bounds, gates, nothing)}
        said = (await tools["mcp__demo__note"].handler()).content
    finally:
        await bounds.close()
    # the server starts in its own home (never the worktree, where a worker could plant a module it would import)
    assert "note: the workspace" in said and f"cwd: {workspace}" not in said and "cwd: /home/agent" in said


@pytest.mark.skipif(browser.find(None, find_chromium())[0] is None, reason="chrome-devtools-mcp is not installed")
async def test_once_its_tools_are_known_the_browser_starts_at_the_workers_first_call(tmp_path: Path) -> None:
    """Tools a start of the installed version listed (kept in the bot's data folder; tests/test_browser_e2e.py sees a
    real task keep them) are offered without starting anything (a task that never opens a page pays for no node nor
    Chromium); the first call starts the browser and is answered."""
    from agents.core.models import WorkerKind
    from agents.sandbox.task_limits import TaskBounds
    from agents.tools.mcp_client import KnownTool
    from agents.tools.mcp_tasks import Gates, McpTimeouts, TaskMcp

    install, _ = browser.find(None, find_chromium())
    assert install is not None
    data = tmp_path / "data"  # the bot's data folder: made when the listing is first kept
    mcp = TaskMcp([], McpTimeouts(60, 60), install, may_go_out=False, listing_dir=data)

    async def nothing(*_args: object) -> None:
        return None

    gates = Gates(lambda _config: nothing, nothing, lambda: False)
    assert browser.known_tools(install, data) is None
    listing = [KnownTool("list_pages", {"type": "object", "properties": {}}, "Lists the open pages.")]
    browser.keep_tools(dataclasses.replace(install, version="1.10.0"), listing, data)
    assert browser.known_tools(install, data) is None, "another version's tools"
    browser.keep_tools(install, listing, data)
    assert browser.known_tools(install, data) == listing
    later = TaskBounds("later", 1 << 34, 256)
    try:
        tools = {t.name: t for t in await mcp.open(WorkerKind.FRONTEND, None, later, gates, nothing)}
        assert list(tools) == ["mcp__browser__list_pages"] and not _browsers_of(later), "offered, nothing started"
        pages = await tools["mcp__browser__list_pages"].handler()
        assert _browsers_of(later) and "about:blank" in str(pages.content), pages
    finally:
        await later.close()


def _browsers_of(bounds: object) -> list[int]:
    """The browser's processes of one task with SANDBOX=off: they run in a folder named after the task's bounds
    (chrome-devtools-mcp sets its process title, so its arguments cannot be read)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and f"-{bounds.name}_browser-" in os.readlink(entry / "cwd"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found
