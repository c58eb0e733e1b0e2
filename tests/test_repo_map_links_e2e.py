"""A hostile worker points a tracked folder of its worktree at code outside it; the repository map, which the bot
refreshes in its own process outside the sandbox, must never outline a file through that link.

git still lists the folder's tracked files from the index after the worker replaced the folder with a symlink; the
worker (the scripted model through the real bot and real bwrap) then asks `find_symbols_by_name` for what the other
code defines. Its names and signatures (a default value can be a secret) must not come back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import BotHarness, git
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.sandbox import needs_bwrap
from tests.support.tasks import ended, start_task, tool_results

pytestmark = needs_bwrap


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
async def test_a_tracked_folder_turned_into_a_link_is_never_outlined(
    bot: BotHarness, model: RoleScript, workspace_root: Path, tmp_path: Path
) -> None:
    repo = workspace_root / "calc"
    (repo / "pkg").mkdir()
    (repo / "pkg" / "util.py").write_text("def helper():\n    return 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a package")
    elsewhere = tmp_path / "neighbour" / "pkg"  # another project's code, outside every sandbox
    elsewhere.mkdir(parents=True)
    (elsewhere / "util.py").write_text("def neighbour_login(token='NEIGHBOUR-SECRET-5e1'):\n    return token\n")
    model.add("orchestrator", start_task("calc", "Look around."), claude_says.text("Started."))
    model.add(
        "code",
        claude_says.tool_use("find_symbols_by_name", {"query": "helper"}),  # the index of the worktree as it was
        claude_says.tool_use("run_command", {"command": f"rm -rf pkg && ln -s {elsewhere} pkg && echo linked"}),
        claude_says.tool_use("find_symbols_by_name", {"query": "neighbour"}),
        claude_says.text("Done looking around."),
    )
    bot.say("look around calc")
    await ended(bot, 1, timeout=120)
    results = tool_results(model)
    assert any("pkg/util.py:1" in r and "helper" in r for r in results), results
    assert any("linked" in r for r in results), results
    leaked = [r for r in results if "neighbour_login" in r or "NEIGHBOUR-SECRET" in r]
    assert leaked == [], f"the repository map outlined a file through the worker's link: {leaked}"
