"""The orchestrator's work tools, made from the `WorkDesk` protocol: one source for each tool's schema.

Each tool's input schema comes from the protocol method's typed signature (`caller` left out: the bot sets it), its
argument descriptions from the `Arg` in each `Annotated[...]`, and its description from the docstring,
the way the anthropic SDK's tool helpers derive schemas from functions. A parameter without a default is required.
"""

from __future__ import annotations

import inspect
import types
import typing
from functools import cache
from typing import Any, Literal

from agents.core.models import Caller
from agents.core.protocols import WORK_TOOLS, Arg, WorkDesk
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
def work_tool_specs() -> dict[str, tuple[str, dict[str, Any], tuple[str, ...]]]:
    """name → (description, properties, required) of every work tool, from the WorkDesk protocol."""
    specs = {}
    for name in WORK_TOOLS:
        method = getattr(WorkDesk, name)
        hints = typing.get_type_hints(method, include_extras=True)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for parameter in list(inspect.signature(method).parameters.values())[2:]:  # self, caller
            hint = hints[parameter.name]
            args = typing.get_args(hint) if typing.get_origin(hint) is typing.Annotated else (hint,)
            described = [a for a in args[1:] if isinstance(a, Arg)]
            schema = json_schema_of(args[0])
            if described:
                schema["description"] = described[0].description
            properties[parameter.name] = schema
            if parameter.default is inspect.Parameter.empty:
                required.append(parameter.name)
        specs[name] = (inspect.cleandoc(method.__doc__ or ""), properties, tuple(required))
    return specs


def desk_tools(desk: WorkDesk, caller: Caller) -> list[Tool]:
    """The work tools of one turn, each calling the desk's method of the same name with `caller` first."""
    return [
        Tool(name, " ".join(description.split()), properties, _caller(getattr(desk, name), caller), list(required))
        for name, (description, properties, required) in work_tool_specs().items()
    ]


def _caller(method: Any, caller: Caller) -> Any:
    async def call(**arguments: Any) -> str:
        return str(await method(caller, **arguments))  # every desk method answers in words

    return call
