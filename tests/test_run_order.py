"""The suite's run order under xdist's worksteal: every test once, chunks as worksteal cuts them, and the modules that
pay the same expensive start kept in one worker's chunk."""

from __future__ import annotations

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
    counts = {"test_heavy_a.py": 6, "test_heavy_b.py": 6, "test_light.py": 40}
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
