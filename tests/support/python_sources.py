"""Python sources that are hard to outline by scanning text: definitions and imports inside strings, brackets,
blocks and one-liners; long simple statements. Shared by the skeleton's and the headers' tests."""

from __future__ import annotations

import textwrap

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
