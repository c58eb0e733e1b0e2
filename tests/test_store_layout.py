"""The store stays split by what it keeps: `Store` is made of one class per kind of record, none of which hides
another's method, and no class of agents/store grows past ~300 lines (nor a function past ~60 without saying why)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from agents.store.connection import Connection
from agents.store.database import Store

STORE = Path(__file__).resolve().parent.parent / "agents" / "store"
MAX_CLASS_LINES = 300
MAX_FUNCTION_LINES = 60


def test_store_is_made_of_record_classes_none_hiding_another() -> None:
    parts = [c for c in Store.__mro__[1:] if c not in (Connection, object)]
    assert len(parts) >= 7 and all(issubclass(c, Connection) for c in parts)
    owner: dict[str, str] = {}
    for part in parts:
        for name, value in vars(part).items():
            if callable(value) and not name.startswith("__"):
                assert name not in owner, f"{name} is defined in both {owner[name]} and {part.__name__}: Store sees one"
                owner[name] = part.__name__
    connection = {n for n, v in vars(Connection).items() if callable(v) and not n.startswith("__")}
    assert not connection & owner.keys(), "a record class redefines a method of Connection"
    assert not {n for n, v in vars(Store).items() if inspect.iscoroutinefunction(v)} & owner.keys()


def test_no_store_class_or_function_too_long() -> None:
    too_long = []
    for path in sorted(STORE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            size = (node.end_lineno or node.lineno) - node.lineno + 1 if hasattr(node, "lineno") else 0
            if isinstance(node, ast.ClassDef) and size > MAX_CLASS_LINES:
                too_long.append(f"class {path.name}:{node.name} has {size} lines")
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and size > MAX_FUNCTION_LINES
                and not ast.get_docstring(node)
            ):
                too_long.append(f"{path.name}:{node.name} has {size} lines and no docstring saying why")
    assert not too_long, too_long
