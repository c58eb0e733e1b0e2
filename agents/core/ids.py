"""Task and proposal numbers typed by a user or carried by a button: parsed strictly, within SQLite's range."""

from __future__ import annotations

import re

MAX_ID = 2**63 - 1  # SQLite INTEGER; a bigger Python int raises OverflowError when bound
_ID = re.compile(r"#?([0-9]{1,19})")


def parse_id(text: str | None) -> int | None:
    """`12` or `#12` → 12; anything else (`12a`, `-1`, `0`, a 20-digit number) → None."""
    match = _ID.fullmatch((text or "").strip())
    if match is None:
        return None
    number = int(match.group(1))
    return number if 0 < number <= MAX_ID else None


def valid_id(number: object) -> bool:
    """Whether `number` can name a stored row (an int in SQLite's range); tools pass what the model wrote."""
    return isinstance(number, int) and not isinstance(number, bool) and 0 < number <= MAX_ID
