"""Task and account commands: /tasks, /task N, /cancel [N], /usage, /log N, /new, /history, /workspace NAME,
/schedules, /notes.

Each acts on the conversation it was sent in: a private chat, a group, or one topic of a forum group."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from telegram import Update
from telegram.constants import ChatType

from agents.core.actions import Action, button
from agents.core.errors import ToolError
from agents.core.ids import parse_id
from agents.core.models import Caller
from agents.core.text import outside_text
from agents.work.crew import task_entries
from agents.work.standing import notes_markdown
from telegram_bot import handlers
from telegram_bot.conversation import caller_of, conversation_of
from telegram_bot.handlers import say
from telegram_bot.state import Context
from telegram_bot.updates import chat_of, runtime

T = TypeVar("T")


class BadArgument(ValueError):
    """A command argument that is not a task number; its message is the reply."""


def _task_number(context: Context) -> int | None:
    """The task number argument, None when there is none; BadArgument when it is not a task number."""
    if not context.args:
        return None
    number = parse_id(context.args[0])
    if number is None:
        raise BadArgument(f"`{context.args[0][:40]}` is not a task number (see /tasks for the numbers).")
    return number


_say = say


async def _named(
    update: Update, context: Context, command: str, read: Callable[[Caller, int], Awaitable[T | None]]
) -> T | None:
    """What `read` finds for the task of this conversation named by the command's argument (the read is bounded to
    the conversation and to what the user may see), or None after telling the user how to ask, or why not."""
    try:
        number = _task_number(context)
        found = await read(await caller_of(update, context), number) if number is not None else None
    except (BadArgument, ToolError) as err:
        await _say(update, context, str(err))
        return None
    if found is None:
        hint = f"There is no task #{number} in this chat. " if number is not None else ""
        await _say(update, context, f"{hint}Usage: /{command} N (see /tasks for the numbers).")
    return found


async def tasks(update: Update, context: Context) -> None:
    """/tasks: recent tasks with status, age and title."""
    listed = await runtime(context).chat_queries.recent_tasks(await conversation_of(update, context))
    text = "\n".join(f"• {entry}" for entry in task_entries(listed)) if listed else "No tasks yet."
    await _say(update, context, "**Recent tasks**\n" + text if listed else text)


async def task(update: Update, context: Context) -> None:
    """/task N: one task in detail."""
    rt = runtime(context)
    if (detail := await _named(update, context, "task", rt.chat_queries.task_detail)) is None:
        return
    found, usage = detail.task, detail.usage
    lines = [
        f"**Task #{found.id}** · {found.status.value} · {found.worker.value} · `{found.workspace}`",
        found.title,
        f"Branch: `{found.branch}`" if found.branch else "Branch: none",
        f"Tool calls: {len(detail.tool_calls)} · tokens in {usage.input_tokens:,} / out {usage.output_tokens:,} / "
        f"cache read {usage.cache_read_input_tokens:,} · cost ≈ ${detail.cost_usd:.4f}",
    ]
    if found.error:
        lines.append(f"Reason: {found.error}")
    if (pr := detail.pull_request) is not None:
        lines.append(f"Pull request: [#{pr.number}]({pr.url}) {pr.url}" + (" (draft)" if pr.draft else ""))
    lines.append("**Events:**")
    lines += [f"• {e.created_at:%H:%M:%S} {e.kind}: {outside_text(e.detail)}" for e in detail.events[-15:]]
    await _say(update, context, "\n".join(lines))
    await rt.deliveries.resend(found.stored_id, found.chat_id)  # its summary or proposal again, with the buttons


async def cancel(update: Update, context: Context) -> None:
    """/cancel [N]: cancel the only running task, or task N."""
    rt = runtime(context)
    caller = await caller_of(update, context)
    chat_id = caller.chat_id
    try:
        number = _task_number(context)
    except BadArgument as err:  # never fall back to "the only running task" on a mistyped number
        await _say(update, context, str(err))
        return
    if number is None:
        active = await rt.chat_queries.active_tasks(chat_id)
        if not active:
            await _say(update, context, "Nothing is running.")
            return
        if len({t.attempt_group or -t.stored_id for t in active}) > 1:  # a race's attempts are one thing to cancel
            await _say(
                update,
                context,
                "Several tasks are active; which one?\n" + "\n".join(f"• /cancel {t.id}: {t.title}" for t in active),
            )
            return
        number = active[0].stored_id
    try:
        await _say(update, context, await rt.crew.attempts.cancel_task(caller, number))
    except ToolError as err:
        await _say(update, context, str(err).capitalize())


async def usage(update: Update, context: Context) -> None:
    """/usage: tokens and estimated cost: this conversation's, its tasks and users (an owner's private chat: the whole
    bot's too)."""
    private = chat_of(update).type == ChatType.PRIVATE
    report = await runtime(context).chat_queries.usage_report(await caller_of(update, context), private_chat=private)
    await _say(update, context, report)


async def log(update: Update, context: Context) -> None:
    """/log N: a task's tool calls as a document."""
    rt = runtime(context)
    if (logged := await _named(update, context, "log", rt.chat_queries.task_log)) is None:
        return
    found, calls = logged.task, logged.tool_calls
    lines = [f"Task #{found.id} in workspace {found.workspace} ({found.status.value}): {found.title}", ""]
    for c in calls:
        status = f"ERROR {c.error}" if c.error else f"ok, {c.result_chars} chars"
        lines.append(f"{c.created_at:%Y-%m-%d %H:%M:%S} {c.agent} {c.tool}({c.arguments}) {c.duration_ms} ms: {status}")
    if not calls:
        lines.append("(no tool calls recorded)")
    if logged.network_decisions:  # the owner's network answers
        lines += ["", "Network requests:"]
        lines += [f"{e.created_at:%Y-%m-%d %H:%M:%S} {e.detail}" for e in logged.network_decisions]
    await rt.notifier.send_document(found.chat_id, f"task-{found.id}-log.txt", "\n".join(lines).encode())


async def new(update: Update, context: Context) -> None:
    """/new: start a fresh conversation (history stays stored)."""
    await runtime(context).chat_actions.new_conversation(await conversation_of(update, context))
    await _say(
        update, context, "Fresh start: I won't use the earlier conversation as context. Tasks and proposals are kept."
    )


async def history(update: Update, context: Context) -> None:
    """/history: the whole stored conversation as a document."""
    rt = runtime(context)
    conversation = await conversation_of(update, context)
    messages = await rt.chat_queries.history(conversation)
    text = (
        "\n\n".join(
            f"[{m.created_at:%Y-%m-%d %H:%M}] {m.role.value} ({m.input_method.value}):\n{m.content}" for m in messages
        )
        or "(empty)"
    )
    await rt.notifier.send_document(conversation, "history.md", text.encode("utf-8"))


async def workspace(update: Update, context: Context) -> None:
    """/workspace NAME: this conversation's workspace (in a topic: the topic's project); alone: which one it is."""
    rt = runtime(context)
    caller = await caller_of(update, context)
    if not context.args:
        bound = await rt.chat_queries.bound_workspace(caller.chat_id)
        names = ", ".join(w.name for w in rt.workspaces.all()) or "none yet"
        now = f"This conversation works in **{bound}**." if bound else "This conversation has no workspace of its own."
        await _say(update, context, f"{now} Set one with /workspace NAME (workspaces: {names}).")
        return
    try:
        await _say(update, context, await rt.crew.binding.bind(caller, " ".join(context.args)))
    except ToolError as err:
        await _say(update, context, str(err)[:1].upper() + str(err)[1:])


async def schedules(update: Update, context: Context) -> None:
    """/schedules: this conversation's schedules, each with its next run, last result and a Cancel button."""
    rt = runtime(context)
    caller = await caller_of(update, context)
    if rt.schedules is None:
        await _say(update, context, "Schedules are not available.")
        return
    listed = await rt.schedules.listing(caller)
    if not listed:
        await _say(update, context, "No schedules here. Ask in words, e.g. “every weekday at 9 run the tests in calc”.")
        return
    text = "**Schedules**\n" + "\n".join(f"• {line}" for _, line in listed)
    buttons = [[button(f"✖ Cancel #{s.stored_id}", Action.CANCEL_SCHEDULE, s.stored_id)] for s, _ in listed]
    await rt.notifier.send(caller.chat_id, text, buttons=buttons)


async def notes(update: Update, context: Context) -> None:
    """/notes: the standing notes that apply, in the order they apply, each with a Forget button."""
    rt = runtime(context)
    caller = await caller_of(update, context)
    listed = await rt.crew.notes.listed(caller)
    mine = [n for n in listed if rt.crew.access.is_owner(caller) or n.user_id == caller.user_id]  # what they may forget
    buttons = [[button(f"✖ Forget #{n.id}", Action.NOTE_FORGET, n.id or 0)] for n in mine] or None
    await rt.notifier.send(caller.chat_id, notes_markdown(listed, caller.user_id), buttons=buttons)


COMMANDS = {
    "tasks": tasks,
    "task": task,
    "cancel": cancel,
    "usage": usage,
    "log": log,
    "new": new,
    "history": history,
    "workspace": workspace,
    "schedules": schedules,
    "notes": notes,
}
MENU = [
    ("tasks", "recent tasks"),
    ("task", "one task in detail: /task N"),
    ("cancel", "stop a task: /cancel [N]"),
    ("usage", "tokens and cost"),
    ("log", "a task's tool calls: /log N"),
    ("new", "start a fresh conversation"),
    ("history", "the conversation as a file"),
    ("workspace", "this chat's or topic's workspace: /workspace NAME"),
    ("schedules", "scheduled runs, with Cancel"),
    ("notes", "your standing notes, each with Forget"),
]


def menu() -> list[tuple[str, str]]:
    """Every command with its one-line description, from this one place: the menu Telegram shows (setMyCommands) and
    /help's list, so a command added to MENU appears in both."""
    return handlers.COMMANDS + MENU


def help_text() -> str:
    """/help and /start: what to say to the bot, then every command of the menu."""
    listed = "\n".join(f"/{name}: {about}" for name, about in menu() if name not in ("start", "help"))
    return f"{handlers.HELP}\n\nCommands:\n{listed}"


async def start(update: Update, context: Context) -> None:
    """/start: greet."""
    user = update.effective_user
    name = (user.first_name if user else None) or "there"  # the renderer escapes it
    await say(update, context, f"Hi {name}! " + help_text())


async def help_command(update: Update, context: Context) -> None:
    """/help: what I can do."""
    await say(update, context, help_text())
