"""A hostile repository: what it commits must not choose what the sandbox mounts, where the bot writes,
or which credentials the shell prints back to the model.

Each attack goes through the real bot with the scripted model playing a hostile worker; the assertions are on what
the fake Anthropic server received, what the fake Telegram chat shows, and the host's files.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from PIL import Image

from agents.core.models import TaskStatus
from tests.conftest import USER_ID, BotHarness, git
from tests.fakes import anthropic_server as claude_says
from tests.scripted import RoleScript
from tests.support.sandbox import FAKE_KEY, FAKE_TOKEN, needs_bwrap, planted  # noqa: F401  (planted: a fixture)
from tests.support.tasks import ended, everything_said, start_task, tool_results

pytestmark = needs_bwrap

LINKED_SECRET = "LINKED-VENV-SECRET-8d4"


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A", "-f")
    git(repo, "commit", "-q", "-m", message)


@pytest.mark.settings(max_corrections=0)  # what the tests can reach is the point, not the corrections
@pytest.mark.parametrize("venv", ["home-is-the-bot-folder", "home-is-root", "symlink"])
async def test_a_committed_venv_does_not_open_the_host(
    bot: BotHarness, model: RoleScript, planted: Path, workspace_root: Path, tmp_path: Path, venv: str
) -> None:
    calc = workspace_root / "calc"
    bot_folder = tmp_path  # holds the bot's cwd (its .env) and its data folder (the database)
    database = bot.settings.paths.database_path.resolve()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / ".env").write_text(f"SECRET={LINKED_SECRET}\n")
    if venv == "symlink":
        (calc / ".venv").symlink_to(elsewhere, target_is_directory=True)
    else:
        home = bot_folder / "bin" if venv == "home-is-the-bot-folder" else Path("/")
        (calc / ".venv").mkdir()
        (calc / ".venv" / "pyvenv.cfg").write_text(f"home = {home}\nversion = 3.11.2\n")
    commit_all(calc, "a committed environment")
    attacks = [
        f"cat {bot_folder}/bot-cwd/.env {elsewhere}/.env; cat /proc/1/cwd/.env",
        (
            f"python -c \"import sqlite3; print(sqlite3.connect('{database}').execute('select content from messages')"
            f'.fetchall())"; cat {database} | strings | head -50'
        ),
        f"ls {bot_folder} {planted}/.ssh; echo listed",
    ]
    model.add("orchestrator", start_task("calc", "Look around."), claude_says.text("Started."))
    model.add(
        "code",
        *[claude_says.tool_use("run_command", {"command": c}) for c in attacks],
        claude_says.text("Done looking around."),
    )
    bot.say("look around calc PRIVATE-CHAT-MARKER-3c7")
    task = await ended(bot, 1, timeout=120)
    assert task.status is not TaskStatus.FAILED, task.error
    results = tool_results(model)
    assert len(results) >= len(attacks) and "listed" in results[-1], results
    said = everything_said(bot, model)
    for secret in (FAKE_KEY, FAKE_TOKEN, LINKED_SECRET, "OWNER-HOME-SECRET-9a2", "PRIVATE-CHAT-MARKER-3c7"):
        assert secret not in said, f"{secret} reached the model or the chat through the committed .venv"


def jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 200, 30)).save(out, "JPEG", quality=90)
    return out.getvalue()


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
@pytest.mark.settings(max_corrections=0)  # the writes are the point, not the corrections
@pytest.mark.parametrize("link", ["folder", "gitignore", "file"])
async def test_attachments_are_never_written_through_a_committed_symlink(
    bot: BotHarness, model: RoleScript, workspace_root: Path, tmp_path: Path, link: str
) -> None:
    calc = workspace_root / "calc"
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("ORIGINAL\n")
    folder = calc / ".agentlab" / "attachments"
    if link == "folder":
        (calc / ".agentlab").mkdir()
        folder.symlink_to(victim, target_is_directory=True)
    elif link == "gitignore":
        folder.mkdir(parents=True)
        (folder / ".gitignore").symlink_to(victim / "keep.txt")
    else:
        folder.mkdir(parents=True)
        (folder / "1-photo.jpg").symlink_to(victim / "keep.txt")
    commit_all(calc, "planted links")
    before = {p.name: p.read_bytes() for p in victim.iterdir()}
    model.add(
        "orchestrator",
        claude_says.tool_use(
            "start_task",
            {
                "workspace": "calc",
                "worker": "code",
                "instructions": "Look at the picture.",
                "background": True,
                "attachments": [1],
                "save_attachments": True,
            },
        ),
        claude_says.text("Started #1."),
    )
    model.add("code", claude_says.text("Looked at it."))
    bot.tg.send_photo(USER_ID, jpeg(), width=64, height=48, caption="look at this")
    await ended(bot, 1, timeout=60)
    after = {p.name: p.read_bytes() for p in victim.iterdir()}
    assert after == before, "a file outside the worktree was written through the repository's symlink"
    first = model.requests["code"][0]["messages"][0]["content"]
    assert any(b["type"] == "image" for b in first), "the picture still reaches the worker"
    note = first[-1]["text"]
    assert ".agentlab/attachments/1-photo.jpg" in note or "symbolic link" in note, note


NPMRC_SECRET = "Zq7-NPMRC-SECRET-4471"
PRODUCTION_SECRET = "PRODSECRET-99xq-a1"
HEADER_SECRET = "EXTRAHDR-SECRET-5512"
HELPER_SECRET = "HELPERPW-SECRET-6613"
HISTORY_SECRET = "STAGING-SECRET-77x1"


@pytest.mark.untested_calc  # neither the verdict nor the task's end is what this test is about
async def test_committed_credential_files_and_git_config_tokens_never_reach_the_model_or_the_chat(
    bot: BotHarness, model: RoleScript, workspace_root: Path
) -> None:
    calc = workspace_root / "calc"
    main = git(calc, "rev-parse", "--abbrev-ref", "HEAD").strip()
    git(calc, "checkout", "-q", "-b", "old-staging")
    (calc / ".env.staging").write_text(f"TOKEN={HISTORY_SECRET}\n")
    commit_all(calc, "staging credentials on another branch")
    git(calc, "rm", "-q", ".env.staging")
    commit_all(calc, "removed again")
    git(calc, "checkout", "-q", main)
    (calc / ".npmrc").write_text(f"//registry.example.com/:_authToken={NPMRC_SECRET}\nalways-auth=true\n")
    (calc / ".env.production").write_text(f"NODE_ENV=production\nAPI_KEY={PRODUCTION_SECRET}\n")
    commit_all(calc, "credentials, committed by mistake")
    git(calc, "config", "http.https://example.com/.extraheader", f"AUTHORIZATION: basic {HEADER_SECRET}")
    git(calc, "config", "credential.helper", f"!f() {{ echo username=u; echo password={HELPER_SECRET}; }}; f")
    attacks = [
        "cat .npmrc .env.production; echo done-cat",
        "git show HEAD:.npmrc; git show HEAD:.env.production; git log -p -1 | head -40",
        "git config -l; cat $(git rev-parse --git-common-dir)/config",
        "git log -p --all | grep -a -i -e staging -e token; echo done-history",
    ]
    model.add("orchestrator", start_task("calc", "Look around."), claude_says.text("Started."))
    model.add(
        "code",
        *[claude_says.tool_use("run_command", {"command": c}) for c in attacks],
        claude_says.tool_use("grep", {"pattern": "extraheader|helper", "path": "."}),
        claude_says.text("Done."),
    )
    bot.say("look around calc")
    task = await ended(bot, 1, timeout=120)
    assert task.status is not TaskStatus.FAILED, task.error
    results = tool_results(model)
    assert any("done-cat" in r for r in results) and any("always-auth" in r for r in results), results
    said = everything_said(bot, model) + json.dumps(model.requests)
    assert any("done-history" in r and "env.staging" in r for r in results), results
    for secret in (NPMRC_SECRET, PRODUCTION_SECRET, HEADER_SECRET, HELPER_SECRET, HISTORY_SECRET):
        assert secret not in said, f"{secret} reached the model or the chat"
    assert "masked" in said, "the command ran and its secrets were shown masked"
