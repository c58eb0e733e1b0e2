"""The `agentlab` command: subcommands, `init` writing .env (mode 600) then running doctor, run's mode choice, JSON logs."""

from __future__ import annotations

import argparse
import io
import json
import logging
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from dotenv import dotenv_values

from agents import doctor as dr
from telegram_bot.cli import JsonLogFormatter, main, render_env, run_init
from tests.conftest import USER_ID
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.telegram_server import FakeTelegram

REPO = Path(__file__).resolve().parents[1]
KEYS = (
    "TELEGRAM_BOT_TOKEN",
    "ANTHROPIC_API_KEY",
    "ALLOWED_USER_IDS",
    "WORKSPACE_PATH",
    "TELEGRAM_API_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "BOT_REPOSITORY",
    "DATABASE_PATH",
    "WHISPER_MODEL",
    "CHROMIUM_PATH",
    "WEBHOOK_URL",
    "WEBHOOK_SECRET_TOKEN",
    "LOG_FORMAT",
    "AGENTLAB_LOG_FORMAT",
)


class Answers:
    """Stands in for input(): hands out scripted answers, records the prompts, EOF when it runs out."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, prompt: str = "") -> str:
        self.prompts.append(prompt)
        if not self.answers:
            raise EOFError
        return self.answers.pop(0)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    return cwd


def test_help_lists_the_subcommands(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for command in ("run", "doctor", "init"):
        assert f"    {command} " in out


def subcommands() -> dict[str, object]:
    """Each subcommand's own parser, by name (argparse's subparsers action holds them)."""
    from telegram_bot.cli import build_parser

    parser = build_parser()
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001 - argparse
    return dict(action.choices)


@pytest.mark.parametrize("command", ["run", "doctor", "init", "runner", "eval"])
def test_each_subcommand_s_help_says_what_it_does_and_its_options(command: str, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    usage, _, rest = out.partition("\n\n")
    description = rest.split("\noptions:")[0].strip()
    assert len(description) > 40, f"`agentlab {command} --help` says nothing beyond its usage:\n{out}"
    if command in ("run", "doctor", "init"):
        assert "No options" in description or "--" in usage.replace("-h", "")


def test_the_readme_names_every_subcommand() -> None:
    """The README's subcommand sentence lists each one the parser knows."""
    readme = (REPO / "README.md").read_text()
    sentence = readme[readme.index("`agentlab` subcommands") :].split("\n\n")[0]
    for name in subcommands():
        assert f"`{name}" in sentence, f"the README's subcommand list leaves out `{name}`"


def test_the_readme_s_systemd_unit_does_not_restart_on_a_refused_setting() -> None:
    """Exit 2 (a setting, token or key refused) must not restart in a loop: the README's unit says so, as
    deploy/agentlab.service does."""
    readme = (REPO / "README.md").read_text()
    units = [block for block in readme.split("```ini")[1:] if "[Service]" in block.split("```")[0]]
    assert units, "the README shows a systemd unit"
    for block in units:
        assert "RestartPreventExitStatus=2" in block.split("```")[0]
    assert "RestartPreventExitStatus=2" in (REPO / "deploy" / "agentlab.service").read_text()


def test_the_deploy_guide_shows_a_reverse_proxy_for_github_s_webhook() -> None:
    guide = (REPO / "deploy" / "README.md").read_text()
    assert "location = /github" in guide and "proxy_pass http://127.0.0.1:8089" in guide, "nginx"
    assert "reverse_proxy /github 127.0.0.1:8089" in guide, "Caddy"
    # not the review page's default address (REVIEW_LISTEN): the two servers cannot share it
    assert "GITHUB_WEBHOOK_LISTEN=127.0.0.1:8088" not in guide and "/github 127.0.0.1:8088" not in guide


def test_python_m_telegram_bot_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "telegram_bot", "--help"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: agentlab")
    assert "doctor" in result.stdout and "init" in result.stdout


def test_init_writes_env_with_mode_600_then_doctor_passes(
    clean_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    fake_telegram: FakeTelegram,
    fake_anthropic: FakeAnthropic,
    workspace_root: Path,
    capsys,
) -> None:
    # where the fakes live and what doctor needs beyond the four answers (environment wins over .env)
    checkpoint = tmp_path / "model.pt"
    checkpoint.write_bytes(b"\0" * 10)
    monkeypatch.setenv("TELEGRAM_API_BASE_URL", fake_telegram.url)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.url)
    monkeypatch.setenv("WHISPER_MODEL", str(checkpoint))
    answers = Answers(f"{USER_ID}, 2002", str(workspace_root))
    secrets = Answers(fake_telegram.token, "sk-ant-test-key-123456")
    monkeypatch.setattr("builtins.input", answers)
    monkeypatch.setattr("getpass.getpass", secrets)  # the token and the key are asked without echo
    # the browser check starts chrome-devtools-mcp and Chromium (~2 s of CPU): tests/test_newcomer_e2e.py runs it
    # after a real `agentlab init`, tests/test_browser_parts.py tests its outcomes
    monkeypatch.setattr(dr, "check_browser", lambda _settings: dr.Check(dr.Level.ok, "browser", "tested elsewhere"))

    assert main(["init"]) == 0
    env_file = clean_env / ".env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    values = dotenv_values(env_file)
    assert values["TELEGRAM_BOT_TOKEN"] == fake_telegram.token
    assert values["ANTHROPIC_API_KEY"] == "sk-ant-test-key-123456"
    assert values["ALLOWED_USER_IDS"] == f"{USER_ID}, 2002"
    assert values["WORKSPACE_PATH"] == str(workspace_root.resolve())
    assert "ORCHESTRATOR_MODEL" in values, "a new .env starts from .env.example, every key documented"
    assert len(secrets.prompts) == 2 and "@BotFather" in secrets.prompts[0] and "Anthropic" in secrets.prompts[1]
    assert len(answers.prompts) == 2 and "user id" in answers.prompts[0]
    out = capsys.readouterr().out
    assert "ANTHROPIC_API_KEY=sk-a…3456" in out and f"ALLOWED_USER_IDS={USER_ID}, 2002" in out, "what was written"
    assert fake_telegram.token not in out and "sk-ant-test-key-123456" not in out, "secrets are shown masked"
    assert "✓ Telegram: token accepted, the bot is @test_bot" in out
    assert "✓ settings: valid, from the environment and" in out and "Ready" in out
    assert (clean_env / "data" / "agentlab.db").is_file(), "doctor ran on the new .env (default DATABASE_PATH)"


def test_init_keeps_existing_values_and_other_lines(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = clean_env / ".env"
    env_file.write_text(
        "# mine\nTELEGRAM_BOT_TOKEN=111:oldtokenvalue-xyz\nANTHROPIC_API_KEY=sk-old-key-123456\n"
        "ALLOWED_USER_IDS=5\nWORKER_MODEL=claude-opus-4-1\n"
    )
    env_file.chmod(0o644)
    monkeypatch.setenv("HOME", str(tmp_path / "my home"))
    workspace = tmp_path / "my home" / "workspaces"
    answers = Answers("", "", "5,6", "")
    out = io.StringIO()
    assert run_init(env_file, ask=answers, out=out) == 0
    assert "[111:…-xyz]" in answers.prompts[0], "secrets are masked in the brackets"
    assert "[sk-o…3456]" in answers.prompts[1]
    assert "[5]" in answers.prompts[2] and f"[{workspace}]" in answers.prompts[3]
    text = env_file.read_text()
    assert text.startswith("# mine\n") and "WORKER_MODEL=claude-opus-4-1" in text
    values = dotenv_values(env_file)
    assert values["TELEGRAM_BOT_TOKEN"] == "111:oldtokenvalue-xyz"
    assert values["ALLOWED_USER_IDS"] == "5,6"
    assert values["WORKSPACE_PATH"] == str(workspace), "a path with a space survives quoting"
    assert workspace.is_dir() and "Created" in out.getvalue()
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600, "an existing 644 .env becomes 600"


def test_init_asks_again_on_a_bad_answer(clean_env: Path, tmp_path: Path) -> None:
    answers = Answers("not a token", "123:abc", "", "sk-x", "me", "7", str(tmp_path))
    out = io.StringIO()
    assert run_init(clean_env / ".env", ask=answers, out=out) == 0
    assert len(answers.prompts) == 7
    assert "not a bot token" in out.getvalue() and "required" in out.getvalue() and "numeric" in out.getvalue()
    assert dotenv_values(clean_env / ".env")["ALLOWED_USER_IDS"] == "7"


def test_init_cancelled_leaves_no_env(clean_env: Path) -> None:
    out = io.StringIO()
    assert run_init(clean_env / ".env", ask=Answers("123:abc"), out=out) == 1
    assert not (clean_env / ".env").exists()
    assert "cancelled" in out.getvalue()
    assert list(clean_env.iterdir()) == [], "no temporary file left behind"


def test_render_env_replaces_in_place_and_appends() -> None:
    base = "# comment\nA=1\nexport B=2\nA=3\n"
    assert render_env(base, {"A": "x", "B": "y z", "C": 'q"'}) == ('# comment\nA=x\nB="y z"\n# A=3\nC="q\\""\n')


# --------------------------------------------------------------------------------------------------------- run


@pytest.mark.parametrize("webhook", [False, True])
def test_run_chooses_polling_or_webhook(
    clean_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    webhook: bool,
    fake_telegram: FakeTelegram,
    fake_anthropic: FakeAnthropic,
) -> None:
    import telegram_bot.app
    import telegram_bot.webhook

    started: list[tuple[str, object]] = []
    monkeypatch.setattr(telegram_bot.app, "run_polling", lambda s: started.append(("polling", s.telegram.webhook_url)))
    monkeypatch.setattr(
        telegram_bot.webhook, "run_webhook", lambda s: started.append(("webhook", s.telegram.webhook_url))
    )
    for key, value in {
        "TELEGRAM_BOT_TOKEN": fake_telegram.token,
        "TELEGRAM_API_BASE_URL": fake_telegram.url,
        "ANTHROPIC_API_KEY": "k",
        "ANTHROPIC_BASE_URL": fake_anthropic.url,
        "ALLOWED_USER_IDS": "1",
        "WORKSPACE_PATH": str(tmp_path),
    }.items():
        monkeypatch.setenv(key, value)
    if webhook:
        monkeypatch.setenv("WEBHOOK_URL", "https://bot.example.com")
        monkeypatch.setenv("WEBHOOK_SECRET_TOKEN", "abc")
    assert main(["run"]) == 0
    assert started == ([("webhook", "https://bot.example.com")] if webhook else [("polling", None)])


def test_an_error_that_ends_the_bot_is_logged_without_its_secrets(
    clean_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An exception out of the running bot goes to the log, whose filter hides the bot's secrets, and the exit
    status is 1: Python's own report of it on stderr would print the token as the exception holds it."""
    import telegram_bot.app
    import telegram_bot.startup

    async def proven(settings: object) -> str:
        return "test_bot"

    def crash(settings: object) -> None:
        raise RuntimeError("request to bot123456:crash-secret-AAAA/getUpdates failed")

    monkeypatch.setattr(telegram_bot.startup, "both_reachable", proven)
    monkeypatch.setattr(telegram_bot.app, "run_polling", crash)
    for key, value in {
        "TELEGRAM_BOT_TOKEN": "123456:crash-secret-AAAA",
        "ANTHROPIC_API_KEY": "k",
        "ALLOWED_USER_IDS": "1",
        "WORKSPACE_PATH": str(tmp_path),
    }.items():
        monkeypatch.setenv(key, value)
    assert main(["run"]) == 1
    assert "crash-secret" not in capsys.readouterr().err
    assert "bot<secret>/getUpdates" in caplog.text and "crash-secret" not in caplog.text, caplog.text


def test_run_with_bad_settings_says_one_line(clean_env: Path, capsys) -> None:
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agentlab: configuration error: TELEGRAM_BOT_TOKEN: missing (required)")
    assert err.count("\n") == 1


# -------------------------------------------------------------------------------------------------------- logs


def _record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("agents.work.task_queue", logging.WARNING, __file__, 1, message, args, None)
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def test_json_log_lines_carry_chat_and_task() -> None:
    formatter = JsonLogFormatter()
    entry = json.loads(formatter.format(_record("chat %s: Telegram refused HTML (%s)", -1001, "bad")))
    assert entry["chat"] == -1001 and "task" not in entry
    assert entry["level"] == "WARNING" and entry["logger"] == "agents.work.task_queue"
    assert entry["message"] == "chat -1001: Telegram refused HTML (bad)"
    assert entry["time"].endswith("+00:00")
    entry = json.loads(formatter.format(_record("tool %s by %s (task %s) %dms", "grep", "code", 17, 5)))
    assert entry["task"] == 17 and "chat" not in entry
    entry = json.loads(formatter.format(_record("tool %s by %s (task %s)", "grep", "orchestrator", None)))
    assert "task" not in entry
    entry = json.loads(formatter.format(_record("anything", chat_id=5, task_id=9)))
    assert (entry["chat"], entry["task"]) == (5, 9)


def test_json_log_lines_include_the_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "task %s crashed", (3,), sys.exc_info())
    line = JsonLogFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["task"] == 3 and "ValueError: boom" in entry["exception"]


# ------------------------------------------------------------------------------------------------------ runner


def test_runner_help_explains_a_two_machine_set_up(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["runner", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for needed in ("Two machines", "TASK_ENGINE=temporal", "RUNNER_REMOTE", "bare repository", "agentlab runner"):
        assert needed in out


def test_runner_needs_no_telegram_keys(clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("temporalio", reason="the Temporal SDK (the optional extra .[temporal]) is missing")
    import agents.engine.runner_node as runner

    seen = []
    monkeypatch.setattr(runner, "run_forever", lambda settings: seen.append(settings) or 0)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-runner-key")
    monkeypatch.setenv("WORKSPACE_PATH", str(tmp_path))
    monkeypatch.setenv("TEMPORAL_ADDRESS", "buildbox:7233")
    assert main(["runner"]) == 0
    assert seen[0].engine.temporal_address == "buildbox:7233" and seen[0].users.allowed_user_ids == frozenset()


def test_an_error_that_ends_the_runner_is_logged_without_its_secrets(
    clean_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    pytest.importorskip("temporalio", reason="the Temporal SDK (the optional extra .[temporal]) is missing")
    import agents.engine.runner_node as runner

    def crash(settings: object) -> int:
        raise RuntimeError("refused: key sk-ant-crash-9f8e7d6c5b")

    monkeypatch.setattr(runner, "run_forever", crash)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-crash-9f8e7d6c5b")
    monkeypatch.setenv("WORKSPACE_PATH", str(tmp_path))
    monkeypatch.setenv("TEMPORAL_ADDRESS", "buildbox:7233")
    assert main(["runner"]) == 1
    assert "9f8e7d6c5b" not in capsys.readouterr().err
    assert "key <secret>" in caplog.text and "9f8e7d6c5b" not in caplog.text, caplog.text


def test_task_engine_is_local_unless_set(clean_env: Path) -> None:
    from agents.core.settings import Settings, SettingsError, load_settings

    base = dict(telegram_bot_token="1:x", anthropic_api_key="k", allowed_user_ids="1", workspace_path=".")
    assert Settings(_env_file=None, **base).engine.task_engine == "local"
    assert Settings(_env_file=None, task_engine=" Temporal ", **base).engine.task_engine == "temporal"
    with pytest.raises(SettingsError, match="TASK_ENGINE"):
        load_settings(_env_file=None, task_engine="celery", **base)
