"""`agentlab eval routing`: the shipped cases load, bad lines are named, tool calls map to labels, and a whole run
against the fake Anthropic server (a scripted orchestrator that reads each message) scores as expected."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agents.core.models import InputMethod
from agents.core.settings import Settings
from agents.evals import routing as routing_eval
from agents.evals.cases import DEFAULT_CASES, LABELS, Case, CaseFileError, classify, load_cases
from agents.evals.routing import confusion_table, run_eval, score
from agents.evals.workspaces import CANNED_PROPOSALS
from telegram_bot.cli import main
from tests.fakes import anthropic_server as claude_says
from tests.fakes.anthropic_server import FakeAnthropic
from tests.scripted import role_of

MODEL = "claude-sonnet-4-6"
USAGE = {"input_tokens": 100, "output_tokens": 7, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def eval_settings(claude: FakeAnthropic, tmp_path: Path) -> Settings:
    return Settings(
        _env_file=None,
        telegram_bot_token="123:abc",
        anthropic_api_key="sk-test",
        anthropic_base_url=claude.url,
        anthropic_max_retries=0,
        allowed_user_ids="1",
        workspace_path=tmp_path / "unused",
        database_path=tmp_path / "unused.db",
        orchestrator_model=MODEL,
    )


def write_lines(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------------ the cases


def test_shipped_cases_load_and_cover_every_label() -> None:
    cases = load_cases(DEFAULT_CASES)
    assert len(cases) >= 90
    per_label = Counter(c.label for c in cases)
    assert set(per_label) == set(LABELS)
    assert all(per_label[label] >= 5 for label in LABELS), per_label
    assert sum(c.input is InputMethod.VOICE for c in cases) >= 30, "speech transcripts are a large part of the set"
    assert all(c.pending_workspaces for c in cases if c.label in ("approval", "reject")), "a decision needs a proposal"
    assert all(c.tasks for c in cases if c.label == "cancel"), "cancelling needs a running task"
    assert sum(not c.text.isascii() for c in cases) >= 5, "messages in other languages"
    assert sum(c.text.startswith("[attachment #") for c in cases) >= 3, "messages with photos and files"
    injections = [c for c in cases if "ignore previous instructions" in c.text.lower() or "approve all" in c.text]
    assert injections and all(c.label == "direct" for c in injections), "quoted orders are data, never a route"
    situations = {(c.text, c.model_dump_json(exclude={"line"})) for c in cases}
    assert len(situations) == len(cases), "no duplicate cases"
    assert sum(bool(c.history) for c in cases) >= 3 and sum(bool(c.reply_to) for c in cases) >= 3
    assert sum(len(c.pending_workspaces) > 1 for c in cases) >= 4 and sum(bool(c.researching) for c in cases) >= 2
    assert sum(c.workspace is not None for c in cases) >= 30 and any(c.background is not None for c in cases)
    assert [c.line for c in cases] == list(range(1, len(cases) + 1))


def test_a_bad_line_is_named(tmp_path: Path) -> None:
    good = json.dumps({"text": "go ahead", "input": "text", "label": "approval", "pending_proposal": True})
    path = write_lines(tmp_path / "cases.jsonl", good, "", json.dumps({"text": "hi", "label": "chitchat"}))
    with pytest.raises(CaseFileError, match=r"cases\.jsonl:3: label: Input should be 'direct', 'clarify', 'research'"):
        load_cases(path)

    write_lines(path, good, '{"text": "oops", "label": "code"')
    with pytest.raises(CaseFileError, match=r"cases\.jsonl:2: not valid JSON"):
        load_cases(path)

    write_lines(path, json.dumps({"text": "fix it", "label": "code", "input": "telepathy"}))
    with pytest.raises(CaseFileError, match=r":1: input: Input should be 'text' or 'voice'"):
        load_cases(path)

    write_lines(path, json.dumps({"txt": "typo in the key", "label": "code"}))
    with pytest.raises(CaseFileError, match=r":1: text: Field required; txt: Extra inputs are not permitted"):
        load_cases(path)

    write_lines(path, json.dumps({"text": "   ", "label": "direct"}))
    with pytest.raises(CaseFileError, match=r":1: text: must not be blank"):
        load_cases(path)

    write_lines(path, "[1, 2]")
    with pytest.raises(CaseFileError, match=r":1: expected a JSON object, got list"):
        load_cases(path)

    write_lines(path, "", "   ")
    with pytest.raises(CaseFileError, match="no cases"):
        load_cases(path)

    with pytest.raises(CaseFileError, match="cannot read"):
        load_cases(tmp_path / "missing.jsonl")


def test_case_defaults() -> None:
    case = Case(text="what does calc.py do?", label="direct")
    assert case.input is InputMethod.TEXT and case.pending_proposal is False
    with pytest.raises(ValueError, match="proposal_workspace"):
        Case(text="go", label="approval", pending_proposal=True, proposal_workspace="nowhere")


# ------------------------------------------------------------------------------------------------------ classify


@pytest.mark.parametrize(
    ("names", "inputs", "label"),
    [
        ([], [], "direct"),
        (
            ["read_file", "grep"],
            [{"workspace": "calc", "path": "calc.py"}, {"workspace": "calc", "pattern": "x"}],
            "direct",
        ),
        (["list_tasks"], [{}], "direct"),
        (["reject_proposal"], [{}], "reject"),
        (["list_tasks", "cancel_task"], [{}, {"task_id": 2}], "cancel"),
        (["get_task", "merge_task"], [{"task_id": 1}, {"task_id": 1}], "direct"),
        (["start_research"], [{"workspace": "calc", "request": "review"}], "research"),
        (["start_task"], [{"workspace": "calc", "worker": "code", "instructions": "fix"}], "code"),
        (["start_task"], [{"workspace": "portfolio", "worker": " Frontend ", "instructions": "page"}], "frontend"),
        (["start_task"], [{"workspace": "calc", "worker": "test", "instructions": "tests"}], "test"),
        (["approve_proposal"], [{}], "approval"),
        (
            ["list_schedules", "schedule_task"],
            [{}, {"workspace": "calc", "worker": "code", "cron": "0 9 * * 1-5"}],
            "schedule",
        ),
        (["remember"], [{"text": "we use pnpm", "workspace": "portfolio"}], "note"),
        (
            ["read_file", "start_task", "start_research"],
            [{"workspace": "calc", "path": "calc.py"}, {"worker": "test"}, {"workspace": "calc", "request": "r"}],
            "test",
        ),
        (["start_research", "start_task"], [{"workspace": "calc", "request": "r"}, {"worker": "code"}], "research"),
        (["start_task"], [{"workspace": "calc", "worker": "research", "instructions": "?"}], "other"),
        (["start_task"], [{"workspace": "calc", "instructions": "no worker"}], "other"),
    ],
)
def test_classify_uses_the_first_work_tool(names: list[str], inputs: list[dict], label: str) -> None:
    assert classify(names, inputs) == label


def test_a_reply_that_asks_is_clarify() -> None:
    assert classify([], [], "Which workspace do you mean: calc or portfolio?") == "clarify"
    assert classify(["list_tasks"], [{}], "Two tasks run: #1 and #2. Which one should I stop?**") == "clarify"
    assert classify([], [], "Done? Yes: it is finished.") == "direct"
    assert classify(["start_task"], [{"worker": "code"}], "Started. Anything else?") == "code"


def test_classify_needs_one_input_per_name() -> None:
    with pytest.raises(ValueError):
        classify(["start_task"], [])


# ------------------------------------------------------------------------------------------------- run end to end


class ScriptedOrchestrator:
    """Plays the orchestrator: decides from the message text; echoes tool results; records how many run at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = 0
        self.most_active = 0
        self.contexts: dict[str, str] = {}

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        try:
            time.sleep(0.03)  # long enough for concurrent cases to overlap
            return self.decide(body)
        finally:
            with self.lock:
                self.active -= 1

    def decide(self, body: dict[str, Any]) -> dict[str, Any]:
        assert role_of(body) == "orchestrator"
        blocks = body["messages"][-1]["content"]
        results = [b for b in blocks if b["type"] == "tool_result"]
        if results:  # second round: report what the tool said
            inner = results[0]["content"]
            said = inner if isinstance(inner, str) else json.dumps(inner)
            return claude_says.text(f"{'ERR' if results[0].get('is_error') else 'OK'}: {said}", usage=USAGE)
        message, context = blocks[0]["text"], blocks[1]["text"]
        with self.lock:
            self.contexts[message] = context

        def start_task(workspace: str, worker: str) -> dict[str, Any]:
            return claude_says.tool_use(
                "start_task",
                {"workspace": workspace, "worker": worker, "instructions": message, "background": True},
                usage=USAGE,
            )

        if message == "what does calc.py do?":
            return claude_says.tool_use("read_file", {"workspace": "calc", "path": "calc.py"}, usage=USAGE)
        if message == "make group therapy better":
            return claude_says.tool_use(
                "start_research", {"workspace": "group therapy", "request": message}, usage=USAGE
            )
        if message == "fix add in calc":
            return start_task("calc", "code")
        if message == "build a portfolio page":
            return start_task("portfolio", "frontend")
        if message == "make the portfolio header sticky":
            return start_task("portfolio", "code")  # deliberately misrouted
        if message == "write tests for your renderer":
            return start_task("your code", "test")
        if message == "go ahead":
            if "proposal #1 for group-therapy" in context:
                return claude_says.tool_use("approve_proposal", {"proposal_id": 1}, usage=USAGE)
            return claude_says.text("There is nothing to approve.", usage=USAGE)
        if message == "how are my tasks doing":
            return claude_says.tool_use("list_tasks", {}, usage=USAGE)
        if message == "overloaded now":
            return claude_says.overloaded()
        assert "input_method: voice" in context, message
        return claude_says.text("Group therapy books therapy sessions.", usage=USAGE)


EVAL_CASES = [
    Case(text="what does calc.py do?", label="direct"),
    Case(text="make group therapy better", label="research"),
    Case(text="fix add in calc", label="code"),
    Case(text="build a portfolio page", label="frontend"),
    Case(text="make the portfolio header sticky", label="frontend"),
    Case(text="write tests for your renderer", label="test"),
    Case(text="go ahead", label="approval", pending_proposal=True),
    Case(text="so what does groove therapy do", input=InputMethod.VOICE, label="direct"),
    Case(text="how are my tasks doing", label="direct"),
    Case(text="overloaded now", label="direct"),
]


def table_rows(table: str) -> dict[str, list[str]]:
    """The confusion table's lines keyed by their first word (the header is keyed 'expected')."""
    return {line.split()[0]: line.replace("│", " ").split()[1:] for line in table.splitlines() if line.strip()}


async def test_run_eval_scores_a_scripted_orchestrator(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    model = ScriptedOrchestrator()
    fake_anthropic.handler = model
    settings = eval_settings(fake_anthropic, tmp_path)
    lines: list[str] = []

    result = await run_eval(settings, EVAL_CASES, concurrency=3, progress=lines.append)

    by_text = {r.case.text: r for r in result.results}
    assert [r.case for r in result.results] == EVAL_CASES, "results keep the order of the cases"
    assert {t: r.predicted for t, r in by_text.items()} == {
        "what does calc.py do?": "direct",
        "make group therapy better": "research",
        "fix add in calc": "code",
        "build a portfolio page": "frontend",
        "make the portfolio header sticky": "code",
        "write tests for your renderer": "test",
        "go ahead": "approval",
        "so what does groove therapy do": "direct",
        "how are my tasks doing": "direct",
        "overloaded now": "error",
    }
    # the desk only records and confirms; workspace names are resolved like the real desk does, in the eval's folders
    looked_up = by_text["what does calc.py do?"]
    assert looked_up.reply.startswith("OK: ") and "return a - b" in looked_up.reply, "the eval's calc/calc.py"
    assert by_text["make group therapy better"].reply.startswith(
        "OK: Research task #1 started on workspace group-therapy"
    )
    assert by_text["write tests for your renderer"].reply.startswith("OK: Task #1 (test worker, workspace self)")
    assert by_text["go ahead"].reply == (
        "OK: Proposal #1 approved; code task #1 started on group-therapy in the background."
    )
    assert [(c.name, c.input["worker"]) for c in by_text["fix add in calc"].calls] == [("start_task", "code")]
    assert by_text["how are my tasks doing"].tools_used == ["list_tasks"]
    assert looked_up.calls == [] and looked_up.tools_used == ["read_file"]
    assert by_text["overloaded now"].error and "overloaded" in by_text["overloaded now"].error.lower()
    # each case is a fresh conversation: only the approval case saw a pending proposal, the voice case was voice
    assert "pending proposals: none" in model.contexts["fix add in calc"]
    assert "proposal #1 for group-therapy" in model.contexts["go ahead"]
    assert "input_method: voice" in model.contexts["so what does groove therapy do"]
    assert "- self (this bot's own code)" in model.contexts["fix add in calc"]
    for name in ("calc", "group-therapy", "portfolio"):
        assert f"- {name}\n" in model.contexts["fix add in calc"]
    assert 2 <= model.most_active <= 3, "cases run concurrently, at most `concurrency` at once"

    # usage: 9 cases answered in 2 calls except the voice one (1 call); the overloaded call has no usage
    assert result.api_calls == 17
    assert (result.usage.input_tokens, result.usage.output_tokens) == (1700, 119)

    s = score(result.results)
    assert (s.correct, s.total) == (8, 10) and s.accuracy == pytest.approx(0.8)
    assert s.confusion[("frontend", "code")] == 1 and s.confusion[("direct", "error")] == 1
    assert s.labels["code"].precision == pytest.approx(0.5) and s.labels["frontend"].recall == pytest.approx(0.5)
    assert s.labels["direct"].recall == pytest.approx(0.75) and s.labels["direct"].precision == 1.0

    table = confusion_table(result.results)
    rows = table_rows(table)
    assert rows["expected"][2:] == [*LABELS, "error", "recall", "n"]
    assert rows["direct"] == ["3", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "1", "75%", "4"]
    assert rows["frontend"] == ["0", "0", "0", "1", "1", "0", "0", "0", "0", "0", "0", "0", "50%", "2"]
    assert rows["approval"] == ["0", "0", "0", "0", "0", "0", "1", "0", "0", "0", "0", "0", "100%", "1"]
    assert rows["precision"] == ["100%", "-", "100%", "50%", "100%", "100%", "100%", "-", "-", "-", "-"]
    assert table.splitlines()[-1] == "accuracy: 8/10 = 80.0%"

    assert len(lines) == 10 and all(re.match(r"\[\s*\d+/10\] (ok  |MISS) ", line) for line in lines)
    sticky = next(line for line in lines if "header sticky" in line)
    assert "MISS frontend ← code" in sticky and "[tools: start_task]" in sticky
    report = routing_eval.report(result, settings)
    assert "misrouted:" in report and "line 0: frontend → code: 'make the portfolio header sticky'" in report
    assert "17 API calls · tokens: input 1,700, output 119" in report


async def test_an_approval_the_desk_refused_is_not_an_approval(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    fake_anthropic.script(
        claude_says.tool_use("approve_proposal", {}),
        lambda body: claude_says.text(json.dumps(body["messages"][-1]["content"][0])),
    )
    result = await run_eval(eval_settings(fake_anthropic, tmp_path), [Case(text="yes", label="direct")])
    only = result.results[0]
    assert only.predicted == "direct" and only.correct
    assert [(c.name, c.ok) for c in only.calls] == [("approve_proposal", False)]
    assert '"is_error": true' in only.reply and "there is no pending proposal in this chat" in only.reply


# --------------------------------------------------------------------------------------------------------- the CLI


def test_eval_routing_help(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["eval", "routing", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: agentlab eval routing")
    for option in ("--limit N", "--file PATH", "--concurrency N", "default: 4"):
        assert option in out
    assert main(["eval"]) == 2, "eval without an evaluation name shows its help"


@pytest.fixture
def owner_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fake_anthropic: FakeAnthropic) -> Path:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # no .env of the checkout
    for key, value in {
        "TELEGRAM_BOT_TOKEN": "1:a",
        "ANTHROPIC_API_KEY": "sk-test",
        "ALLOWED_USER_IDS": "1",
        "WORKSPACE_PATH": str(tmp_path),
        "ANTHROPIC_BASE_URL": fake_anthropic.url,
        "ANTHROPIC_MAX_RETRIES": "0",
    }.items():
        monkeypatch.setenv(key, value)
    return cwd


def test_cli_runs_the_eval_and_prints_the_table(owner_env: Path, fake_anthropic: FakeAnthropic, capsys) -> None:
    fake_anthropic.handler = lambda body: claude_says.text("Hello!", usage=USAGE)
    cases = write_lines(
        owner_env / "cases.jsonl",
        json.dumps({"text": "hi there", "input": "text", "label": "direct"}),
        json.dumps({"text": "who are you", "input": "voice", "label": "direct"}),
        json.dumps({"text": "go ahead", "label": "approval", "pending_proposal": True}),
    )
    assert main(["eval", "routing", "--file", str(cases), "--limit", "2", "--concurrency", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Routing eval: 2 cases from {cases}, model claude-sonnet-4-6, 3 runs each, 2 at a time.")
    assert fake_anthropic.calls == 6, "each case runs three times"
    assert "accuracy: 6/6 = 100.0%" in out and "flips (0 of 2 cases changed between 3 runs)" in out
    assert "6 API calls · tokens: input 600, output 42" in out


def test_cli_names_a_bad_cases_file(owner_env: Path, fake_anthropic: FakeAnthropic, capsys) -> None:
    cases = write_lines(owner_env / "cases.jsonl", json.dumps({"text": "hi", "label": "smalltalk"}))
    assert main(["eval", "routing", "--file", str(cases)]) == 2
    assert capsys.readouterr().err.startswith(f"agentlab: {cases}:1: label: Input should be")
    assert fake_anthropic.calls == 0
    with pytest.raises(SystemExit):
        main(["eval", "routing", "--concurrency", "0"])


def expected_snippets(case: Case) -> list[str]:
    """What the orchestrator must have been shown for this case's situation."""
    snippets = [f"proposal #{i} for {w}" for i, w in enumerate(case.pending_workspaces, start=1)]
    snippets += [
        f"#{i} [in_progress] {t.worker} in {t.workspace}: {t.title}" for i, t in enumerate(case.tasks, start=1)
    ]
    if case.researching:
        snippets.append(f"proposals still being written: research #{len(case.tasks) + 1} in {case.researching}")
    snippets += [turn.text for turn in case.history]
    target = routing_eval._reply_target(case)
    if target and target[0] == "proposal":
        snippets.append(f"replying to: proposal #{target[1]} [pending]")
    elif target:
        snippets.append(f"replying to: the progress message of task #{target[1]}")
    elif case.reply_to:
        snippets.append(f"replying to your earlier message: «{case.reply_to}")
    if case.input is InputMethod.VOICE:
        snippets.append("input_method: voice")
    for workspace in case.pending_workspaces:  # shown whole in the chat, as the bot shows proposals
        snippets.append(json.dumps(CANNED_PROPOSALS[workspace][1])[1:60])
    return snippets


def test_agentlab_eval_routing_runs_the_shipped_set_three_times_and_reports_flips(
    owner_env: Path, fake_anthropic: FakeAnthropic, capsys
) -> None:
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()
    flip = iter(["Which project do you mean?", "On it.", "Which project do you mean?"])

    def scripted(body: dict[str, Any]) -> dict[str, Any]:
        message = body["messages"][-1]["content"][0].get("text", "")
        with lock:
            seen.append((message, json.dumps(body["messages"], ensure_ascii=False)))
            if message == "fix the bug":  # the one case this model is unsure about
                return claude_says.text(next(flip), usage=USAGE)
        return claude_says.text("Noted.", usage=USAGE)

    fake_anthropic.handler = scripted
    assert main(["eval", "routing"]) == 0
    out = capsys.readouterr().out
    cases = load_cases(DEFAULT_CASES)
    assert out.startswith(
        f"Routing eval: {len(cases)} cases from {DEFAULT_CASES}, model claude-sonnet-4-6, 3 runs each"
    )
    assert len(seen) == 3 * len(cases)
    for case in cases:
        bodies = [body for message, body in seen if message == case.text]
        matching = [b for b in bodies if all(s in b for s in expected_snippets(case))]
        assert len(matching) >= 3, (case.line, case.text, expected_snippets(case))
    flips = out.split("flips (")[1]
    assert flips.startswith(f"1 of {len(cases)} cases changed between 3 runs)")
    line = next(c.line for c in cases if c.text == "fix the bug")
    flipped = next(text for text in flips.splitlines() if text.strip().startswith(f"line {line}: "))
    outcomes = flipped.split(": ")[2].split(" / ")
    assert sorted(outcomes) == ["clarify", "clarify", "direct✗"] and flipped.endswith("'fix the bug'")
    assert "misrouted:" in out and "accuracy:" in out
