"""How much a model thinks before it answers: the request's `thinking` and `output_config.effort` parameters.

From settings (WORKER_THINKING, WORKER_EFFORT, ORCHESTRATOR_THINKING, ORCHESTRATOR_EFFORT): `adaptive` lets the model
decide when and how much to think where the model supports it (the 4.6 models and later), and falls back to a fixed
budget (`enabled`, WORKER_THINKING_BUDGET tokens) on older models that think; `off` sends no thinking parameter.
The effort is sent only when set. Thinking blocks of an answer are kept whole in the conversation (the tool loop
keeps every block of an answer as it came): the API refuses a tool-use turn whose thinking was dropped or changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

ThinkingMode = Literal["adaptive", "enabled", "off"]
Effort = Literal["", "low", "medium", "high", "xhigh", "max"]

MIN_BUDGET = 1024  # the API's least thinking budget
# models that take {"type": "adaptive"}: Opus and Sonnet from 4.6 on, and the later families
_ADAPTIVE = re.compile(r"claude-(?:(?:opus|sonnet)-4-(?:[6-9]|[1-9]\d)(?!\d)|(?:opus|sonnet|mythos|fable)-[5-9])")
# models that think with a fixed budget: 3.7 Sonnet and the 4.x models
_THINKS = re.compile(r"claude-(?:3-7-sonnet|(?:opus|sonnet|haiku)-4|(?:opus|sonnet|haiku)-[5-9])")


def supports_adaptive(model: str) -> bool:
    return bool(_ADAPTIVE.search(model))


def supports_thinking(model: str) -> bool:
    return supports_adaptive(model) or bool(_THINKS.search(model))


@dataclass(frozen=True)
class Reasoning:
    """A role's thinking mode, its budget where the model needs one, and its effort."""

    mode: ThinkingMode = "off"
    budget: int = 8000
    effort: Effort = ""

    def params(self, model: str, max_tokens: int) -> dict[str, Any]:
        """The request parameters for `model` answering in at most `max_tokens` (thinking counts towards them)."""
        params: dict[str, Any] = {}
        if self.mode != "off" and supports_thinking(model):
            if self.mode == "adaptive" and supports_adaptive(model):
                params["thinking"] = {"type": "adaptive"}
            else:  # a fixed budget, below max_tokens as the API requires; none when max_tokens leaves no room
                budget = min(self.budget, max_tokens - MIN_BUDGET)
                if budget >= MIN_BUDGET:
                    params["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if self.effort:
            params["output_config"] = {"effort": self.effort}
        return params
