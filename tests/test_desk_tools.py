"""One source for the work tools' schemas: the WorkDesk protocol's signatures make what the model sees, and
every desk (the crew, the routing eval's) accepts exactly those arguments."""

from __future__ import annotations

import inspect

import pytest

from agents.core.models import Caller
from agents.core.protocols import WORK_TOOLS, WorkDesk
from agents.evals.desk import RecordingDesk
from agents.tools.desk_tools import desk_tools, json_schema_of, work_tool_specs
from agents.work.crew import Crew


def shape(method: object) -> list[tuple[str, object, object]]:
    """(name, kind, default) of each parameter after self: what a call by keyword depends on."""
    return [(p.name, p.kind, p.default) for p in list(inspect.signature(method).parameters.values())[1:]]


@pytest.mark.parametrize("desk", [Crew, RecordingDesk])
@pytest.mark.parametrize("name", [*WORK_TOOLS, "turn_started", "stop_waiting", "turn_ended"])
def test_every_desk_has_the_protocols_signature(desk: type, name: str) -> None:
    assert shape(getattr(desk, name)) == shape(getattr(WorkDesk, name))


def test_the_schema_the_model_sees_matches_the_contract() -> None:
    specs = work_tool_specs()
    assert list(specs) == list(WORK_TOOLS)
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
    assert not {"caller", "chat_id"} & {p for _, props, _ in specs.values() for p in props}  # never the model's


async def test_a_tool_call_reaches_the_desk_with_the_chat_and_the_arguments() -> None:
    calls = []

    class Desk:
        def __getattr__(self, name: str):  # every desk method: record the call
            async def method(caller: Caller, **arguments: object) -> str:
                calls.append((name, caller.chat_id, arguments))
                return f"{name} done"

            return method

    tools = {t.name: t for t in desk_tools(Desk(), Caller(chat_id=42))}
    assert await tools["merge_task"].handler(task_id=7) == "merge_task done"
    assert await tools["list_tasks"].handler() == "list_tasks done"
    assert calls == [("merge_task", 42, {"task_id": 7}), ("list_tasks", 42, {})]


def test_an_unknown_type_is_refused_rather_than_guessed() -> None:
    with pytest.raises(TypeError):
        json_schema_of(dict)
    assert json_schema_of(int | None) == {"type": "integer"}
