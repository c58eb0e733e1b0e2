"""The docs that name the code's parts are checked against the code, so they cannot drift: AGENT_ARCHITECTURE.md's
module map (drawn from the docstrings by scripts/module_map.py), and the Telegram commands, the inline buttons and the
orchestrator's tools that README.md and AGENT_ARCHITECTURE.md list, each read from the code's own registry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from telegram.ext import CommandHandler

from agents.core.actions import Action
from agents.core.models import Caller
from agents.core.secrets_filter import SecretsFilter
from agents.core.settings import Settings
from agents.core.work_tools import WorkTool, work_tool_definitions
from agents.tools.tool_sets import orchestrator_tools
from agents.work.crew import TOOL_PARTS
from agents.workspaces.folders import Workspaces
from scripts import module_map
from telegram_bot.app import build_application
from telegram_bot.commands import menu

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = (ROOT / "AGENT_ARCHITECTURE.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")
REGENERATE = "run `make docs` (python -m scripts.module_map --write); to change a line, change the module's docstring"


# ---------------------------------------------------------------------------------------------------- the module map


def test_the_module_map_is_the_one_the_docstrings_draw() -> None:
    drawn = module_map.drawn_map(ARCHITECTURE)
    wrong = module_map.differences(drawn, module_map.module_map())
    assert not wrong, "AGENT_ARCHITECTURE.md's module map is stale:\n" + "\n".join(wrong) + f"\n{REGENERATE}"


def _package(root: Path, files: dict[str, str]) -> None:
    for name, docstring in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'"""{docstring}"""\n')


def test_the_map_check_names_a_missing_module_a_gone_one_and_a_stale_line(tmp_path: Path) -> None:
    ranks = {"agents": 7, "agents.core": 0, "agents.work": 6}
    _package(
        tmp_path,
        {
            "agents/__init__.py": "The core.",
            "agents/core/__init__.py": "The foundation.",
            "agents/core/ids.py": "Numbers, parsed strictly.",
            "agents/work/__init__.py": "The crew.",
            "agents/work/crew.py": "The crew's front.",
            "agents/runtime.py": "Wiring.",
        },
    )
    drawn = module_map.module_map(tmp_path, ranks)
    assert drawn == (
        "agents/                          The core.\n"
        "├── core/           layer 0      The foundation.\n"
        "│   └── ids.py                   Numbers, parsed strictly.\n"
        "├── work/           layer 6      The crew.\n"
        "│   └── crew.py                  The crew's front.\n"
        "└── runtime.py                   Wiring.\n"
    )
    assert module_map.differences(drawn, drawn) == []

    _package(tmp_path, {"agents/work/queue.py": "The task queue. It claims tasks."})
    (tmp_path / "agents/core/ids.py").unlink()
    _package(tmp_path, {"agents/runtime.py": "Wiring, and shutdown.\n\nMore said here."})
    assert sorted(module_map.differences(drawn, module_map.module_map(tmp_path, ranks))) == [
        "agents/core/ids.py is in the map but not in the code",
        "agents/runtime.py: the map says 'Wiring.', its docstring 'Wiring, and shutdown.'",
        "agents/work/queue.py is missing from the map",
    ]
    assert module_map.differences(drawn.replace("── ids.py    ", "── ids.py   "), drawn) == [
        "the map's drawing differs from the generated one (spacing or order)"
    ]


def test_a_map_line_is_the_docstrings_first_sentence_within_three_lines(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""Task numbers typed by a user, e.g. `#7`: parsed\nstrictly. Then more.\n\nAnd more."""\n')
    assert module_map.summary(module) == "Task numbers typed by a user, e.g. `#7`: parsed strictly."
    module.write_text('"""Is this machine ready? One line per check."""\n')
    assert module_map.summary(module) == "Is this machine ready?"
    lines = module_map._lines("├── long.py", "word " * 100, "│   ")
    assert len(lines) == module_map.SUMMARY_LINES and lines[-1].endswith(" …")
    assert all(len(line) <= module_map.WIDTH for line in lines)


def test_writing_the_map_replaces_only_what_is_between_the_markers() -> None:
    doc = f"before\n{module_map.BEGIN}\n```\nold\n```\n{module_map.END}\nafter\n"
    written = module_map.with_map(doc, "agents/    new\n")
    assert written == f"before\n{module_map.BEGIN}\n```\nagents/    new\n```\n{module_map.END}\nafter\n"
    assert module_map.drawn_map(written) == "agents/    new\n"


# ------------------------------------------------------------------------------------------------------ the commands


def registered_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The commands the Telegram application answers: its CommandHandlers, as app.py registers them."""
    for key, value in {
        "TELEGRAM_BOT_TOKEN": "123:abc",
        "ANTHROPIC_API_KEY": "sk-test",
        "ALLOWED_USER_IDS": "1",
        "WORKSPACE_PATH": str(tmp_path),
        "DATABASE_PATH": str(tmp_path / "agentlab.db"),
    }.items():
        monkeypatch.setenv(key, value)
    settings = Settings(_env_file=None)  # the environment's keys: the outside contract, however Settings is built
    app = build_application(settings)
    return {
        command
        for group in app.handlers.values()
        for handler in group
        if isinstance(handler, CommandHandler)
        for command in handler.commands
    }


def test_every_command_is_in_the_menu_and_the_docs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commands = registered_commands(tmp_path, monkeypatch)
    assert commands == {name for name, _ in menu()}, "a command answered but not in the menu (or the reverse)"
    listed = re.search(r"├─ commands \(([^)]*)\)", ARCHITECTURE)
    assert listed, "AGENT_ARCHITECTURE.md's message flow lists the commands in `├─ commands (…)`"
    assert set(re.findall(r"/(\w+)", listed.group(1))) == commands
    bullet = re.search(r"^- Commands: (.*?)\.(?: |$)", README, re.MULTILINE | re.DOTALL)
    assert bullet, "README.md lists the commands in a `- Commands: …` bullet"
    # /start is Telegram's own first message, not one a user types; README leaves it out
    assert set(re.findall(r"`/(\w+)", bullet.group(1))) == commands - {"start"}


# ------------------------------------------------------------------------------------------------------- the buttons


def drawn_buttons() -> set[str]:
    """The button actions the message flow names after `buttons.on_button:`, as callback prefixes (`task:pr`)."""
    found = re.search(r"├─ buttons\.on_button: (.*?)\n\s*├─", ARCHITECTURE, re.DOTALL)
    assert found, "AGENT_ARCHITECTURE.md's message flow lists the buttons after `├─ buttons.on_button:`"
    text = " ".join(line.strip(" │") for line in found.group(1).splitlines())
    named = set()
    for group in text.split("·"):
        subject, _, verbs = group.strip().partition(" ")
        named |= {f"{subject}:{verb}" for verb in verbs.split("/")}
    return named


def test_every_button_is_in_the_docs() -> None:
    assert drawn_buttons() == {action.value for action in Action}


# -------------------------------------------------------------------------------------------- the orchestrator's tools


def orchestrator_tool_names(tmp_path: Path) -> list[str]:
    """The tools the orchestrator offers a turn, in order, from the function its turn builds them with. (One place
    to adapt if that function changes.)"""

    class AnyDesk:
        """Offers every crew part's work tools; only their names are read here."""

        def work_tools(self) -> list[WorkTool]:
            async def never(caller: Caller, **arguments: object) -> str:
                raise AssertionError("a work tool was called")

            return [
                WorkTool(definition, never)
                for part in TOOL_PARTS
                for definition in work_tool_definitions(part).values()
            ]

        def turn_started(self, chat_id: int) -> None: ...

        def stop_waiting(self, chat_id: int) -> None: ...

    tools = orchestrator_tools(Workspaces(tmp_path), AnyDesk(), Caller(chat_id=1), SecretsFilter(), owner=True)
    return [tool.name for tool in tools]


@pytest.mark.parametrize(
    "where",
    [
        r"\n(tools      .*?)\nsystem",  # What the orchestrator sees each turn
        r"\n(\s*read_file / glob / grep  → .*?)→ the crew\s+part's",  # How a message flows, step 4
    ],
)
def test_every_orchestrator_tool_is_in_the_docs(tmp_path: Path, where: str) -> None:
    found = re.search(where, ARCHITECTURE, re.DOTALL)
    assert found, f"AGENT_ARCHITECTURE.md no longer has the tool list {where!r}"
    words = set(re.findall(r"\b[a-z]+(?:_[a-z]+)*\b", re.sub(r"agents/\S+|\([^)]*\)", "", found.group(1))))
    names = set(orchestrator_tool_names(tmp_path))
    assert names <= words, f"tools missing from AGENT_ARCHITECTURE.md: {sorted(names - words)}"
    drawn = {word for word in words if "_" in word}  # every tool but glob and grep has a two-word name
    assert drawn <= names, f"AGENT_ARCHITECTURE.md lists tools the orchestrator has not: {sorted(drawn - names)}"


# ----------------------------------------------------------------------------------- the modules the docs point at


def named_in_docs(text: str) -> set[str]:
    """The modules and folders a doc names by path (`agents/work/crew.py`, `agents/work/crew.Crew`, `agents/inputs`)."""
    return set(re.findall(r"\b(?:agents|telegram_bot)/[\w/]*\w(?:\.\w+)*", text))


def unresolved(reference: str) -> str | None:
    """Why `reference` names nothing in the code (None when it names a folder, a module or a module's top-level name:
    a function, class or constant)."""
    path, *names = reference.removesuffix(".py").split(".")
    if (ROOT / path).is_dir() and not names:
        return None
    module = ROOT / f"{path}.py"
    if not module.is_file():
        return f"{reference}: no module or folder {path}"
    if names and not re.search(rf"^(?:async def|def|class) {names[0]}\b|^{names[0]}\b.*=", module.read_text(), re.M):
        return f"{reference}: {path}.py defines no {names[0]}"
    return None


@pytest.mark.parametrize("doc", ["README.md", "AGENT_ARCHITECTURE.md"])
def test_every_module_a_doc_names_exists(doc: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    wrong = sorted(filter(None, map(unresolved, named_in_docs(text))))
    assert not wrong, f"{doc} names what the code has not (renamed or moved?):\n" + "\n".join(wrong)


def test_the_reference_check_sees_a_moved_module_and_a_gone_name() -> None:
    assert unresolved("agents/work/crew.py") is None and unresolved("agents/inputs") is None
    assert unresolved("agents/work/crew.Crew") is None and unresolved("agents/doctor") is None
    assert unresolved("agents/github_inbox.py") == "agents/github_inbox.py: no module or folder agents/github_inbox"
    assert (
        unresolved("agents/work/crew.NoSuchThing")
        == "agents/work/crew.NoSuchThing: agents/work/crew.py defines no NoSuchThing"
    )
