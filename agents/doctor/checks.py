"""What a check reports: `Check`, one line of the report with its fix, and its `Level` (✓, ! or ✗)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Level(str, Enum):
    """How a check came out; the value is the mark printed in front of its line."""

    ok = "✓"
    warn = "!"
    fail = "✗"


@dataclass(frozen=True)
class Check:
    """One line of the report: `<mark> <name>: <detail>`, then `  fix: <fix>` for ✗ and !."""

    level: Level
    name: str
    detail: str
    fix: str = ""

    def lines(self) -> list[str]:
        out = [f"{self.level.value} {self.name}: {self.detail}"]
        if self.fix and self.level is not Level.ok:
            out.append(f"    fix: {self.fix}")
        return out
