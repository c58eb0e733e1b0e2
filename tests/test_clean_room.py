"""The clean room's parts: `.agentlab.toml [tests] keep` read and copied (never through a link), and the causes a
run that cannot get through its tests is given (a missing module, an uncommitted file the tests looked for)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agents.verify.clean_room import copy_kept
from agents.verify.run_causes import missing_module, needed_untracked
from agents.verify.suite_env import TestConfigError, parse_config


def test_keep_is_a_list_of_paths_inside_the_workspace() -> None:
    config = parse_config('[tests]\nkeep = [".env.test", "generated/"]\n')
    assert config is not None and config.keep == (".env.test", "generated")
    for bad in ('"x"', '["/etc/passwd"]', '["../up"]', '[".git/config"]', "[1]"):
        with pytest.raises(TestConfigError, match="keep must be a list of paths"):
            parse_config(f"[tests]\nkeep = {bad}\n")


def test_junit_is_a_path_inside_the_workspace() -> None:
    config = parse_config('[tests]\ncommand = "make test"\njunit = "reports/junit.xml"\n')
    assert config is not None and config.junit == "reports/junit.xml"
    for bad in ('"/home/owner/notes.xml"', '"../../outside.xml"', '".git/junit.xml"', '" "', "1"):
        with pytest.raises(TestConfigError, match="junit must be a path inside the workspace"):
            parse_config(f'[tests]\ncommand = "make test"\njunit = {bad}\n')


def test_kept_files_are_copied_but_never_through_a_link(tmp_path: Path) -> None:
    workspace, room = tmp_path / "w", tmp_path / "room"
    (workspace / "generated").mkdir(parents=True)
    (workspace / "generated" / "api.py").write_text("X = 1\n")
    (workspace / ".env.test").write_text("MODE=test\n")
    (tmp_path / "secret").write_text("not for the tests\n")
    os.symlink(tmp_path / "secret", workspace / "linked")
    os.symlink(tmp_path, workspace / "outside")
    room.mkdir()
    (room / "committed.txt").write_text("from the commit\n")
    (workspace / "committed.txt").write_text("the workspace's copy\n")
    keep = (".env.test", "generated", "linked", "outside/secret", "committed.txt", "missing")
    assert copy_kept(keep, workspace, room) == [".env.test", "generated"]
    assert (room / ".env.test").read_text() == "MODE=test\n" and (room / "generated" / "api.py").is_file()
    assert not os.path.lexists(room / "linked") and not os.path.lexists(room / "outside")
    assert (room / "committed.txt").read_text() == "from the commit\n", "committed content wins"


def test_a_missing_module_is_named_with_where_it_was_looked_for_from() -> None:
    node = (
        "node:internal/modules/esm/resolve:873\n  throw new ERR_MODULE_NOT_FOUND(packageName, "
        "fileURLToPath(base), null);\nError [ERR_MODULE_NOT_FOUND]: Cannot find package 'vite' imported from "
        "/home/me/repo/packages/vitest/dist/cli.js\n"
    )
    said = missing_module(node, "/tmp/room")
    assert said is not None and said.startswith("the module `vite` cannot be found (looked for from ")
    assert "`/home/me/repo/packages/vitest/dist/cli.js`" in said and "install it in the workspace" in said
    inside = missing_module("Cannot find package 'vite' imported from /tmp/room/run.js", "/tmp/room")
    assert inside is not None and "(looked for from `run.js`)" in inside, "a path in the room is shown relative"
    python = (
        "Traceback:\n  File \"/tmp/room/conftest.py\", line 1, in <module>\nModuleNotFoundError: No module named 'yaml'"
    )
    said = missing_module(python, "/tmp/room")
    assert said is not None and "`yaml`" in said and "(looked for from `conftest.py`)" in said
    assert missing_module("1 failed, 2 passed", "/tmp/room") is None


def test_an_uncommitted_file_is_needed_only_when_a_run_names_it() -> None:
    untracked = [".env.test", "notes.txt", "generated/", "a.py"]
    output = "FileNotFoundError: [Errno 2] No such file or directory: '.env.test'\nsee /x/generated/api.py"
    assert needed_untracked([output], untracked) == [".env.test", "generated"]
    assert needed_untracked(["1 failed: assert 2 == 3 in data.py"], untracked) == []


def test_a_changed_kept_file_changes_the_kept_base_runs_key(tmp_path: Path) -> None:
    from agents.verify.base_run_cache import environment_identity
    from agents.verify.suite_env import detect_environment

    workspace = tmp_path / "w"
    workspace.mkdir()
    (workspace / "test_a.py").write_text("def test_a():\n    pass\n")
    (workspace / ".env.test").write_text("MODE=test\n")
    env = detect_environment(workspace, config=parse_config('[tests]\nkeep = [".env.test"]\n'))
    assert env is not None and env.keep == (".env.test",)
    before = environment_identity(env, workspace)
    (workspace / ".env.test").write_text("MODE=other\n")
    assert environment_identity(env, workspace) != before
