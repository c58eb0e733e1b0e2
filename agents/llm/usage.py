"""Token usage and cost: today, this month, the most expensive tasks, and the daily budget."""

from __future__ import annotations

from collections import defaultdict

from agents.core.models import Usage, UsageRecord
from agents.core.settings import Settings
from agents.llm.calls_in_flight import IN_FLIGHT
from agents.llm.client import cost_usd
from agents.store.database import Store, start_of_day, start_of_month


def total(records: list[UsageRecord]) -> Usage:
    result = Usage()
    for r in records:
        result = result + r
    return result


async def cost_today(store: Store, settings: Settings) -> float:
    return cost_usd(await store.total_since(start_of_day()), settings)


async def budget_exceeded(store: Store, settings: Settings, *, with_calls_under_way: bool = False) -> str | None:
    """A sentence for the user when the optional daily budget is spent, else None: what today's usage rows say, and
    (`with_calls_under_way`: the check before a model call) what the calls under way in this process may still cost
    (agents/llm/calls_in_flight.py)."""
    if settings.anthropic.daily_budget_usd is None:
        return None
    held = cost_usd(IN_FLIGHT.usage, settings) if with_calls_under_way else 0.0
    return budget_refusal(settings.anthropic.daily_budget_usd, await cost_today(store, settings), held)


def budget_refusal(budget: float | None, spent: float, held: float = 0.0) -> str | None:
    """A sentence for the user when `spent` (USD today) and `held` (what calls under way may cost) reach the daily
    `budget` (None: no budget), else None."""
    if budget is None or spent + held < budget:
        return None
    under_way = f", and up to ${held:.2f} more in model calls under way" if held else ""
    return (
        f"The daily budget of ${budget:.2f} is spent (${spent:.2f} today{under_way}); "
        "new tasks are refused until tomorrow (UTC). Raise DAILY_BUDGET_USD to allow more."
    )


async def user_names(store: Store) -> dict[int, str]:
    """user id → the name their newest task was started under (users are known by their tasks)."""
    rows = await store.rows(
        "SELECT user_id, user_name FROM tasks WHERE user_id IS NOT NULL AND user_name IS NOT NULL ORDER BY id"
    )
    return {int(row[0]): row[1] for row in rows}


def per_user_lines(
    today: list[UsageRecord], month: list[UsageRecord], settings: Settings, names: dict[int, str], where: str = ""
) -> list[str]:
    """Each user's cost today and this month in the rows given (a team shares one bot; the daily budget is shared
    too); `where` says which rows those are (" in this chat")."""
    users = sorted({r.user_id for r in month if r.user_id is not None})
    if not users:
        return []
    lines = [f"**By user{where}** (today · this month):"]
    for user in users:
        spent_today = cost_usd(total([r for r in today if r.user_id == user]), settings)
        spent_month = cost_usd(total([r for r in month if r.user_id == user]), settings)
        lines.append(f"• {names.get(user, f'user {user}')}: ${spent_today:.4f} · ${spent_month:.4f}")
    return lines


def _line(label: str, usage: Usage, settings: Settings, calls: int) -> str:
    return (
        f"**{label}**: ${cost_usd(usage, settings):.4f} · {calls} calls · in {usage.input_tokens:,} · "
        f"out {usage.output_tokens:,} · cache read {usage.cache_read_input_tokens:,} · "
        f"cache write {usage.cache_creation_input_tokens:,}"
    )


async def usage_report(
    store: Store, settings: Settings, chat_id: int | None = None, top: int = 5, *, whole_bot: bool = True
) -> str:
    """/usage's text. `whole_bot`: every chat's usage, per user across the bot (an owner in a private chat). Without
    it only this chat's usage is itemised, per user too: a group must not learn what a member (or the owner) spent in
    a private chat with the bot, nor a member what other chats spend; the whole bot's spending shows only as what is
    left of the shared daily budget, which is why a task may be refused."""
    today = await store.usage_since(start_of_day())
    month = await store.usage_since(start_of_month())
    here_today = [r for r in today if r.chat_id == chat_id]
    here_month = [r for r in month if r.chat_id == chat_id]
    lines = []
    if whole_bot:
        lines += [
            _line("Today", total(today), settings, len(today)),
            _line("This month", total(month), settings, len(month)),
        ]
    if chat_id is not None:
        lines.append(_line("This chat today", total(here_today), settings, len(here_today)))
        lines.append(_line("This chat this month", total(here_month), settings, len(here_month)))
    names = await user_names(store)
    if whole_bot:
        lines += per_user_lines(today, month, settings, names)
    else:
        lines += per_user_lines(here_today, here_month, settings, names, where=" in this chat")
    by_task: dict[int, list[UsageRecord]] = defaultdict(list)
    for r in month:
        if r.task_id is not None and (chat_id is None or r.chat_id == chat_id):
            by_task[r.task_id].append(r)
    ranked = sorted(by_task.items(), key=lambda kv: cost_usd(total(kv[1]), settings), reverse=True)[:top]
    if ranked:
        lines.append("**Most expensive tasks this month:**")
        for task_id, records in ranked:
            task = await store.get_task(task_id)
            title = task.title[:60] if task else "?"
            lines.append(f"• #{task_id} ${cost_usd(total(records), settings):.4f}: {title}")
    if (budget := settings.anthropic.daily_budget_usd) is not None:
        spent = cost_usd(total(today), settings)
        lines.append(f"Daily budget: ${budget:.2f} for the whole bot, ${max(budget - spent, 0.0):.2f} of it left today")
    lines.append("_Costs are estimates from the price table in settings._")
    return "\n".join(lines)
