"""Token usage and cost: today, this month, the most expensive tasks, and the daily budget."""

from __future__ import annotations

from collections import defaultdict

from agents.core.models import Usage, UsageRecord
from agents.core.settings import Settings
from agents.llm.client import cost_usd
from agents.store.database import Store, start_of_day, start_of_month


def total(records: list[UsageRecord]) -> Usage:
    result = Usage()
    for r in records:
        result = result + r
    return result


async def cost_today(store: Store, settings: Settings) -> float:
    return cost_usd(total(await store.usage_since(start_of_day())), settings)


async def budget_exceeded(store: Store, settings: Settings) -> str | None:
    """A sentence for the user when the optional daily budget is spent, else None."""
    if settings.daily_budget_usd is None:
        return None
    spent = await cost_today(store, settings)
    if spent < settings.daily_budget_usd:
        return None
    return (
        f"The daily budget of ${settings.daily_budget_usd:.2f} is spent (${spent:.2f} today); "
        "new tasks are refused until tomorrow (UTC). Raise DAILY_BUDGET_USD to allow more."
    )


def _line(label: str, usage: Usage, settings: Settings, calls: int) -> str:
    return (
        f"**{label}**: ${cost_usd(usage, settings):.4f} · {calls} calls · in {usage.input_tokens:,} · "
        f"out {usage.output_tokens:,} · cache read {usage.cache_read_input_tokens:,} · "
        f"cache write {usage.cache_creation_input_tokens:,}"
    )


async def usage_report(store: Store, settings: Settings, chat_id: int | None = None, top: int = 5) -> str:
    today = await store.usage_since(start_of_day())
    month = await store.usage_since(start_of_month())
    lines = [
        _line("Today", total(today), settings, len(today)),
        _line("This month", total(month), settings, len(month)),
    ]
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
    if settings.daily_budget_usd is not None:
        lines.append(f"Daily budget: ${settings.daily_budget_usd:.2f}")
    lines.append("_Costs are estimates from the price table in settings._")
    return "\n".join(lines)
