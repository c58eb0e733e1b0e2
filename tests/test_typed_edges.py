"""Behaviour the type checker pointed at: a stored record's id, the eval desk's record of a tool argument called
`name`, and MCP content items told apart by their class."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.core.models import Caller, Task, WorkerKind
from agents.evals.desk import RecordingDesk, ToolCall
from agents.store.database import Store
from agents.tools.desk_tools import desk_tools
from agents.tools.mcp_client import tool_result
from agents.workspaces.folders import Workspaces


def test_a_record_never_stored_has_no_stored_id() -> None:
    task = Task(chat_id=1, workspace="calc", worker=WorkerKind.CODE, title="t", instructions="i")
    with pytest.raises(LookupError, match="never stored"):
        _ = task.stored_id
    assert task.model_copy(update={"id": 7}).stored_id == 7


async def test_a_tool_argument_called_name_is_recorded(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "bot.db")
    try:
        desk = RecordingDesk(store, Workspaces(tmp_path, None))
        tools = {t.name: t for t in desk_tools(desk, Caller(chat_id=1))}
        answer = await tools["create_workspace"].handler(name="notes")
        assert "notes" in answer
        assert desk.calls == [ToolCall("create_workspace", {"name": "notes"})]
    finally:
        await store.close()


def test_mcp_content_kinds_become_blocks_the_model_reads() -> None:
    import mcp_types  # here, not at the top: its models take a third of a second to build, and only this test needs them

    png = "iVBORw0KGgo="
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(type="text", text="hello"),
            mcp_types.ImageContent(type="image", data=png, mime_type="image/png"),
            mcp_types.ImageContent(type="image", data=png, mime_type="image/tiff"),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.TextResourceContents(uri="file:///a.txt", text="inside", mime_type="text/plain"),
            ),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.BlobResourceContents(uri="file:///b.bin", blob="AAAA", mime_type="application/x"),
            ),
            mcp_types.ResourceLink(type="resource_link", uri="file:///c.md", name="c"),
            mcp_types.AudioContent(type="audio", data="AAAA", mime_type="audio/wav"),
        ]
    )
    shown, pictures = tool_result(result, "shot")
    assert isinstance(shown.content, list)
    texts = [b.get("text") for b in shown.content if b["type"] == "text"]
    assert texts[0] == "hello"
    assert "image/tiff" in texts[1] and "cannot be shown" in texts[1]
    assert texts[2] == "inside"
    assert texts[3] == "[binary resource file:///b.bin (application/x)]"
    assert texts[4] == "[resource: file:///c.md c]"
    assert texts[5] == "[audio content, not shown]"
    assert [b["source"]["media_type"] for b in shown.content if b["type"] == "image"] == ["image/png"]
    assert pictures == [("shot", b"\x89PNG\r\n\x1a\n")]
