"""Writing into a checkout without following symlinks, and what a checkout may lend a task."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from agents.sandbox.safe_paths import FolderReader, NotRegularFile, UnsafePath, append_lines, real_folder, write_file
from agents.verify.suite_env import detect_environment, hide_from_git, link_borrowed


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "target.txt").write_text("ORIGINAL\n")
    return folder


def test_write_file_makes_folders_and_replaces_a_regular_file(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    write_file(root, "a/b/c.txt", b"one")
    write_file(root, "a/b/c.txt", b"two")
    assert (root / "a" / "b" / "c.txt").read_bytes() == b"two"
    assert sorted(p.name for p in (root / "a" / "b").iterdir()) == ["c.txt"], "no temporary file left"


@pytest.mark.parametrize("where", ["folder", "file"])
def test_write_file_refuses_a_symlink_anywhere_on_the_path(tmp_path: Path, outside: Path, where: str) -> None:
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    if where == "folder":
        (root / "a" / "b").symlink_to(outside, target_is_directory=True)
        relative = "a/b/target.txt"
    else:
        (root / "a" / "target.txt").symlink_to(outside / "target.txt")
        relative = "a/target.txt"
    with pytest.raises(UnsafePath, match="symbolic link"):
        write_file(root, relative, b"PWNED")
    with pytest.raises(UnsafePath):
        append_lines(root, relative, "PWNED\n")
    assert (outside / "target.txt").read_text() == "ORIGINAL\n" and len(list(outside.iterdir())) == 1


def test_a_folder_reader_never_reads_through_a_link(tmp_path: Path, outside: Path) -> None:
    """The repository map reads a worktree's files with one FolderReader per batch, each folder opened once: a link
    anywhere on the way, at the file, or put in a folder's place after the reader opened it, is never followed."""
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "kept.txt").write_text("kept")
    (root / "a" / "linked").symlink_to(outside, target_is_directory=True)
    (root / "a" / "target.txt").symlink_to(outside / "target.txt")
    os.mkfifo(root / "a" / "fifo")
    with FolderReader(root) as reader:
        assert reader.read("a/b/kept.txt") == b"kept"
        for relative in ("a/linked/target.txt", "a/target.txt", "../outside/target.txt", "/etc/hostname"):
            with pytest.raises(UnsafePath):
                reader.read(relative)
        with pytest.raises(NotRegularFile):
            reader.read("a/fifo")  # not opened for reading as a file (and never blocks)
        (root / "a" / "b").rename(root / "a" / "moved")
        (root / "a" / "b").symlink_to(outside, target_is_directory=True)
        with pytest.raises(FileNotFoundError):
            reader.read("a/b/target.txt")  # the folder it opened, not the link now in its place
        assert reader.read("a/b/kept.txt") == b"kept"


def test_real_folder_refuses_links_and_escapes(tmp_path: Path, outside: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "node_modules").symlink_to(outside, target_is_directory=True)
    assert real_folder(tmp_path, "pkg") == tmp_path / "pkg"
    assert real_folder(tmp_path, "pkg/node_modules") is None
    assert real_folder(tmp_path, "../outside") is None and real_folder(tmp_path, str(outside)) is None


def test_a_symlinked_node_modules_is_not_borrowed(tmp_path: Path, outside: Path) -> None:
    main, checkout = tmp_path / "main", tmp_path / "checkout"
    for folder in (main, checkout):
        folder.mkdir()
        (folder / "package.json").write_text('{"scripts": {"test": "jest"}}')
    (main / "node_modules").symlink_to(outside, target_is_directory=True)
    env = detect_environment(checkout, main)
    assert env is not None and env.borrowed == [] and outside not in env.read_only_paths
    assert link_borrowed(env, checkout) == [] and not (checkout / "node_modules").exists()


def test_hide_from_git_never_writes_through_a_symlinked_exclude(tmp_path: Path, outside: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git" / "info").mkdir(parents=True)
    (repo / ".git" / "info" / "exclude").symlink_to(outside / "target.txt")
    hide_from_git(repo, ["node_modules"])
    assert (outside / "target.txt").read_text() == "ORIGINAL\n"
    (repo / ".git" / "info" / "exclude").unlink()
    hide_from_git(repo, ["node_modules"])
    assert "/node_modules" in (repo / ".git" / "info" / "exclude").read_text()


@pytest.mark.parametrize("planted", ["symlink", "pyvenv-home-only", "foreign-python"])
def test_a_planted_venv_counts_as_no_environment_and_says_so(tmp_path: Path, outside: Path, planted: str) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "test_app.py").write_text("def test_x(): pass\n")
    (outside / "bin").mkdir()
    (outside / "bin" / "python").write_text("")
    (outside / "lib" / "python3.1").mkdir(parents=True)  # no host has Python 3.1
    if planted == "symlink":
        (checkout / ".venv").symlink_to(outside, target_is_directory=True)
    elif planted == "pyvenv-home-only":
        (checkout / ".venv").mkdir()
        (checkout / ".venv" / "pyvenv.cfg").write_text(f"home = {outside}\n")
    else:
        shutil.copytree(outside, checkout / ".venv")
    env = detect_environment(checkout)
    assert env is not None and env.fallback and env.borrowed == []
    assert any("environment was not used" in note for note in env.notes), env.notes
    assert outside not in env.read_only_paths and outside.resolve() not in env.read_only_paths
