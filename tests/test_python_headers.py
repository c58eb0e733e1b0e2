"""A Python file outlined from its headers alone (python_headers.py) outlines exactly as the whole file parsed by `ast`,
and a file the scan cannot follow is outlined from its skeleton or the whole file instead."""

from __future__ import annotations

import ast
import sysconfig
import textwrap
from pathlib import Path

import pytest

from agents.repo_map import python_outline as outline_module
from agents.repo_map.python_headers import headers
from agents.repo_map.python_outline import python_outline
from tests.support.python_sources import LONG_STATEMENTS, TRICKY

Outline = tuple[str, list, list[str]]


def whole_file_outline(data: bytes, path: str, monkeypatch: pytest.MonkeyPatch) -> Outline:
    """The outline from the whole file's tree (neither headers nor skeleton)."""
    with monkeypatch.context() as patch:
        patch.setattr(outline_module, "_headers_outline", lambda data, path: None)
        patch.setattr(outline_module, "skeleton", lambda text: text)
        return python_outline(data, path)


def from_headers(source: str, path: str = "pkg/mod.py") -> Outline:
    got = outline_module._headers_outline(source.encode(), path)
    assert got is not None, "the headers alone tell this file's outline (no fall back)"
    return got


def deduplicated(outline: Outline) -> Outline:
    """As the index stores it: each import target once, in first-seen order."""
    return outline[0], outline[1], list(dict.fromkeys(outline[2]))


AROUND_BLOCKS = textwrap.dedent(
    '''\
    """Doc."""
    from . import importlib
    from .. import (a as b,
        c)
    from .mod import *
    import os.path as osp, sys
    try: import numpy
    except ImportError: numpy = None
    import json; import re
    x = 1; from collections import deque


    class A:
        def f(self): return 1
    value = 1
    if value:
        def g(a, b): ...  # after the class: a function of the module, not A's method


    def outer(x):
        class InFunction:
            def hidden(self): ...
        async def inner():
            async for item in things():
                pass
        @decorate
        def also_hidden(): ...
        raise ValueError(x) \\
            from None


    @functools.cached_property
    @some.thing(1, "two")
    @registry[0]
    def decorated(self, *args, key: int = 3) -> "A":
        pass


    class B(A, metaclass=Meta):
        class C(base.D):
            @staticmethod
            def deep(): pass
        def method(self,
                   other,
        ):
            pass
        x = [
    1]
        def after_table(self): pass
    def last(): import shutil; return shutil
    '''
)


def test_the_headers_outline_as_the_whole_file(monkeypatch: pytest.MonkeyPatch) -> None:
    got = from_headers(AROUND_BLOCKS)
    assert deduplicated(got) == deduplicated(whole_file_outline(AROUND_BLOCKS.encode(), "pkg/mod.py", monkeypatch))
    summary, symbols, imports = got
    assert summary == "Doc."
    assert [(s.name, s.kind, s.parent) for s in symbols] == [
        ("A", "class", None),
        ("f", "method", "A"),
        ("g", "function", None),
        ("outer", "function", None),
        ("decorated", "function", None),
        ("B", "class", None),
        ("C", "class", "B"),
        ("deep", "method", "B.C"),
        ("method", "method", "B"),
        ("after_table", "method", "B"),
        ("last", "function", None),
    ]
    assert [s.signature for s in symbols if s.name in ("decorated", "deep", "method", "C")] == [
        "@cached_property def decorated(self, *args, key: int=3) -> 'A'",
        "class C(base.D)",
        "@staticmethod def deep()",
        "def method(self, other)",
    ]
    assert imports[:5] == ["pkg", "pkg/importlib", "a", "c", "pkg/mod"], "`from . import importlib`: not `import lib`"
    assert {"os/path", "sys", "numpy", "json", "re", "collections/deque", "shutil"} <= set(imports)
    assert "None" not in imports, "`raise … \\` then `from None` is not an import"


@pytest.mark.parametrize("case", ["TRICKY", "LONG_STATEMENTS"])
def test_the_skeletons_cases_outline_from_their_headers(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    source = {"TRICKY": TRICKY, "LONG_STATEMENTS": LONG_STATEMENTS}[case]
    assert deduplicated(from_headers(source)) == deduplicated(
        whole_file_outline(source.encode(), "pkg/mod.py", monkeypatch)
    )


@pytest.mark.parametrize(
    "source",
    [
        "def f():\n\tif x:\n\t\treturn 1\n",  # tabs: Python's widths are not the scan's
        "def f():\r    return 1\rdef g(): pass\r",  # lone carriage returns end lines
        "x = 'a'; import os\n",  # a string before an import on its line
        "@decorator\n\nx = 1\n",  # a decorator of no definition
    ],
)
def test_a_file_the_scan_cannot_follow_is_outlined_from_its_tree(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert outline_module._headers_outline(source.encode(), "m.py") is None
    assert python_outline(source.encode(), "m.py") == whole_file_outline(source.encode(), "m.py", monkeypatch)


def test_carriage_return_line_feeds_are_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    source = AROUND_BLOCKS.replace("\n", "\r\n")
    assert headers(source) is not None
    assert deduplicated(from_headers(source)) == deduplicated(
        whole_file_outline(source.encode(), "pkg/mod.py", monkeypatch)
    )


def test_a_header_copied_out_wrongly_falls_back_to_the_whole_file() -> None:
    """`(yield` then `from x)` on the next line, inside brackets: the scan takes the second line for an import; what
    it copies out does not parse, and the outline comes from the file's tree."""
    source = "def gen():\n    y = (yield\n         from other())\n    return y\n"
    assert outline_module._headers_outline(source.encode(), "m.py") is None
    assert [s.name for s in python_outline(source.encode(), "m.py")[1]] == ["gen"]


# Packages of the standard library, whatever Python runs the tests: real code by many hands (decorators, nested
# classes, `if`/`try` blocks around definitions, multi-line signatures, odd imports).
STANDARD_PACKAGES = ("asyncio", "email", "json", "concurrent", "importlib", "logging")


def test_the_standard_librarys_files_outline_from_their_headers_as_from_their_trees(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(path for package in STANDARD_PACKAGES for path in (root / package).rglob("*.py"))
    assert len(files) > 50, f"the standard library's packages are not at {root}"
    fell_back, differ = [], []
    for file in files:
        data, path = file.read_bytes(), str(file.relative_to(root))
        got = outline_module._headers_outline(data, path)
        if got is None:
            fell_back.append(path)
            continue
        try:
            ast.parse(data)
        except SyntaxError:
            continue  # the whole file does not parse: no tree to hold the headers' outline against
        if deduplicated(got) != deduplicated(whole_file_outline(data, path, monkeypatch)):
            differ.append(path)
    assert differ == [], "outlined otherwise from the headers than from the whole file"
    assert len(fell_back) <= len(files) // 50, f"the scan could not follow {fell_back}"
