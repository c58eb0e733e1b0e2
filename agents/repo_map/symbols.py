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

    def __reduce__(self) -> tuple[type[Symbol], tuple[str, str, int, str, str | None]]:
        """Pickled as its fields, rebuilt by the constructor: a parse process sends every symbol of its files to the
        bot (sympy: ~36k), and the state methods dataclasses give a frozen slotted class run Python per field
        (pickling and unpickling both took twice as long)."""
        return (Symbol, (self.name, self.kind, self.line, self.signature, self.parent))


def one_line(text: str, limit: int = MAX_SIGNATURE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
