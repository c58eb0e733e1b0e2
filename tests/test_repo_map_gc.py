"""The cyclic garbage collector is paused while files are parsed in bulk, and restored after."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest

from agents.repo_map import outline
from agents.repo_map.gc_pause import gc_paused


@pytest.fixture(autouse=True)
def _gc_enabled_around():
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_paused_inside_and_restored_after_even_on_error() -> None:
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("parse failed")
    assert gc.isenabled()


def test_nested_and_concurrent_users_restore_only_when_the_last_leaves() -> None:
    inner_left = threading.Event()
    outer_may_leave = threading.Event()
    seen: list[bool] = []

    def other_thread() -> None:
        with gc_paused():
            inner_left.wait(5)
            seen.append(gc.isenabled())  # the main thread has left its block: still paused for this one
            outer_may_leave.set()

    with gc_paused():
        worker = threading.Thread(target=other_thread)
        worker.start()
        with gc_paused():
            pass
        assert not gc.isenabled()  # the nested block left, the outer one has not
    inner_left.set()
    outer_may_leave.wait(5)
    worker.join(5)
    assert seen == [False]
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled() -> None:
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()


def test_parse_files_parses_with_the_collector_paused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.py").write_text("def f(x):\n    return x\n")
    states: list[bool] = []
    real = outline.python_outline

    def recording(data: bytes, path: str):
        states.append(gc.isenabled())
        return real(data, path)

    monkeypatch.setattr(outline, "python_outline", recording)
    [parsed] = outline.parse_files(tmp_path, ["a.py"], {"a.py": (1, 20)})
    assert isinstance(parsed, outline.FileOutline) and [s.name for s in parsed.symbols] == ["f"]
    assert states == [False]
    assert gc.isenabled()
