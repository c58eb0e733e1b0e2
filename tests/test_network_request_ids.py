"""The ids of network questions: a press names one by id alone, so no two gates (a bot and its runners, or a bot
before and after a restart) may count the same ids, even when made in the same millisecond."""

from __future__ import annotations

import itertools
import time

import pytest

from agents.core.secrets_filter import SecretsFilter
from agents.sandbox.bwrap import NetworkPolicy
from agents.sandbox.network_gate import NetworkGate


def test_two_gates_made_at_the_same_moment_never_count_the_same_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", lambda: 1_795_000_000.0)  # the same clock for both processes
    gates = [
        NetworkGate(NetworkPolicy.ASK, None, None, 1.0, secrets=SecretsFilter())  # type: ignore[arg-type]  # no question is asked: no store, no chat
        for _ in range(2)
    ]
    first, second = ([*itertools.islice(gate._ids, 1000)] for gate in gates)
    assert not set(first) & set(second), "a press on one gate's question would answer the other's"
