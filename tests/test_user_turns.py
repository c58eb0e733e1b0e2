"""Users' turns in flight: a turn waiting on a foreground task does not hold up the work that yields to turns."""

from __future__ import annotations

import asyncio

from agents.core.user_turns import UserTurns, waiting_on_work


async def test_a_turn_waiting_on_work_does_not_count_as_in_flight_meanwhile() -> None:
    turns = UserTurns(quiet_seconds=0)
    with turns.turn():
        assert turns.active == 1
        with waiting_on_work():
            assert turns.active == 0
            await asyncio.wait_for(turns.quiet(), 1)  # what the awaited task does between turns goes on
        assert turns.active == 1
    assert turns.active == 0
    with waiting_on_work():  # outside any turn: nothing to leave
        assert turns.active == 0
    with turns.turn(), turns.turn():
        with waiting_on_work():  # one turn waits; the other is still in flight
            assert turns.active == 1
        assert turns.active == 2
