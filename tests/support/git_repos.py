"""Repositories as a user makes them, and a git with no identity unless the bot passes one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

USER = ("-c", "user.name=Some User", "-c", "user.email=user@example.com")


@pytest.fixture(autouse=True)  # for every test of a module that imports it
def no_git_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty HOME and no system config: git knows no identity unless the bot passes one."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in (
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "EMAIL",
        "GIT_CONFIG_GLOBAL",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
    ):
        monkeypatch.delenv(name, raising=False)


def git(*args: str, cwd: Path) -> str:
    """Synchronous git for test setup and checks (as the user, with an explicit identity)."""
    done = subprocess.run(["git", *USER, *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def make_user_repo(path: Path) -> Path:
    path.mkdir()
    git("init", "-q", "-b", "main", cwd=path)
    (path / "app.py").write_text("VALUE = 1\n")
    (path / "README.md").write_text("# demo\n")
    git("add", "-A", cwd=path)
    git("commit", "-q", "-m", "user's first commit", cwd=path)
    return path
