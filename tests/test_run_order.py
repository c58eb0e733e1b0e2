"""The suite's run order under xdist's worksteal: every test once, chunks as worksteal cuts them, and the modules that
pay the same expensive start kept in one worker's chunk."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from tests.run_order import TOGETHER, chunk_sizes, run_order


@dataclass(frozen=True)
class Item:
    """What run_order reads of a collected test: its module's path (every module here has recorded seconds)."""

    path: Path
    name: str


def items_of(counts: dict[str, int]) -> list[Item]:
    return [Item(Path("/suite") / module, f"{module}::{i}") for module, n in counts.items() for i in range(n)]


def test_modules_that_travel_together_land_in_one_chunk_and_every_test_runs_once() -> None:
    whisper, temporal = TOGETHER[0], TOGETHER[1]
    counts = {"test_heavy_a.py": 6, "test_heavy_b.py": 6, "test_light.py": 60}
    counts |= {name: 4 for name in (*whisper, *temporal)}
    recorded = {"test_heavy_a.py": 30.0, "test_heavy_b.py": 30.0, "test_light.py": 1.0}
    recorded |= {name: 8.0 for name in (*whisper, *temporal)}
    items = items_of(counts)

    ordered = run_order(items, 3, recorded)  # type: ignore[arg-type]  # stand-ins with the two attributes it reads

    assert sorted(i.name for i in ordered) == sorted(i.name for i in items)
    sizes, chunks, start = chunk_sizes(len(ordered), 3), [], 0
    for size in sizes:
        chunks.append({i.path.name for i in ordered[start : start + size]})
        start += size
    for group in (whisper, temporal):
        holding = [n for n, chunk in enumerate(chunks) if chunk & set(group)]
        assert len(holding) == 1, f"{group} split over chunks {holding}"


def test_every_module_on_the_temporal_dev_server_travels_with_the_temporal_group() -> None:
    """A module that asks for the `temporal` fixture (directly, or through tests/support/temporal.py's fixtures) and
    is left out of the group starts a dev server of its own in whichever worker runs it."""
    users = set()
    for path in Path(__file__).parent.glob("test_*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            imports = isinstance(node, ast.ImportFrom) and node.module == "tests.support.temporal"
            asks = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and "temporal" in {
                a.arg for a in node.args.args
            }
            if imports or asks:
                users.add(path.name)
    assert users and users <= set(TOGETHER[1]), (
        f"add to the Temporal group in tests/run_order.py: {users - set(TOGETHER[1])}"
    )
