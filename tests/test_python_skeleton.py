"""A Python file's skeleton (function bodies blanked but for their imports) outlines exactly as the whole file."""

from __future__ import annotations

import ast
import textwrap

import pytest

from agents.repo_map import python_outline as outline_module
from agents.repo_map.python_outline import python_outline
from agents.repo_map.python_skeleton import skeleton

TRICKY = textwrap.dedent(
    '''\
    """Module doc: def not_a_function(): and class NotAClass: are words here."""
    import os
    from . import sibling

    TEMPLATE = """
    def in_a_string(x):
        return x
    class AlsoInAString:
    """


    @decorator(
        "arg, with ) a bracket",
    )
    async def fetch(url: str = "http://x#not-a-comment", *, retries: int = 3) -> dict[str, int]:
        """Doc with def inside: def nope(): pass"""
        try:
            import json
        except ImportError:  # the import is still the file's
            json = None
        value = call(1,
    2, 3)  # a continuation at column 0 inside brackets
        text = "a" \\
    "b"
        def inner():
            from collections import deque
            return deque()
        class Local:
            def hidden(self): return 1
        return {url: retries}


    class Outer(Base, metaclass=Meta):
        """Class doc."""
        x: int = 1

        def method(self, a, b=(1, 2)): return a

        @property
        def prop(self) -> int:
            s = \'\'\'
    def fake():
            \'\'\'
            return 1

        class Inner:
            def deep(self, *args, **kwargs):
                pass

    if TYPE_CHECKING:
        def typed_only(x: int) -> int: ...
    else:
        def typed_only(x): return x


    def one_liner(): return 1
    def last(a,
             b): import re; return re
    '''
)


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


LONG_STATEMENTS = textwrap.dedent(
    '''\
    r"""A raw docstring: kept, it is the module's summary."""
    __all__ = [
        "table",
        "Holder",
    ]
    table = {
        1: [2, 3],
        4: (5,
    6),  # a continuation at column 0 inside brackets
    }
    total = 1 + \\
        2


    @decorate(
        [1, 2,
         3],
    )
    def decorated(a, b=[1,
                        2]):
        return a


    class Holder:
        """Class doc."""
        rows = [
            (1, 2),
        ]
        def method(self): return 1
        names = (
            "a",
        ); other = 1


    if True:
        kept = {
            "k": 1,
        }
        def in_if(x): return x
    match = dict(
        a=1,
    )
    match match:
        case {"a": 1}:
            def in_case(): pass
    from os import (
        path,
    )
    '''
)


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
