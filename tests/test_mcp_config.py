"""MCP_CONFIG: the `.mcp.json` shape plus roles / approve / network, checked entry by entry."""

from __future__ import annotations

import json
from pathlib import Path

from agents.core.models import WorkerKind
from agents.tools.mcp_config import DEFAULT_ROLES, load, tool_name


def write(tmp_path: Path, servers: object) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_entries_load_with_their_defaults_and_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "notes": {"command": "python3", "args": ["/opt/notes.py"], "env": {"K": "v"}},
            "docs": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer x"}},
            "ops": {"command": "ops-mcp", "roles": ["code"], "approve": "*", "network": True},
        },
    )
    servers, problems = load(path)
    assert problems == []
    notes, docs, ops = servers
    assert notes.stdio and notes.argv() == ["python3", "/opt/notes.py"] and notes.env == {"K": "v"}
    assert notes.roles == DEFAULT_ROLES and WorkerKind.RESEARCH not in notes.roles and not notes.network
    assert not docs.stdio and docs.url == "https://mcp.example.com/mcp" and docs.headers["Authorization"]
    assert ops.roles == {WorkerKind.CODE} and ops.network and ops.needs_approval("anything")
    assert not notes.needs_approval("read")


def test_a_broken_entry_is_one_sentence_and_the_others_still_load(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "good": {"command": "x"},
            "both": {"command": "x", "url": "https://a"},
            "roles": {"command": "x", "roles": ["manager"]},
            "bad__name": {"command": "x"},
            "browser": {"command": "x"},
            "net": {"command": "x", "network": "yes"},
        },
    )
    servers, problems = load(path)
    assert [s.name for s in servers] == ["good"]
    assert len(problems) == 5 and all(p.startswith("MCP_CONFIG server") for p in problems)
    assert load(tmp_path / "missing.json")[1][0].startswith("MCP_CONFIG")
    assert load(None) == ([], [])


def test_tool_names_are_what_the_api_accepts() -> None:
    assert tool_name("demo", "add") == "mcp__demo__add"
    assert tool_name("demo", "get.page/v2") == "mcp__demo__get_page_v2"
    assert len(tool_name("demo", "x" * 200)) == 64


def test_an_entry_with_a_key_it_does_not_know_is_dropped_never_loaded_ungated_or_widened(tmp_path: Path) -> None:
    """A misspelt `approve` (`aprove`, `Approve`, …) or `roles` (`role`) read as absent would load the server with no
    gate, or for every worker kind: the entry is refused in one sentence naming the key, the others load."""
    typos = {f"notes{n}": {"command": "python3", key: ["delete_note"]} for n, key in enumerate(("aprove", "Approve"))}
    path = write(
        tmp_path,
        {**typos, "ops": {"command": "ops-mcp", "role": ["research"]}, "fine": {"command": "ok", "approve": ["x"]}},
    )
    servers, problems = load(path)
    assert [s.name for s in servers] == ["fine"]
    assert len(problems) == 3 and "unknown key 'aprove'" in problems[0] and "unknown key 'role'" in problems[2]
