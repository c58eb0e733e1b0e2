"""One file can never outgrow a task's disk budget, even for a moment: the kernel refuses it (RLIMIT_FSIZE), where the
budget's poll would only see it at its next look. Real bwrap, a real task's bounds."""

from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path

import pytest

from agents.core.secrets_filter import SecretsFilter
from agents.sandbox.bwrap import spec_for
from agents.sandbox.shell import run_command
from agents.sandbox.task_limits import DiskBudget, TaskBounds
from tests.support.sandbox import PROBE

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or not sys.platform.startswith("linux"), reason="needs bubblewrap (bwrap)"
)


async def test_a_file_larger_than_the_tasks_whole_budget_is_refused_at_once(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    bounds = TaskBounds("burst", 1 << 30, 512, DiskBudget(root, 8 << 20))  # per-file limit of the spec: 1 GB
    spec = dataclasses.replace(spec_for(SecretsFilter(), PROBE, root), task=bounds)
    burst = (
        "fallocate -l 40M reserved.bin; echo fallocate-exit=$?; "
        "(head -c 40M /dev/zero > written.bin); echo write-exit=$?; "
        "stat -c '%n %s' reserved.bin written.bin 2>&1"
    )
    try:
        result = await run_command(burst, root, 60, sandbox=spec)
    finally:
        await bounds.close()
    output = result.output
    assert "fallocate-exit=0" not in output, f"a 40 MB reservation passed an 8 MB budget: {output}"
    assert "write-exit=0" not in output, output
    assert not (root / "reserved.bin").exists() or (root / "reserved.bin").stat().st_size <= 8 << 20
    assert not (root / "written.bin").exists() or (root / "written.bin").stat().st_size <= 8 << 20, output


async def test_a_reservation_that_keeps_the_file_size_is_refused(tmp_path: Path) -> None:
    """`fallocate --keep-size` reserves blocks without growing the file's size, which RLIMIT_FSIZE never sees."""
    root = tmp_path.resolve()
    bounds = TaskBounds("keep", 1 << 30, 512, DiskBudget(root, 8 << 20))
    spec = dataclasses.replace(spec_for(SecretsFilter(), PROBE, root), task=bounds)
    burst = ": > kept.bin; fallocate --keep-size -l 40M kept.bin; echo keep-exit=$?; fallocate -l 1M plain.bin; echo plain-exit=$?"
    try:
        result = await run_command(burst, root, 60, sandbox=spec)
    finally:
        await bounds.close()
    output = result.output
    assert "keep-exit=0" not in output, f"40 MB were reserved past an 8 MB budget: {output}"
    assert "plain-exit=0" in output, output  # an ordinary reservation within the per-file bound still works
    kept = root / "kept.bin"
    assert not kept.exists() or kept.stat().st_blocks * 512 <= 8 << 20, output


@pytest.mark.parametrize("swapped", ["during the walk", "before the delete"])
async def test_the_clean_up_past_the_budget_never_deletes_through_a_link_swapped_in(
    tmp_path: Path, swapped: str
) -> None:
    """Past its disk budget the task's recent files are deleted, outside any sandbox. A service of the task that swaps
    a folder of the worktree for a link out of it, again and again, must not make that delete (or count) anything
    outside the worktree: the walk goes by directory descriptors and each delete by its folder's descriptor."""
    import ctypes
    import threading

    from agents.sandbox.task_limits import DiskBudget

    root, outside = tmp_path / "worktree", tmp_path / "next-door"
    root.mkdir()
    outside.mkdir()
    names = [f"file-{i}.bin" for i in range(100)]
    for name in names:  # the neighbour's files: recent, with the names the task's files have
        (outside / name).write_bytes(b"n" * 8192)
    budget = DiskBudget(root, 4096)
    await budget.start()
    (root / "real").mkdir()
    for name in names:
        (root / "real" / name).write_bytes(b"t" * 8192)
    (root / "link").symlink_to(outside)
    libc = ctypes.CDLL(None, use_errno=True)
    stop = threading.Event()

    def swap() -> None:  # one atomic exchange of the two names at a time
        while not stop.is_set():
            libc.renameat2(-100, bytes(root / "real"), -100, bytes(root / "link"), 2)  # RENAME_EXCHANGE

    swapper = threading.Thread(target=swap, daemon=True)
    if swapped == "during the walk":
        swapper.start()
    try:
        for _ in range(3):
            await budget.over(force=True)
            if swapped == "before the delete" and not swapper.is_alive():
                swapper.start()  # the walk saw the folder; the deletes may each meet the link
            await budget.exceeded()
    finally:
        stop.set()
        if swapper.is_alive():
            swapper.join()
    assert sorted(p.name for p in outside.iterdir()) == sorted(names), "deleted outside the worktree"
