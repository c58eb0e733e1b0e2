"""The orchestrator's work tools of a turn, made from their definitions: the crew parts' `@work_tool` methods.

Each tool's input schema comes from its method's typed signature (`caller` and keyword-only parameters left out: the
bot sets them), its argument descriptions from the `Arg` in each `Annotated[...]`, and its description from the
docstring, the way the anthropic SDK's tool helpers derive schemas from functions. A parameter without a default is
required. (The SDK's own helper goes through pydantic, whose schemas add titles, defaults, `anyOf` with null and
`additionalProperties`: the model would see other schemas.) A call passes only the arguments the schema names.
"""

from __future__ import annotations

import inspect
import types
import typing
from functools import cache
from typing import Any, Literal

from agents.core.models import Caller
from agents.core.protocols import WorkDesk
from agents.core.work_tools import WORK_TOOLS, Arg, WorkMethod, WorkTool
from agents.tools.toolbox import Tool

_JSON_TYPES = {str: "string", int: "integer", bool: "boolean", float: "number"}


def _without_none(annotation: Any) -> Any:
    """`X | None` → X."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kept = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(kept) == 1:
            return kept[0]
    return annotation


def json_schema_of(annotation: Any) -> dict[str, Any]:
    """The JSON schema of one argument's type (str, int, bool, float, list[...], Literal[...], optional)."""
    annotation = _without_none(annotation)
    origin = typing.get_origin(annotation)
    if origin is Literal:
        values = list(typing.get_args(annotation))
        return {"type": _JSON_TYPES[type(values[0])], "enum": values}
    if origin is list:
        (item,) = typing.get_args(annotation)
        return {"type": "array", "items": json_schema_of(item)}
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    raise TypeError(f"no JSON schema for {annotation!r}")


@cache
def tool_spec(definition: WorkMethod) -> tuple[str, dict[str, Any], tuple[str, ...]]:
    """(description, properties, required) of the work tool `definition` defines."""
    hints = typing.get_type_hints(definition, include_extras=True)
    parameters = list(inspect.signature(definition).parameters.values())
    if [p.name for p in parameters[:2]] != ["self", "caller"]:
        raise TypeError(f"{definition.__qualname__}: a work tool's method takes (self, caller, …)")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in parameters[2:]:
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY:
            continue  # the bot's (a button's `anywhere`), never the model's
        if parameter.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            raise TypeError(f"{definition.__qualname__}: no schema for the parameter {parameter}")
        hint = hints[parameter.name]
        args = typing.get_args(hint) if typing.get_origin(hint) is typing.Annotated else (hint,)
        described = [a for a in args[1:] if isinstance(a, Arg)]
        schema = json_schema_of(args[0])
        if described:
            schema["description"] = described[0].description
        properties[parameter.name] = schema
        if parameter.default is inspect.Parameter.empty:
            required.append(parameter.name)
    return inspect.cleandoc(definition.__doc__ or ""), properties, tuple(required)


def desk_tools(desk: WorkDesk, caller: Caller) -> list[Tool]:
    """The work tools of one turn, in WORK_TOOLS' order, each calling the desk's tool with `caller` first."""
    offered = desk.work_tools()
    by_name = {tool.name: tool for tool in offered}
    if len(offered) != len(by_name) or set(by_name) != set(WORK_TOOLS):
        raise LookupError(f"the desk's work tools {sorted(t.name for t in offered)} are not WORK_TOOLS")
    return [_tool(by_name[name], caller) for name in WORK_TOOLS]


def _tool(work_tool: WorkTool, caller: Caller) -> Tool:
    description, properties, required = tool_spec(work_tool.definition)

    async def call(**arguments: Any) -> str:
        for name in arguments:
            if name not in properties:  # `caller`, a keyword-only parameter or one that does not exist
                raise TypeError(f"{work_tool.name}() got an unexpected keyword argument {name!r}")
        return await work_tool.call(caller, **arguments)

    return Tool(work_tool.name, " ".join(description.split()), properties, call, list(required))
