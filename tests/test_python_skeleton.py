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
