"""The holds of model calls under way against the daily budget (agents/llm/calls_in_flight.py): a check the holds
alone refuse waits for a call to end and is asked again; with nothing held, a refusal is final."""

from __future__ import annotations

import asyncio

from agents.core.models import Usage
from agents.llm.calls_in_flight import CallsInFlight


async def test_a_check_refused_by_holds_waits_for_a_call_to_end_and_one_refused_by_spend_does_not() -> None:
    calls = CallsInFlight()
    spent = [0.0]

    async def check() -> str | None:  # a budget of 1.0, each held output token costing 0.001
        return "spent" if spent[0] + calls.usage.output_tokens / 1000 >= 1.0 else None

    first, let_first_go = await calls.admit(Usage(output_tokens=1000), check)
    assert first is None and calls.usage.output_tokens == 1000
    second = asyncio.create_task(calls.admit(Usage(output_tokens=1000), check))
    await asyncio.sleep(0.05)
    assert not second.done(), "refused for good while the first call was only under way"
    spent[0] = 0.2  # what the first call really cost, recorded
    let_first_go()
    refusal, let_second_go = await asyncio.wait_for(second, 5)
    assert refusal is None and calls.usage.output_tokens == 1000
    let_second_go()
    let_second_go()  # twice is harmless
    assert calls.usage == Usage()
    spent[0] = 1.0
    refusal, _ = await asyncio.wait_for(calls.admit(Usage(output_tokens=1), check), 5)
    assert refusal == "spent" and calls.usage == Usage()
