"""The package's layers, checked from the source: a module imports only from its own layer or the layers below it.

The order (bottom first) is the one AGENT_ARCHITECTURE.md draws. Same-rank layers (git, inputs; llm, verify,
repo_map; work, chat; engine, review, inbound) do not import each other either. No two modules import each other, directly or round a circle. `agents/` never imports `telegram_bot`.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# layer -> rank; a module may import a layer of strictly lower rank, or its own layer.
RANKS = {
    "agents.core": 0,
    "agents.store": 1,
    "agents.sandbox": 2,
    "agents.git": 3,
    "agents.inputs": 3,
    "agents.workspaces": 3.5,  # the project folders: discovery, confinement, creation, credential files, file walk
    "agents.tools": 4,
    "agents.github": 4,  # GitHub's REST API, webhook events, which repository a workspace is on
    "agents.llm": 5,
    "agents.verify": 5,
    "agents.repo_map": 5,
    "agents.work": 6,
    "agents.chat": 6,
    "agents.engine": 6.5,  # TASK_ENGINE=temporal: runs the work layer's executor on runners; runtime/doctor use it
    "agents.review": 6.5,  # the review page (a Mini App): its server, launch data, diff renderer; runtime starts it
    "agents.inbound": 6.5,  # requests from outside the chat (GitHub mentions): drives the orchestrator and the crew
    "agents": 7,  # the top: runtime, and doctor/ (whose checks reach every layer below)
    "agents.evals": 7.5,  # `agentlab eval …`: not part of the bot; the task eval drives the whole runtime
    "telegram_bot.render": 8,
    "telegram_bot": 9,
}


def layer_of(module: str) -> str:
    parts = module.split(".")
    for n in (2, 1):
        name = ".".join(parts[:n])
        if name in RANKS and (n == 1 or len(parts) > 2 or (ROOT / Path(*parts)).is_dir()):
            return name
    raise AssertionError(f"{module} is in no layer")


def _statements_importing(body: Iterable[ast.AST]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements in `body` and in every statement list nested in it (functions, classes, if/try/with/
    match bodies, handlers): an import is a statement, so it is never inside an expression, which is not walked."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        for field in node._fields:
            value = getattr(node, field, None)
            if (
                isinstance(value, list)
                and value
                and isinstance(value[0], (ast.stmt, ast.excepthandler, ast.match_case))
            ):
                yield from _statements_importing(value)


@functools.cache
def import_statements(source: str) -> tuple[ast.Import | ast.ImportFrom, ...]:
    """Every import statement of a module's source, anywhere in its body. Cached by source: two tests read the
    product's modules, and parsing them is most of these tests' time."""
    return tuple(_statements_importing(ast.parse(source).body))


def imports(path: Path, module: str) -> set[str]:
    found: set[str] = set()
    for node in import_statements(path.read_text()):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module in ("agents", "telegram_bot"):
                found |= {f"{node.module}.{a.name}" for a in node.names}
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {m for m in found if m.split(".")[0] in ("agents", "telegram_bot")}


def modules() -> list[tuple[str, Path]]:
    found = []
    for package in ("agents", "telegram_bot"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.append((".".join(parts), path))
    return found


def upward(module: str, path: Path) -> list[str]:
    """The imports of `module` that do not point down."""
    mine = layer_of(module)
    wrong = []
    for target in sorted(imports(path, module)):
        theirs = layer_of(target)
        if theirs != mine and RANKS[theirs] >= RANKS[mine]:
            wrong.append(f"{module} ({mine}) imports {target} ({theirs})")
    return wrong


def test_every_module_is_in_a_layer_and_imports_only_point_down() -> None:
    found = modules()
    assert len(found) > 60 and all(layer_of(m) for m, _ in found)
    wrong = [line for module, path in found for line in upward(module, path)]
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The rule above is not vacuous: an import from a higher layer is reported."""
    source = tmp_path / "m.py"
    source.write_text("from agents.work.crew import Crew\nfrom agents.core import ids\n")
    assert upward("agents.store.database", source) == [
        "agents.store.database (agents.store) imports agents.work.crew (agents.work)"
    ]
    assert upward("agents.chat.orchestrator", tmp_path / "m.py") == [
        "agents.chat.orchestrator (agents.chat) imports agents.work.crew (agents.work)"  # same rank: also refused
    ]
    assert layer_of("agents.runtime") == "agents"
    assert layer_of("telegram_bot.handlers") == "telegram_bot"


def test_the_github_inbox_stands_above_the_work_it_drives(tmp_path: Path) -> None:
    """GitHub's inbox hands requests to the orchestrator and the crew, so it has a folder above them; in
    agents/github (the API client below the work layer, which the work layer's pull requests use) those imports
    would point up."""
    source = tmp_path / "m.py"
    source.write_text("from agents.chat.orchestrator import Orchestrator\nfrom agents.work.crew import Crew\n")
    assert upward("agents.inbound.github_inbox", source) == []
    assert upward("agents.github.inbox", source) == [
        "agents.github.inbox (agents.github) imports agents.chat.orchestrator (agents.chat)",
        "agents.github.inbox (agents.github) imports agents.work.crew (agents.work)",
    ]
    assert layer_of("agents.inbound.github_inbox") == "agents.inbound"
    assert RANKS["agents.inbound"] < RANKS["agents"]  # the runtime, at the top, builds it


def import_graph() -> dict[str, set[str]]:
    """module -> the agentlab modules it imports (anywhere in its body), resolved to modules that exist."""
    found = dict(modules())
    graph: dict[str, set[str]] = {}
    for module, path in found.items():
        targets = set()
        for target in imports(path, module):
            while target and target not in found:
                target = target.rpartition(".")[0]
            if target and target != module and not found[target].name == "__init__.py":
                targets.add(target)
        graph[module] = targets
    return graph


def circle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle in `graph` (as a path that ends where it starts), or [] when there is none."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_no_import_circle_anywhere() -> None:
    assert circle(import_graph()) == []


def test_the_circle_check_finds_a_circle() -> None:
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b"}, "b": set()}) == []


def test_the_layer_numbers_are_said_in_one_place() -> None:
    """RANKS above is the one source: AGENT_ARCHITECTURE.md's package tree shows the same ranks, and no package
    docstring gives a number of its own."""
    drawn = {}
    for line in (ROOT / "AGENT_ARCHITECTURE.md").read_text().splitlines():
        found = re.match(r"[│├└─\s]*(\w+)/\s+layer (\d+)(½?)", line)
        if found:
            drawn[found.group(1)] = int(found.group(2)) + (0.5 if found.group(3) else 0)
    for name, rank in drawn.items():
        layer = f"telegram_bot.{name}" if f"telegram_bot.{name}" in RANKS else f"agents.{name}"
        assert RANKS[layer] == rank, f"AGENT_ARCHITECTURE.md draws {name}/ as layer {rank}, RANKS says {RANKS[layer]}"
    assert len(drawn) >= 10, drawn
    for init in sorted(ROOT.glob("*/*/__init__.py")):
        head = init.read_text()[:200]
        assert not re.search(r"\b[Ll]ayer \d", head), f"{init.relative_to(ROOT)} numbers its layer: say it in RANKS"


def _names_a_test_module(name: str) -> bool:
    """`tests.test_x`, `test_x` or (relative) `.test_x`; not a product module such as `agents.verify.suite_run`."""
    parts = name.split(".")
    return parts[0].startswith("test_") or (parts[0] == "tests" and any(p.startswith("test_") for p in parts))


def imported_test_modules(path: Path) -> list[str]:
    """The test modules `path` imports (a test module is one named test_*; pytest collects it, nobody imports it)."""
    found = []
    for node in import_statements(path.read_text()):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or "", *(f"{node.module or ''}.{alias.name}" for alias in node.names)]
        else:
            continue
        named = [name for name in names if _names_a_test_module(name)]
        found += [f"line {node.lineno}: {named[0]}"] if named else []
    return found


def test_no_test_module_imports_another() -> None:
    """Helpers two test modules share live in tests/support/ (fixtures that must be shared, in conftest.py): a test
    module imported by another runs its tests' module code twice and ties their fixtures together."""
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if (found := imported_test_modules(path))
    }
    assert offenders == {}, f"move what these import into tests/support/: {offenders}"


def test_the_test_import_check_sees_each_form(tmp_path: Path) -> None:
    module = tmp_path / "test_a.py"
    module.write_text(
        "from tests.test_b import helper\nimport tests.test_c\nfrom tests import test_d\nfrom .test_e import x\n"
        "from tests.support.tasks import ended\nimport pytest\nfrom agents.verify.suite_run import TestRun\n"
        "class Nested:\n    def method(self):\n        try:\n            import tests.test_f\n"  # lines 8-11
        "        except ImportError:\n            if True:\n                from tests import test_g\n"  # 12-14
        "        with open('x'):\n            match 1:\n                case 1:\n                    import test_h\n"
    )
    assert [line.split(": ")[0] for line in imported_test_modules(module)] == [
        "line 1",
        "line 2",
        "line 3",
        "line 4",
        "line 11",
        "line 14",
        "line 18",
    ]
