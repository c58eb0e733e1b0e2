"""One source for each work tool: the crew part's `@work_tool` method makes what the model sees, the crew's tools and
the routing eval's desk offer those same definitions, and a call passes only the arguments their schema names."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from agents.core.models import Caller
from agents.core.protocols import WorkDesk
from agents.core.work_tools import WORK_TOOLS, WorkTool, bound_work_tools, work_tool, work_tool_definitions
from agents.evals.desk import RecordingDesk
from agents.tools.desk_tools import desk_tools, json_schema_of, tool_spec
from agents.work.crew import TOOL_PARTS, Crew
from agents.workspaces.folders import Workspaces


def definitions() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for part in TOOL_PARTS:
        for name, definition in work_tool_definitions(part).items():
            assert name not in found, f"{name} is defined twice"
            found[name] = definition
    return found


def test_each_tool_is_defined_once_by_a_part() -> None:
    assert sorted(definitions()) == sorted(WORK_TOOLS)
    for part in TOOL_PARTS:
        assert work_tool_definitions(part), f"{part.__name__} defines no tool"


@pytest.mark.parametrize("desk", [Crew, RecordingDesk])
@pytest.mark.parametrize("name", ["work_tools", "turn_started", "stop_waiting", "turn_ended"])
def test_every_desk_has_the_protocols_hooks(desk: type, name: str) -> None:
    assert inspect.signature(getattr(desk, name)) == inspect.signature(getattr(WorkDesk, name))


def test_the_schema_the_model_sees_matches_the_contract() -> None:
    specs = {name: tool_spec(definition) for name, definition in definitions().items()}
    description, properties, required = specs["start_task"]
    assert required == ("workspace", "worker", "instructions", "background")  # the model always says whether to wait
    assert properties["worker"] == {
        "type": "string",
        "enum": ["code", "frontend", "test"],
        "description": "code, frontend or test",
    }
    assert properties["acceptance_criteria"]["type"] == "array"
    assert properties["acceptance_criteria"]["items"] == {"type": "string"}
    assert properties["attachments"]["items"] == {"type": "integer"}
    assert description.startswith("Start a worker that changes code")
    assert specs["approve_proposal"][2] == () and set(specs["approve_proposal"][1]) == {"proposal_id", "notes"}
    assert specs["message_task"][2] == ("task_id", "text")
    assert specs["create_workspace"][1]["name"]["type"] == "string"
    assert set(specs["start_research"][1]) == {"workspace", "request", "refines", "attachments"}
    never_the_models = {"caller", "chat_id", "anywhere"}  # the bot sets these (a button's `anywhere` included)
    assert not never_the_models & {p for _, props, _ in specs.values() for p in props}


async def test_the_eval_desk_offers_the_crews_definitions_and_records_each_call(tmp_path: Path) -> None:
    desk = RecordingDesk(None, Workspaces(tmp_path, None))  # type: ignore[arg-type]  # no call here needs a store
    assert {t.name: t.definition for t in desk.work_tools()} == definitions()
    tools = {t.name: t for t in desk_tools(desk, Caller(chat_id=1))}
    assert "notes" in await tools["create_workspace"].handler(name="notes")
    assert (await tools["forget"].handler(note_id=3)).startswith("Note #3")
    assert [(c.name, c.input) for c in desk.calls] == [
        ("create_workspace", {"name": "notes"}),
        ("forget", {"note_id": 3}),
    ]


async def test_a_tool_call_reaches_the_desk_with_the_chat_and_the_arguments() -> None:
    calls = []

    class Part:
        @work_tool
        async def merge_task(self, caller: Caller, task_id: int, *, anywhere: bool = False) -> str:
            """Merge."""
            calls.append(("merge_task", caller.chat_id, task_id, anywhere))
            return "merged"

    class Desk:
        def work_tools(self) -> list[WorkTool]:
            merge = bound_work_tools(Part())
            return merge + [WorkTool(definitions()[n], self.other) for n in WORK_TOOLS if n != "merge_task"]

        async def other(self, caller: Caller, **arguments: object) -> str:
            raise AssertionError(f"unexpected call with {arguments}")

    tools = {t.name: t for t in desk_tools(Desk(), Caller(chat_id=42))}  # type: ignore[arg-type]  # a stand-in desk
    assert list(tools) == list(WORK_TOOLS)
    assert await tools["merge_task"].handler(task_id=7) == "merged"
    for hostile in ({"anywhere": True}, {"caller": Caller(chat_id=1)}, {"chat_id": 1}):  # the bot's, never the model's
        with pytest.raises(TypeError, match="unexpected keyword argument"):
            await tools["merge_task"].handler(task_id=7, **hostile)
    assert calls == [("merge_task", 42, 7, False)]


def test_a_desk_missing_a_tool_or_offering_one_twice_is_refused() -> None:
    class Desk:
        def __init__(self, tools: list[WorkTool]) -> None:
            self.tools = tools

        def work_tools(self) -> list[WorkTool]:
            return self.tools

    every = [WorkTool(d, d) for d in definitions().values()]
    with pytest.raises(LookupError):
        desk_tools(Desk(every[1:]), Caller(chat_id=1))  # type: ignore[arg-type]  # a stand-in desk
    with pytest.raises(LookupError):
        desk_tools(Desk([*every, every[0]]), Caller(chat_id=1))  # type: ignore[arg-type]  # a stand-in desk


def test_an_unknown_type_is_refused_rather_than_guessed() -> None:
    with pytest.raises(TypeError):
        json_schema_of(dict)
    assert json_schema_of(int | None) == {"type": "integer"}

    class Part:
        @work_tool
        async def odd(self, caller: Caller, *places: str) -> str:
            """Odd."""
            return ""

        @work_tool
        async def callerless(self, workspace: str) -> str:
            """No caller."""
            return ""

    for definition in work_tool_definitions(Part).values():
        with pytest.raises(TypeError):
            tool_spec(definition)
