"""A Python file's skeleton (function bodies blanked but for their imports) outlines exactly as the whole file: the
outline of a file the headers alone cannot tell (tests/test_python_headers.py)."""

from __future__ import annotations

import ast

import pytest

from agents.repo_map import python_outline as outline_module
from agents.repo_map.python_outline import python_outline
from agents.repo_map.python_skeleton import skeleton
from tests.support.python_sources import LONG_STATEMENTS, TRICKY


@pytest.fixture(autouse=True)
def outlined_from_the_skeleton(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are of the skeleton: the outline from the headers alone (tests/test_python_headers.py) is off."""
    monkeypatch.setattr(outline_module, "_headers_outline", lambda data, path: None)


def full_outline(source: str, path: str = "pkg/mod.py", monkeypatch: pytest.MonkeyPatch | None = None):
    assert monkeypatch is not None
    with monkeypatch.context() as patch:
        patch.setattr(outline_module, "skeleton", lambda text: text)  # parse the whole file
        return python_outline(source.encode(), path)


def test_the_skeleton_outlines_as_the_whole_file(monkeypatch: pytest.MonkeyPatch) -> None:
    bones = skeleton(TRICKY)
    assert bones.count("\n") == TRICKY.count("\n"), "line numbers are kept"
    ast.parse(bones)  # it parses by itself (no fall back)
    assert "return {url: retries}" not in bones and "deque()" not in bones, "function bodies are blanked"
    assert "def in_a_string" in bones, "a string at module level is kept whole"
    got = python_outline(TRICKY.encode(), "pkg/mod.py")
    assert got == full_outline(TRICKY, monkeypatch=monkeypatch)
    summary, symbols, imports = got
    assert summary.startswith("Module doc")
    assert [s.name for s in symbols] == [
        "fetch",
        "Outer",
        "method",
        "prop",
        "Inner",
        "deep",
        "typed_only",
        "typed_only",
        "one_liner",
        "last",
    ]
    assert {"os", "json", "collections/deque", "pkg/sibling"} <= set(imports)


def test_a_skeleton_that_does_not_parse_falls_back_to_the_whole_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outline_module, "skeleton", lambda text: "def broken(:\n")
    _, symbols, _ = python_outline(b"def fine(a):\n    return a\n", "m.py")
    assert [s.name for s in symbols] == ["fine"]


def test_long_simple_statements_outside_functions_are_blanked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables and lists at module or class level are parsed into many nodes that an outline never reads: blanked,
    while docstrings, decorators, imports and blocks that may hold definitions stay (the outline is the same)."""
    bones = skeleton(LONG_STATEMENTS)
    assert bones.count("\n") == LONG_STATEMENTS.count("\n"), "line numbers are kept"
    ast.parse(bones)
    for gone in ('"table",', "1: [2, 3]", "(1, 2),", '"a",', '"k": 1'):
        assert gone not in bones, f"{gone!r} is in a blanked statement"
    for kept in ('r"""A raw docstring', "[1, 2,", "2]):", "a=1,", "match match:", "def in_case", "path,"):
        assert kept in bones, f"{kept!r} is kept"
    got = python_outline(LONG_STATEMENTS.encode(), "pkg/mod.py")
    assert got == full_outline(LONG_STATEMENTS, monkeypatch=monkeypatch)
    summary, symbols, imports = got
    assert summary.startswith("A raw docstring")
    assert [s.name for s in symbols] == ["decorated", "Holder", "method", "in_if", "in_case"]
    assert "os/path" in imports
