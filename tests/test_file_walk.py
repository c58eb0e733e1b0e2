"""The one file walker: git's view of a work tree (ignored files and untracked virtualenvs left out), a walk outside git."""

from __future__ import annotations

from pathlib import Path

from agents.workspaces.file_walk import list_files, walk_files
from tests.conftest import git, make_repo


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


async def test_git_work_tree_lists_tracked_and_unignored_untracked_files(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {".gitignore": "build/\n*.log\n", "app.py": "x = 1\n", "pkg/util.py": ""})
    write(
        root,
        {
            "new_module.py": "y = 2\n",  # untracked, not ignored: listed
            "build/out.py": "",
            "debug.log": "",  # ignored
            "venv/pyvenv.cfg": "home = /usr/bin\n",
            "venv/lib/python3.11/site-packages/urllib3/poolmanager.py": "",
            "node_modules/left-pad/index.js": "",  # untracked and in a skipped folder
        },
    )
    (root / "app.py").write_text("x = 2\n")  # modified tracked file: still listed
    assert await list_files(root) == [".gitignore", "app.py", "new_module.py", "pkg/util.py"]


async def test_a_committed_virtualenv_like_folder_is_kept_and_a_deleted_file_is_not_invented(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"tools/env/pyvenv.cfg": "x\n", "tools/env/run.py": "", "gone.py": ""})
    (root / "gone.py").unlink()  # still in the index: the caller's stat drops it, the list may name it
    listed = await list_files(root)
    assert "tools/env/run.py" in listed and "tools/env/pyvenv.cfg" in listed


async def test_a_subfolder_of_a_repository_lists_its_own_files_relative_to_itself(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"top.py": "", "sub/inner.py": "", "sub/deeper/x.py": ""})
    assert await list_files(root / "sub") == ["deeper/x.py", "inner.py"]


async def test_outside_git_the_walk_skips_the_same_folders(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    write(
        root,
        {
            "main.py": "",
            ".venv/lib/site.py": "",
            "env/pyvenv.cfg": "",
            "env/lib/x.py": "",
            "node_modules/a/index.js": "",
            "src/__pycache__/m.pyc": "",
            "src/m.py": "",
        },
    )
    (root / "link.py").symlink_to(root / "main.py")
    assert await list_files(root) == ["main.py", "src/m.py"]
    assert walk_files(root) == ["main.py", "src/m.py"]


async def test_repository_hooks_and_fsmonitor_are_never_run(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"a.py": ""})
    marker = tmp_path / "ran"
    monitor = tmp_path / "monitor.sh"
    monitor.write_text(f"#!/bin/sh\ntouch {marker}\n")
    monitor.chmod(0o755)
    git(root, "config", "core.fsmonitor", str(monitor))
    assert await list_files(root) == ["a.py"]
    assert not marker.exists()
