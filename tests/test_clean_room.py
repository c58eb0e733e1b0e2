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
    untracked = parse_config('[tests]\nkeep = [".env.test"]\n', source="workspace (untracked)")  # the owner's own
    env = detect_environment(workspace, config=untracked)
    assert env is not None and env.keep == (".env.test",)
    before = environment_identity(env, workspace)
    (workspace / ".env.test").write_text("MODE=other\n")
    assert environment_identity(env, workspace) != before


async def test_a_committed_keep_never_copies_a_credential_file_into_the_test_run(tmp_path: Path) -> None:
    """A committed `[tests] keep` (anyone's commit) naming `.env`, or a folder holding one: the owner's untracked
    credentials would reach the test command, whose output goes back to the worker and the chat. They are left out
    and said; the same list in the owner's untracked file keeps them."""
    from agents.verify.clean_room import clean_room
    from agents.verify.suite_env import detect_environment
    from agents.verify.task_tests import base_config
    from tests.support.git_repos import git, make_user_repo

    repo = make_user_repo(tmp_path / "site")
    (repo / ".agentlab.toml").write_text('[tests]\ncommand = "true"\nkeep = [".env", "conf", "data.txt"]\n')
    git("add", ".agentlab.toml", cwd=repo)
    git("commit", "-q", "-m", "a contributor's config", cwd=repo)
    (repo / ".gitignore").write_text(".env\nconf/\ndata.txt\n")
    (repo / ".env").write_text("STRIPE_KEY=OWNER-SECRET\n")
    (repo / "conf").mkdir()
    (repo / "conf" / ".env.local").write_text("TOKEN=OWNER-SECRET\n")
    (repo / "conf" / "app.ini").write_text("[app]\n")
    (repo / "data.txt").write_text("fixture\n")
    commit = git("rev-parse", "HEAD", cwd=repo)
    env = detect_environment(repo, repo, await base_config(repo, commit))
    assert env is not None and env.keep == ("conf", "data.txt")
    assert any("`.env` was not copied" in note for note in env.notes), env.notes
    async with clean_room(repo, commit, env, tmp_path / "rooms") as room:
        assert not (room / ".env").exists() and not (room / "conf" / ".env.local").exists()
        assert (room / "conf" / "app.ini").is_file() and (room / "data.txt").is_file()
    owners = parse_config('[tests]\ncommand = "true"\nkeep = [".env", "conf"]\n', source="workspace (untracked)")
    env = detect_environment(repo, repo, owners)
    assert env is not None and env.keep == (".env", "conf")
    async with clean_room(repo, commit, env, tmp_path / "rooms") as room:
        assert (room / ".env").is_file() and (room / "conf" / ".env.local").is_file()


def test_a_repositorys_timeout_shortens_a_run_and_never_lengthens_it() -> None:
    from agents.verify.suite_env import TestEnvironment
    from agents.verify.task_tests import run_timeout

    def env(timeout: float | None) -> TestEnvironment:
        return TestEnvironment(kind=".agentlab.toml", command="pytest", display="pytest", timeout=timeout)

    assert run_timeout(env(86_400), 900) == 900, "anyone's commit never holds a run past the owner's bound"
    assert run_timeout(env(60), 900) == 60
    assert run_timeout(env(None), 900) == 900 and run_timeout(None, 900) == 900
