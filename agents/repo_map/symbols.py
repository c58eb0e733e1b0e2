"""What an outliner reports of a file: its symbols, each with a one-line signature."""

from __future__ import annotations

from dataclasses import dataclass

MAX_SIGNATURE_CHARS = 200


@dataclass(frozen=True, slots=True)
class Symbol:
    """One function, class, method or exported constant of a file. Slotted: a map of a big repository holds one per
    definition (sympy: ~36k; without slots each carries a dict of its own, ~2 MB more)."""

    name: str
    kind: str  # function | class | method | field | const | interface | type | enum
    line: int
    signature: str
    parent: str | None = None  # enclosing class ("Outer.Inner" when nested)


def one_line(text: str, limit: int = MAX_SIGNATURE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
