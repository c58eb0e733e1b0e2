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
