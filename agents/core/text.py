"""Text measures shared by every layer: a cheap token estimate and a head-and-tail cut."""

from __future__ import annotations


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (characters / 4, rounded up) for budgets and history; never used for billing."""
    return -(-len(text) // 4)


def keep_head_and_tail(text: str, limit: int, what: str = "output") -> str:
    """`text` if it fits in `limit` characters, else its beginning and end with a note of what was left out."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return (
        f"{text[:head]}\n\n[… {cut:,} characters of this {what} left out ({len(text):,} in all); the beginning and "
        f"the end are shown. Narrow the call (offset/limit, a grep, a shorter command output) to see the middle. …]"
        f"\n\n{text[-tail:]}"
    )
