"""The screenshot's driver (agents/tools/shoot_pages.py) without a browser: a page of the task's own loopback where
nothing listens is refused before any Chromium starts; every other page is left to Chromium. (Its pictures, taken by
one Chromium in the task's sandbox, are seen through the real bot in tests/test_workers_e2e.py, its refusals in
tests/test_sandbox_attacks.py, the before/after pair in tests/test_review_page_e2e.py.)"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from agents.tools import shoot_pages


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_loopback_page_where_nothing_listens_is_refused_before_chromium_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(shoot_pages, "LISTEN_WAIT", 0.3)
    url = f"http://localhost:{closed_port()}/index.html"
    shots = [{"url": url, "width": 390, "height": 844, "file": str(tmp_path / "shot.png")}]
    # no Chromium at that path: starting one would raise, not answer
    assert shoot_pages.main(json.dumps(shots), str(tmp_path / "no-chromium"), []) == 1
    said = capsys.readouterr().err
    assert "ERR_CONNECTION_REFUSED" in said and url in said, said
    assert not (tmp_path / "shot.png").exists()


def test_pages_that_may_load_are_left_to_chromium(tmp_path: Path) -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert shoot_pages.refused(f"http://127.0.0.1:{port}/") is None  # the task's service is up
    assert shoot_pages.refused((tmp_path / "index.html").as_uri()) is None  # a file of the workspace
    assert shoot_pages.refused("https://example.com/") is None  # outside: the sandbox's network decides
