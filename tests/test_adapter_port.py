"""The chat adapter stays thin, checked from the source: `telegram_bot/` reaches running work through the runtime's
chat actions (agents/work/chat_actions.py), reads what its commands show through the runtime's chat queries
(agents/work/chat_queries.py) and otherwise goes through the crew, never through the executor; it imports no private
name of another module; it asks the notifier what it can do by a method, never by its class; and it touches the store
only where the list below says why. A new reach fails here and names itself."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (module, what of the store it names) -> why the adapter may; nothing else. The store is opened before the runtime
# exists (the notifier records where it sends and which buttons it shows from its first send); from then on the
# adapter reads through the runtime's chat queries and acts through its chat actions.
STORE_REACHES = {
    ("app", "Store.open"): "opened before the runtime: the notifier records where it sends and which buttons it shows",
    ("app", "store"): "handed to Runtime.start, which owns it from then on",
    ("app", "store.conversations"): "the notifier's places (a forum topic is a conversation of its own)",
    ("app", "store.shown_buttons"): "the notifier records the buttons each message it sends carries",
    ("app", "store.chat_moves"): "the notifier follows a group Telegram upgraded to a supergroup to its new chat id",
    ("app", "store.seen_events.forget_before"): "Telegram's update keys older than Telegram keeps an update",
}
REACH = re.compile(r"(?:^|\.)((?:store|Store|executor)(?:\.\w+)*)$")


def reaches(source: str) -> set[str]:
    """What a module names of the store or the executor: each whole attribute chain that ends at or passes them
    (`rt.store.conversations.topic` -> `store.conversations.topic`)."""
    tree = ast.parse(source)
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    return {
        match.group(1)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in inner
        if (match := REACH.search(ast.unparse(node)))
    }


def private_imports(source: str) -> set[str]:
    """`from agentlab's module import _name`: a second caller of a private name."""
    return {
        f"{node.module}.{alias.name}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("agents", "telegram_bot")
        for alias in node.names
        if alias.name.startswith("_")
    }


def notifier_class_checks(source: str) -> set[str]:
    """`isinstance(…notifier, …)` or `isinstance(…, …Notifier)`: asking the notifier's class what it can do."""
    return {
        ast.unparse(node)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
        if "notifier" in ast.unparse(node).lower()
    }


def adapter_modules() -> dict[str, str]:
    return {path.stem: path.read_text() for path in sorted((ROOT / "telegram_bot").rglob("*.py"))}


def test_the_adapter_never_reaches_the_executor_and_the_store_only_where_listed() -> None:
    found = {(module, reach) for module, source in adapter_modules().items() for reach in reaches(source)}
    assert not {r for r in found if r[1].startswith("executor")}, "the adapter reaches the executor"
    assert not {r for r in found if r[0] in ("buttons", "steering")}, "buttons and replies go through chat actions"
    unlisted = sorted(found - set(STORE_REACHES))
    assert not unlisted, (
        f"new store reaches in telegram_bot/ (use the runtime's chat actions, its chat queries or the crew): {unlisted}"
    )
    assert not set(STORE_REACHES) - found, "a listed reach is gone: drop it from STORE_REACHES"


def test_the_adapter_imports_no_private_name_and_asks_no_notifier_its_class() -> None:
    for module, source in adapter_modules().items():
        assert not private_imports(source), f"telegram_bot.{module}: {private_imports(source)}"
        assert not notifier_class_checks(source), f"telegram_bot.{module}: {notifier_class_checks(source)}"


def test_the_checks_see_what_they_refuse() -> None:
    """Not vacuous: the reaches this port replaced are each reported."""
    old_buttons = (
        "from telegram_bot.app import _post_init\n"
        "async def on_button(rt, caller, item, choice):\n"
        "    if isinstance(rt.notifier, TelegramNotifier):\n"
        "        await rt.notifier.buttons_settled()\n"
        "    rt.executor.network.decide(caller.chat_id, item, choice)\n"
        "    await rt.executor.questions.answer(caller.chat_id, caller.user_id, item)\n"
        "    await rt.store.add_message(None)\n"
    )
    assert reaches(old_buttons) == {"executor.network.decide", "executor.questions.answer", "store.add_message"}
    assert private_imports(old_buttons) == {"telegram_bot.app._post_init"}
    assert notifier_class_checks(old_buttons) == {"isinstance(rt.notifier, TelegramNotifier)"}
