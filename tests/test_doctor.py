"""`agentlab doctor` against the loopback fakes: every check's ✓, ✗ and ! outcomes and the exit code."""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import json
import os
import shutil
import socket
import sqlite3
import stat
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pydantic import SecretStr

from agents import doctor as dr
from agents.core.settings import Settings
from agents.doctor import Level
from agents.store.migrations import LATEST_VERSION
from telegram_bot.cli import main
from tests.conftest import USER_ID, make_repo, make_settings
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram

REQUIRED_KEYS = ("TELEGRAM_BOT_TOKEN", "ANTHROPIC_API_KEY", "ALLOWED_USER_IDS", "WORKSPACE_PATH")
OTHER_KEYS = (
    "TELEGRAM_API_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "BOT_REPOSITORY",
    "DATABASE_PATH",
    "WHISPER_MODEL",
    "CHROMIUM_PATH",
    "WEBHOOK_URL",
    "WEBHOOK_SECRET_TOKEN",
    "ORCHESTRATOR_MODEL",
    "WORKER_MODEL",
)


def marks(output: str) -> list[str]:
    return [line for line in output.splitlines() if line[:2] in ("✓ ", "✗ ", "! ")]


def fake_chromium(tmp_path: Path) -> Path:
    exe = tmp_path / "bin" / "chromium"
    exe.parent.mkdir(exist_ok=True)
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    return exe


@pytest.fixture
def ready_env(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    fake_telegram: FakeTelegram,
    fake_anthropic: FakeAnthropic,
    workspace_root: Path,
    bot_repo: Path,
) -> Path:
    """Environment variables for a complete setup against the fakes; the cwd is an empty folder (no .env)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    checkpoint = tmp_path / "tiny-checkpoint.pt"
    checkpoint.write_bytes(b"\0" * 3000)
    for key in REQUIRED_KEYS + OTHER_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    values = {
        "TELEGRAM_BOT_TOKEN": fake_telegram.token,
        "TELEGRAM_API_BASE_URL": fake_telegram.url,
        "ANTHROPIC_API_KEY": "sk-test",
        "ANTHROPIC_BASE_URL": fake_anthropic.url,
        "ALLOWED_USER_IDS": str(USER_ID),
        "WORKSPACE_PATH": str(workspace_root),
        "BOT_REPOSITORY": str(bot_repo),
        "DATABASE_PATH": str(tmp_path / "data" / "agentlab.db"),
        "WHISPER_MODEL": str(checkpoint),
        "CHROMIUM_PATH": str(fake_chromium(tmp_path)),
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    # the fake chromium above cannot run a real browser: its own lines are tested in tests/test_browser_parts.py
    monkeypatch.setattr(dr, "check_browser", lambda _settings: dr.Check(dr.Level.ok, "browser", "tested elsewhere"))
    return cwd


def test_doctor_against_the_fakes_is_all_green(
    ready_env: Path, capsys, fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    lines = marks(out)
    assert lines and all(line.startswith("✓ ") for line in lines), out
    text = "\n".join(lines)
    assert "✓ settings: valid" in text
    assert "✓ Telegram: token accepted, the bot is @test_bot" in text
    assert "✓ Anthropic: API key accepted" in text
    assert "calc" in text and "group-therapy" in text and "2 git repositories" in text
    assert "BOT_REPOSITORY" in text and "agentlab-self" in text
    assert "agentlab <agentlab@localhost>" in text and "git version" in text
    assert "tiny-checkpoint.pt (2.9 KB)" in text
    assert "chromium" in text and "long polling" in text
    assert "database:" in text and "created" in text
    assert "Ready" in out
    assert fake_telegram.calls("getMe"), "getMe reached the fake Telegram"
    assert len(fake_anthropic.count_token_requests) == 1 and fake_anthropic.calls == 0, "count_tokens only, no spend"
    assert fake_anthropic.count_token_requests[0].body["model"] == "claude-sonnet-4-6"
    assert (tmp_path / "data" / "agentlab.db").is_file()


def test_a_env_other_users_may_read_is_warned_of(ready_env: Path, capsys) -> None:
    """The .env holds the bot's token and API key; `cp .env.example .env` makes it readable by every user of the
    machine, and doctor said "Ready" all the same. It warns and names the fix; a .env of mode 600 is a ✓."""
    env = ready_env / ".env"
    env.write_text("LOG_LEVEL=INFO\n")
    env.chmod(0o644)
    assert main(["doctor"]) == 0  # a warning, not a failure: the bot runs
    out = capsys.readouterr().out
    assert any(line.startswith("! .env:") and "mode 0644" in line for line in marks(out)), out
    assert "chmod 600 .env" in out
    env.chmod(0o600)
    main(["doctor"])
    assert "✓ .env: readable by its owner alone" in capsys.readouterr().out


def test_empty_env_file_prints_what_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("")
    for key in REQUIRED_KEYS + OTHER_KEYS:
        monkeypatch.delenv(key, raising=False)
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    [line] = marks(out)
    assert line.startswith("✗ settings:")
    for key in REQUIRED_KEYS:
        assert f"{key}: missing (required)" in line
    assert "agentlab init" in out


def test_malformed_setting_is_named(monkeypatch: pytest.MonkeyPatch, ready_env: Path, capsys) -> None:
    monkeypatch.setenv("ALLOWED_USER_IDS", "me, you")
    assert main(["doctor"]) == 1
    [line] = marks(capsys.readouterr().out)
    assert line.startswith("✗ settings: ALLOWED_USER_IDS: must be comma-separated Telegram user ids")


def test_rejected_token_fails(monkeypatch: pytest.MonkeyPatch, ready_env: Path, capsys) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123456:WRONG")
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "✗ Telegram: token rejected (401 Unauthorized)" in out
    assert "@BotFather" in out
    assert "✓ Anthropic: API key accepted" in out, "the other checks still run"
    assert "WRONG" not in out, "the token is never printed"
    assert "1 required check failed: Telegram." in out


# ---------------------------------------------------------------------------------------------------- network


@pytest.fixture
def settings(
    fake_telegram: FakeTelegram, fake_anthropic: FakeAnthropic, tmp_path: Path, workspace_root: Path
) -> Settings:
    return make_settings(fake_telegram, fake_anthropic, tmp_path, workspace_root)


class _Reply401(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def anthropic_refusing() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Reply401)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def test_rejected_anthropic_key(settings: Settings, anthropic_refusing: str) -> None:
    check = await dr.check_anthropic(settings.model_copy(update={"anthropic_base_url": anthropic_refusing}))
    assert check.level is Level.fail
    assert "API key rejected" in check.detail and "ANTHROPIC_API_KEY" in check.fix


async def test_unreachable_services_fail_fast(settings: Settings) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    broken = settings.model_copy(update={"anthropic_base_url": dead, "telegram_api_base_url": dead})
    telegram, claude = await asyncio.gather(dr.check_telegram(broken), dr.check_anthropic(broken))
    assert telegram.level is Level.fail and "cannot reach" in telegram.detail
    assert settings.telegram.telegram_bot_token.get_secret_value() not in telegram.detail
    assert claude.level is Level.fail and "cannot reach" in claude.detail


async def test_silent_telegram_is_time_boxed(settings: Settings) -> None:
    with socket.socket() as silent:  # accepts connections (backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        loop = asyncio.get_running_loop()
        started = loop.time()
        check = await dr.check_telegram(settings.model_copy(update={"telegram_api_base_url": url}), timeout=0.5)
        assert loop.time() - started < 3
    assert check.level is Level.fail and "no answer" in check.detail and "0.5 s" in check.detail


async def test_second_model_is_checked_too(settings: Settings, fake_anthropic: FakeAnthropic) -> None:
    check = await dr.check_anthropic(settings.model_copy(update={"worker_model": "claude-haiku-4-5"}))
    assert check.level is Level.ok and "claude-haiku-4-5" in check.detail
    assert [r.body["model"] for r in fake_anthropic.count_token_requests] == ["claude-sonnet-4-6", "claude-haiku-4-5"]


# ---------------------------------------------------------------------------------------------- local checks


async def test_workspace_folders_that_are_not_repositories_are_warnings(
    settings: Settings, workspace_root: Path
) -> None:
    (workspace_root / "notes").mkdir()
    (workspace_root / ".hidden").mkdir()
    checks = await dr.check_workspaces(settings)
    assert [c.level for c in checks] == [Level.ok, Level.warn]
    assert "2 git repositories (calc, group-therapy)" in checks[0].detail
    assert checks[1].name == "workspace notes" and "not a git repository" in checks[1].detail
    assert "git init" in checks[1].fix


async def test_missing_workspace_root_fails(settings: Settings, tmp_path: Path) -> None:
    [check] = await dr.check_workspaces(settings.model_copy(update={"workspace_path": tmp_path / "nope"}))
    assert check.level is Level.fail and "does not exist" in check.detail


async def test_empty_workspace_root_warns(settings: Settings, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    [check] = await dr.check_workspaces(settings.model_copy(update={"workspace_path": tmp_path / "empty"}))
    assert check.level is Level.warn and "no project folders" in check.detail


async def test_bot_repository(settings: Settings, tmp_path: Path, bot_repo: Path) -> None:
    unset = await dr.check_bot_repository(settings)
    assert unset is not None and unset.level is Level.ok and unset.detail.startswith("off (unset")
    good = await dr.check_bot_repository(settings.model_copy(update={"bot_repository": bot_repo}))
    assert good is not None and good.level is Level.ok
    plain = tmp_path / "plain"
    plain.mkdir()
    bad = await dr.check_bot_repository(settings.model_copy(update={"bot_repository": plain}))
    assert bad is not None and bad.level is Level.fail and "not a git repository" in bad.detail
    gone = await dr.check_bot_repository(settings.model_copy(update={"bot_repository": tmp_path / "gone"}))
    assert gone is not None and gone.level is Level.fail


async def test_git_identity_and_binary(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    custom = settings.model_copy(update={"git_author_name": "Robo", "git_author_email": "robo@example.com"})
    binary, identity = await dr.check_git(custom)
    assert binary.level is Level.ok and binary.detail.startswith("git version")
    assert identity.level is Level.ok and "Robo <robo@example.com>" in identity.detail
    monkeypatch.setenv("PATH", "/nonexistent")
    binary, identity = await dr.check_git(custom)
    assert binary.level is Level.fail and "apt install git" in binary.fix
    assert identity.level is Level.ok


def test_whisper_model_names(settings: Settings, tmp_path: Path) -> None:
    cache = tmp_path / "whisper-cache"
    check = dr.check_whisper(settings.model_copy(update={"whisper_model": "base"}), cache_dir=cache)
    assert check.level is Level.warn and "downloads it when the first voice note comes (~145 MB" in check.detail
    assert check.fix.endswith("choose a smaller WHISPER_MODEL: tiny"), check.fix  # base itself is no smaller choice
    cache.mkdir()
    (cache / "large-v3-turbo.pt").write_bytes(b"\0" * (2 << 20))
    check = dr.check_whisper(settings.model_copy(update={"whisper_model": "turbo"}), cache_dir=cache)
    assert check.level is Level.ok and "(2.0 MB)" in check.detail


def test_whisper_checkpoint_paths(settings: Settings, tmp_path: Path) -> None:
    missing = dr.check_whisper(settings)  # make_settings points at a checkpoint that does not exist
    assert missing.level is Level.fail and "does not exist" in missing.detail
    unknown = dr.check_whisper(settings.model_copy(update={"whisper_model": "gigantic"}))
    assert unknown.level is Level.fail and "neither a model name nor a file" in unknown.detail


def test_whisper_cache_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert dr.whisper_cache_dir() == tmp_path / "whisper"


@pytest.mark.slow
def test_whisper_table_matches_whisper() -> None:
    # whisper's own table, read from its source: importing whisper imports torch (over a second of CPU)
    spec = importlib.util.find_spec("whisper")
    assert spec is not None and spec.origin is not None, "openai-whisper is installed"
    source = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    [table] = [
        node.value
        for node in source.body
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["_MODELS"]
    ]
    models = ast.literal_eval(table)
    assert "tiny" in models and "large-v3" in models, "whisper's table of downloadable models"
    assert set(dr.WHISPER_DOWNLOADS) == set(models)
    for name, url in models.items():
        assert dr.WHISPER_DOWNLOADS[name][0] == os.path.basename(url), name


def test_chromium_is_optional(settings: Settings, tmp_path: Path) -> None:
    found = dr.check_chromium(settings.model_copy(update={"chromium_path": str(fake_chromium(tmp_path))}))
    assert found.level is Level.ok
    absent = dr.check_chromium(settings.model_copy(update={"chromium_path": str(tmp_path / "no-chromium")}))
    assert absent.level is Level.warn and "CHROMIUM_PATH" in absent.detail


async def test_database_versions(settings: Settings, tmp_path: Path) -> None:
    created = await dr.check_database(settings)
    assert created.level is Level.ok and "created" in created.detail
    again = await dr.check_database(settings)
    assert again.level is Level.ok and f"schema v{LATEST_VERSION}, the latest" in again.detail

    old = tmp_path / "old.db"
    sqlite3.connect(old).close()  # an empty database at schema v0
    migrated = await dr.check_database(settings.model_copy(update={"database_path": old}))
    assert migrated.level is Level.ok and f"migrated v0 → v{LATEST_VERSION}" in migrated.detail

    future = tmp_path / "future.db"
    db = sqlite3.connect(future)
    db.execute(f"PRAGMA user_version={LATEST_VERSION + 1}")
    db.close()
    newer = await dr.check_database(settings.model_copy(update={"database_path": future}))
    assert newer.level is Level.fail and "newer than this agentlab" in newer.detail


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
async def test_unwritable_database_folder_fails(settings: Settings, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        check = await dr.check_database(settings.model_copy(update={"database_path": locked / "sub" / "a.db"}))
    finally:
        locked.chmod(0o755)
    assert check.level is Level.fail and "writable" in check.fix


def test_updates_mode_line(settings: Settings) -> None:
    assert "long polling" in dr.check_updates_mode(settings).detail
    hooked = settings.model_copy(update={"webhook_url": "https://bot.example.com", "webhook_port": 9000})
    assert (
        "webhook https://bot.example.com/telegram → listening on 127.0.0.1:9000" in dr.check_updates_mode(hooked).detail
    )


async def test_a_crashing_check_is_reported_not_raised(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(_settings: Settings) -> None:
        raise RuntimeError("kaput")

    monkeypatch.setattr(dr, "check_chromium", boom)
    # the real browser check starts chrome-devtools-mcp and Chromium (~2 s of CPU); what is checked here is the
    # guard around every check, which the browser check's own outcome does not touch
    monkeypatch.setattr(dr, "check_browser", lambda _settings: dr.Check(dr.Level.ok, "browser", "tested elsewhere"))
    checks = await dr.run_checks(settings)
    [crashed] = [c for c in checks if c.name == "chromium"]
    assert crashed.level is Level.fail and "kaput" in crashed.detail


def test_non_git_workspace_alone_keeps_exit_zero(ready_env: Path, workspace_root: Path, capsys) -> None:
    (workspace_root / "scratch").mkdir()
    make_repo(workspace_root / "more", {"a.txt": "a\n"})
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "! workspace scratch: not a git repository" in out
    assert "1 optional warning" in out


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
async def test_sandbox_check_says_what_the_machine_cannot_bound(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No cgroup hierarchy to make a task cgroup in, no pasta on PATH: doctor warns about both (an allowed network
    then goes out through the bot's proxy only)."""
    from agents.sandbox import task_cgroup

    bin_dir = tmp_path / "only-bwrap"
    bin_dir.mkdir()
    (bin_dir / "bwrap").symlink_to(shutil.which("bwrap"))
    monkeypatch.setenv("PATH", f"{bin_dir}:/nonexistent")
    monkeypatch.setattr(task_cgroup, "CGROUP_ROOT", tmp_path / "no-cgroups")
    task_cgroup.support.cache_clear()
    try:
        check = await dr.check_sandbox(settings)
    finally:
        task_cgroup.support.cache_clear()
    assert check.level is Level.warn, check
    assert "no per-task cgroup" in check.detail and "RLIMIT_AS" in check.detail
    assert "passt" in check.detail and "through the bot's HTTP proxy" in check.detail


def test_voice_engine_says_which_is_active_and_how_fast_the_last_notes_were(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents.inputs.speed_log import NoteSpeed, append_speed
    from agents.inputs.voice import speed_log_path

    check = dr.check_voice_engine(settings)
    assert check.level is Level.ok and check.detail.startswith("openai-whisper ")
    assert check.detail.endswith("; no voice notes transcribed yet")

    log = speed_log_path(settings)
    for seconds in (1.0, 0.9, 3.0):  # written by the transcriber's thread after each note
        append_speed(
            log, NoteSpeed(engine="openai-whisper", model="base", audio_seconds=10, transcribe_seconds=seconds)
        )
    append_speed(log, NoteSpeed(engine="faster-whisper", model="base", audio_seconds=10, transcribe_seconds=0.5))
    check = dr.check_voice_engine(settings)
    assert "last 3 notes: real-time factor 0.10 (median), 3.0 s for 10 s of audio (latest, openai-whisper)" in (
        check.detail
    )

    faster = settings.model_copy(update={"voice_engine": "faster-whisper"})
    real_find_spec = importlib.util.find_spec
    if real_find_spec("faster_whisper") is not None:
        check = dr.check_voice_engine(faster)
        assert check.level is Level.ok and check.detail.startswith("faster-whisper ")
        assert "CTranslate2" in check.detail and "last note: real-time factor 0.05" in check.detail
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "faster_whisper" else 1)
    check = dr.check_voice_engine(faster)
    assert check.level is Level.fail and "not installed" in check.detail and ".[faster]" in check.fix


def test_whisper_ct2_folder_with_faster_whisper(settings: Settings, tmp_path: Path) -> None:
    folder = tmp_path / "base-ct2"
    folder.mkdir()
    faster = settings.model_copy(update={"voice_engine": "faster-whisper", "whisper_model": str(folder)})
    assert dr.check_whisper(faster).level is Level.fail  # no model in it
    (folder / "model.bin").write_bytes(b"\0")
    (folder / "config.json").write_text("{}")
    assert dr.check_whisper(faster).level is Level.ok
    openai = faster.model_copy(update={"voice_engine": "openai-whisper"})
    assert dr.check_whisper(openai).level is Level.fail  # openai-whisper wants a checkpoint file


def test_faster_whisper_s_device_and_why(settings: Settings) -> None:
    pytest.importorskip("faster_whisper", reason="faster-whisper (the optional extra .[faster]) is missing")
    import ctranslate2

    from agents.inputs.voice import speed_log_path
    from agents.inputs.voice_faster import device_record_path

    faster = settings.model_copy(update={"voice_engine": "faster-whisper"})
    detail = dr.check_voice_engine(faster).detail
    if ctranslate2.get_cuda_device_count() == 0:
        assert "int8 on the CPU (no CUDA device)" in detail, detail
    else:
        assert "warm-up transcription" in detail, detail
    record = device_record_path(speed_log_path(settings))  # what the bot writes when it loads the model
    record.parent.mkdir(parents=True, exist_ok=True)
    reason = "cuda failed its warm-up transcription (RuntimeError: Library libcublas.so.12 is not found)"
    record.write_text(json.dumps({"engine": "faster-whisper", "device": "cpu", "reason": reason, "at": 0}))
    detail = dr.check_voice_engine(faster).detail
    assert f"int8 on the CPU at the bot's last start: {reason}" in detail, detail


def test_memory_short_for_the_engine_names_the_lighter_choice(settings: Settings) -> None:
    base = settings.model_copy(update={"voice_engine": "openai-whisper", "whisper_model": "base"})
    roomy = dr.check_memory(base, total_mb=4096)
    assert roomy.level is Level.ok and f"holds about {dr.VOICE_MEMORY_MB['openai-whisper']} MB" in roomy.detail
    short = dr.check_memory(base, total_mb=1024)
    assert short.level is Level.warn and "1024 MB on this machine" in short.detail
    assert "VOICE_ENGINE=faster-whisper" in short.fix and "WHISPER_MODEL=tiny" in short.fix
    large = settings.model_copy(update={"voice_engine": "faster-whisper", "whisper_model": "large-v3"})
    assert dr.check_memory(large, total_mb=2048).level is Level.warn
    assert dr.check_memory(large, total_mb=8192).level is Level.ok
    assert dr.voice_memory_mb("openai-whisper", "large-v3") > dr.voice_memory_mb("faster-whisper", "large-v3")


def test_the_disk_check_names_the_bound_in_force(settings: Settings) -> None:
    small = settings.model_copy(update={"sandbox_max_disk_mb": 64, "sandbox_max_file_mb": 1024})
    check = dr.check_disk_budget(small)
    assert "64 MB per task (SANDBOX_MAX_DISK_MB" in check.detail, check.detail
    assert "hard per file, 64 MB (RLIMIT_FSIZE" in check.detail and "polling" in check.detail, check.detail
    assert "fallocate --keep-size" in check.detail, check.detail


def test_network_reach_says_what_an_allowed_command_reaches_and_warns_of_opened_private_addresses(
    settings: Settings,
) -> None:
    check = dr.check_network_reach(settings.model_copy(update={"sandbox_network_domains": ("packages",)}))
    assert check is not None and check.level is Level.ok and "only these domains" in check.detail
    assert "pypi.org" in check.detail
    opened = settings.model_copy(update={"sandbox_network_private": ("192.168.1.20/32",)})
    check = dr.check_network_reach(opened)
    assert check is not None and check.level is Level.warn
    assert "SANDBOX_NETWORK_PRIVATE" in check.detail and "192.168.1.20/32" in check.detail
    assert dr.check_network_reach(settings.model_copy(update={"sandbox_network": "off"})) is None


# ------------------------------------------------------------------------------------- no silent settings


def test_an_empty_allowed_user_ids_fails_and_says_to_add_your_id(
    monkeypatch: pytest.MonkeyPatch, ready_env: Path, capsys
) -> None:
    monkeypatch.setenv("ALLOWED_USER_IDS", "")
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    [line] = [m for m in marks(out) if "ALLOWED_USER_IDS" in m]
    assert line.startswith("✗ ALLOWED_USER_IDS:") and "nobody may use the bot" in line
    assert "fix: add your id" in out and "Ready" not in out


def test_unset_optional_features_each_get_one_line(ready_env: Path, capsys) -> None:
    assert main(["doctor"]) == 0
    lines = marks(capsys.readouterr().out)
    assert "✓ GitHub: off (GITHUB_TOKEN unset: no issues, mentions or pull requests)" in lines
    assert [m for m in lines if m.startswith("✓ MCP:")] == [
        "✓ MCP: none (MCP_CONFIG unset; the frontend worker's browser is built in)"
    ]


def path_without(tmp_path: Path, *missing: str) -> str:
    """A PATH holding every program of this one but `missing` (symlinks in one folder)."""
    folder = tmp_path / f"path-without-{'-'.join(missing)}"
    folder.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            target = Path(directory) / name
            if name not in missing and not (folder / name).exists() and os.access(target, os.X_OK):
                (folder / name).symlink_to(target)
    return str(folder)


def test_without_bubblewrap_doctor_keeps_its_format_and_gives_the_install_fix_once(
    ready_env: Path, tmp_path: Path
) -> None:
    """The real command in a process of its own, bwrap not on PATH: stdout and stderr hold report lines only."""
    import subprocess
    import sys

    env = {**os.environ, "PATH": path_without(tmp_path, "bwrap"), "PYTHONPATH": str(Path(__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "-m", "telegram_bot", "doctor"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1
    assert done.stderr.strip() == "", f"a stray line beside the report: {done.stderr}"
    for line in done.stdout.splitlines():
        assert (
            not line
            or line[:2] in ("✓ ", "✗ ", "! ")
            or line.startswith(("    fix: ", "\n"))
            or ("required check" in line)
        ), f"not a report line: {line!r}"
    [sandbox] = [m for m in marks(done.stdout) if m.startswith("✗ sandbox:")]
    assert "bubblewrap (bwrap) is not installed" in sandbox
    assert done.stdout.count("apt-get install bubblewrap") == 1, done.stdout
    assert "unprivileged_userns_clone" not in done.stdout, "a missing program's fix is installing it"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
async def test_no_pasta_alone_is_fixed_by_installing_passt(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents.sandbox.task_cgroup import support

    if not support().available:
        pytest.skip(f"this machine cannot make a task cgroup ({support().description}): both fixes apply here")
    monkeypatch.setenv("PATH", path_without(tmp_path, "pasta"))
    check = await dr.check_sandbox(settings)
    assert check.level is Level.warn and "passt not installed" in check.detail
    assert check.fix.startswith("install passt") and "cgroup" not in check.fix


async def test_a_broken_url_mcp_server_is_told_to_check_its_url(settings: Settings, tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/mcp"
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"tracker": {"url": dead}}}))
    checks = await dr.check_mcp_servers(
        settings.model_copy(update={"mcp_config": config, "mcp_start_timeout_seconds": 5})
    )
    [check] = [c for c in checks if c.name == "MCP tracker"]
    assert check.level is Level.warn
    assert dead in check.fix and "SANDBOX_READ_PATHS" not in check.fix and "command" not in check.fix


async def test_github_unreachable_and_token_refused_get_their_own_fix(settings: Settings) -> None:
    from tests.fakes.github_server import FakeGitHub

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    [unreachable] = await dr.check_github(
        settings.model_copy(update={"github_token": SecretStr("ghp_x"), "github_api_url": dead})
    )
    assert unreachable.level is Level.fail and "could not be reached" in unreachable.detail
    assert "GITHUB_API_URL" in unreachable.fix and "new" not in unreachable.fix
    fake = FakeGitHub().start()
    try:
        [refused] = await dr.check_github(
            settings.model_copy(update={"github_token": SecretStr("ghp_wrong"), "github_api_url": fake.url})
        )
    finally:
        fake.close()
    assert refused.level is Level.fail and "401" in refused.detail and "make a new one" in refused.fix


def test_the_voice_engine_line_says_when_the_speech_process_runs(settings: Settings) -> None:
    default = dr.check_voice_engine(settings)
    assert "started by the first voice note, ended after 15 min without notes" in default.detail, default
    kept = dr.check_voice_engine(settings.model_copy(update={"voice_preload": True, "voice_idle_minutes": 0}))
    assert "started at the bot's start (VOICE_PRELOAD), kept until the bot stops" in kept.detail, kept


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
async def test_an_approve_entry_naming_no_tool_of_its_server_is_a_warning(settings: Settings, tmp_path: Path) -> None:
    """`approve` written with a typo gates every tool of the server at run time (rather than none): the doctor says
    so, and lists the names the server offers."""
    from tests.support.questions import DEMO, SERVERS

    config = tmp_path / "mcp.json"
    entry = {"command": sys.executable, "args": [str(DEMO)], "approve": ["delete_everythin", "add"]}
    config.write_text(json.dumps({"mcpServers": {"demo": entry}}))
    checks = await dr.check_mcp_servers(
        settings.model_copy(update={"mcp_config": config, "sandbox_read_paths": (SERVERS,)})
    )
    [check] = [c for c in checks if c.name == "MCP demo"]
    assert check.level is Level.warn, check
    assert "approve names delete_everythin, which it does not offer" in check.detail, check.detail
    assert "delete_everything" in check.fix
